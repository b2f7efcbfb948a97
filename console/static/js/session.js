// The session: the pasted token, kept in sessionStorage (gone when the tab
// closes, never in the browser's lasting storage or a cookie), and who
// it stands for.

import {ApiError, call} from './api.js';

const tokenKey = 'sundial.console.token';

export function savedToken() {
  return window.sessionStorage.getItem(tokenKey);
}

export function forget() {
  window.sessionStorage.removeItem(tokenKey);
}

// probeTeam is a team no installation has: a plan for it is refused to
// every team's principal, and the refusal names the caller's role and team.
const probeTeam = '~console-role-probe';

// whoAmI asks the API who the token stands for, with reads only. The API
// has no WhoAmI call yet, so it asks twice: GetCluster answers only the
// cluster admin; for anyone else a PlanApply (which produces nothing) for
// a team nobody has is refused, and the refusal says "the caller is ROLE
// of team TEAM". What the console shows follows from this; what a caller
// may do, the server still decides on every call.
export async function whoAmI(token) {
  try {
    await call(token, 'ClusterService', 'GetCluster', {});
    return new Session(token, {team: '*', role: 'admin', clusterAdmin: true});
  } catch (e) {
    if (!(e instanceof ApiError) || e.code !== 'permission_denied') throw e;
  }
  try {
    await call(token, 'OperatorService', 'PlanApply', {jobs: [{ownerTeam: probeTeam}]});
  } catch (e) {
    if (!(e instanceof ApiError) || e.code !== 'permission_denied') throw e;
    const m = /the caller is (\w+) of team "([^"]*)"/.exec(e.message);
    if (m) return new Session(token, {team: m[2], role: m[1], clusterAdmin: false});
  }
  // Unknown: show what a viewer sees; the server decides anyway.
  return new Session(token, {team: '', role: 'viewer', clusterAdmin: false});
}

// login checks a token and keeps it for the tab's session.
export async function login(token) {
  const s = await whoAmI(token);
  window.sessionStorage.setItem(tokenKey, token);
  return s;
}

const operates = new Set(['operator', 'admin']);

export class Session {
  constructor(token, who) {
    this.token = token;
    this.team = who.team;
    this.role = who.role;
    this.clusterAdmin = who.clusterAdmin;
  }

  // call calls the API with this session's token.
  call(service, method, body) {
    return call(this.token, service, method, body);
  }

  // mayOperate says whether the caller holds the operator role in team:
  // whether the console shows its write buttons.
  mayOperate(team) {
    return this.clusterAdmin || (operates.has(this.role) && team === this.team);
  }

  describe() {
    return this.clusterAdmin ? 'cluster admin' : `${this.role} of team ${this.team || '?'}`;
  }
}
