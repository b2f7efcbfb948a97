// The session: the pasted token, kept in sessionStorage (gone when the tab
// closes, never in the browser's lasting storage or a cookie), and who
// it stands for.

import {call} from './api.js';
import {take, tokenKey} from './early.js';

export function savedToken() {
  return window.sessionStorage.getItem(tokenKey);
}

// keep keeps a token for the tab's session: a renewed sign-in's.
export function keep(token) {
  window.sessionStorage.setItem(tokenKey, token);
}

export function forget() {
  window.sessionStorage.removeItem(tokenKey);
}

// whoAmI asks the API who the token stands for (IdentityService.WhoAmI):
// its team, its role and what the role allows. What the console shows
// follows from this; what a caller may do, the server still decides on
// every call.
export async function whoAmI(token) {
  const who = await (take(token, 'IdentityService', 'WhoAmI', {}) || call(token, 'IdentityService', 'WhoAmI', {}));
  return new Session(token, {
    team: who.team || '',
    role: who.role || 'viewer',
    clusterAdmin: Boolean(who.clusterAdmin),
    subject: who.subject || '',
    permissions: who.permissions || [],
  });
}

// login checks a token and keeps it for the tab's session.
export async function login(token) {
  const s = await whoAmI(token);
  keep(token);
  return s;
}

export class Session {
  constructor(token, who) {
    this.token = token;
    this.team = who.team;
    this.role = who.role;
    this.clusterAdmin = who.clusterAdmin;
    this.subject = who.subject;
    this.permissions = new Set(who.permissions);
  }

  // call calls the API with this session's token (opts: see api.js),
  // or takes the answer of the same call started early (early.js).
  call(service, method, body, opts) {
    return (!opts && take(this.token, service, method, body)) || call(this.token, service, method, body, opts);
  }

  // may says whether the caller holds a permission ("read", "operate",
  // "apply", "cluster") in team: the cluster admin in every team, anyone
  // else in their own.
  may(permission, team) {
    if (!this.permissions.has(permission)) return false;
    return this.clusterAdmin || team === this.team;
  }

  // mayOperate says whether the caller may operate team's jobs: whether
  // the console shows their write buttons.
  mayOperate(team) {
    return this.may('operate', team);
  }

  // mayApply says whether the caller may apply and delete team's
  // definitions: whether the console shows the editor's Apply.
  mayApply(team) {
    return this.may('apply', team);
  }

  describe() {
    return this.clusterAdmin ? 'cluster admin' : `${this.role} of team ${this.team || '?'}`;
  }
}
