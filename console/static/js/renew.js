// Renewing an OpenID sign-in before its ID token expires, so that the
// console keeps working across the expiry and the page keeps its state
// (an edit, a filter, a paused stream).
//
// With a refresh token (the provider gave one at sign-in), the page asks
// the token endpoint for a new ID token a little before the current one
// expires (renewalAt), and goes on with it: nothing is shown. The refresh
// token lives in this object's memory only, never in the tab's or the
// browser's storage: a reload forgets it, and the page then prompts.
//
// Without one (the provider gives none, a reload forgot it, or the renewal
// was refused), the page shows a banner at the same moment with "Sign in
// again". That opens the sign-in in a popup window (it is a click, so the
// browser allows it), which hands the new tokens back to this page
// (postMessage, same origin only) and closes: the page is never left, so
// nothing on it is lost. After the expiry the banner says that calls are
// refused until the user signs in again; the page itself stays.
//
// A new token must be for the same subject; it replaces the session's token
// in place (Session.token, and the tab's sessionStorage as at login), so
// every later call and stream carries it.

import {h, replace} from './dom.js';
import {claimsOf, renewSignIn} from './signin.js';

// The lead before expiry: a fifth of the token's lifetime, at least 5 s
// and at most 2 min.
const minLeadMs = 5000;
const maxLeadMs = 120000;
// setTimeout's largest delay.
const maxDelayMs = 2 ** 31 - 1;
// messageKind marks the popup's message to its opener.
export const messageKind = 'sundial.signin';

// lifetimeOf reads a bearer's subject and validity in milliseconds, or
// null when it is not a JWT with an expiry (a Sundial token expires in
// the server's store, not in the token).
export function lifetimeOf(token) {
  if (String(token).split('.').length !== 3) return null;
  let c;
  try {
    c = claimsOf(token);
  } catch (e) {
    return null;
  }
  if (!c || typeof c.exp !== 'number') return null;
  return {sub: c.sub, iat: typeof c.iat === 'number' ? c.iat * 1000 : NaN, exp: c.exp * 1000};
}

// renewalAt is when to renew a token valid from iat to exp (milliseconds):
// a fifth of its lifetime before exp, at least minLeadMs and at most
// maxLeadMs before. Without a usable iat, maxLeadMs before.
export function renewalAt(iat, exp) {
  const life = Number.isFinite(iat) && iat < exp ? exp - iat : 5 * maxLeadMs;
  return exp - Math.min(maxLeadMs, Math.max(minLeadMs, life / 5));
}

export class Renewal {
  // cfg is signin.json; banner the element the prompt is shown in;
  // keep(token) stores a new token for the tab. The page is not reloaded:
  // its next call, by the user or the refresh they turned on, carries the
  // new token.
  constructor(cfg, {banner, keep, now}) {
    this.cfg = cfg;
    this.banner = banner;
    this.keep = keep;
    this.now = now || (() => Date.now());
    this.session = null;
    this.refreshToken = '';
    this.timer = null;
    this.popup = null;
    window.addEventListener('message', (ev) => this.received(ev));
  }

  // start follows session's token, renewing it with refreshToken ('' for
  // none: the page then prompts).
  start(session, refreshToken) {
    this.stop();
    this.session = session;
    this.refreshToken = refreshToken || '';
    this.schedule();
  }

  // stop forgets the session and the refresh token (log out).
  stop() {
    if (this.timer) window.clearTimeout(this.timer);
    this.timer = null;
    this.session = null;
    this.refreshToken = '';
    this.hide();
  }

  at(when, f) {
    if (this.timer) window.clearTimeout(this.timer);
    this.timer = window.setTimeout(f, Math.min(maxDelayMs, Math.max(0, when - this.now())));
  }

  schedule() {
    const life = this.session && lifetimeOf(this.session.token);
    if (!life) return; // not a JWT with an expiry: nothing to renew
    this.at(renewalAt(life.iat, life.exp), () => this.due());
  }

  // due renews with the refresh token, or prompts.
  async due() {
    const session = this.session;
    const life = session && lifetimeOf(session.token);
    if (!life) return;
    if (this.refreshToken) {
      try {
        const got = await renewSignIn(this.cfg, this.refreshToken, life.sub);
        if (this.session !== session) return; // logged out meanwhile
        this.refreshToken = got.refreshToken;
        this.use(got.token);
        return;
      } catch (e) {
        if (this.session !== session) return;
        this.refreshToken = '';
        this.prompt(life.exp, `The sign-in could not be renewed (${e.message}).`);
        return;
      }
    }
    this.prompt(life.exp, '');
  }

  // use makes token the session's.
  use(token) {
    this.session.token = token;
    this.keep(token);
    this.hide();
    this.schedule();
  }

  prompt(exp, why) {
    const expired = this.now() >= exp;
    const when = new Date(exp).toLocaleTimeString();
    const button = h('button', {type: 'button', class: 'primary', id: 'renew-signin', onclick: () => this.signInAgain()}, 'Sign in again');
    replace(this.banner, why ? `${why} ` : '',
      expired ? `Your sign-in expired at ${when}: the API refuses the console's calls until you sign in again. This page stays as it is.` :
        `Your sign-in ends at ${when}. Sign in again to go on; this page stays as it is.`,
      ' ', button);
    this.banner.setAttribute('role', expired ? 'alert' : 'status');
    this.banner.hidden = false;
    if (!expired) this.at(exp, () => this.prompt(exp, why));
  }

  hide() {
    this.banner.hidden = true;
    replace(this.banner);
  }

  // signInAgain opens the sign-in in a popup, which posts the tokens back.
  signInAgain() {
    const url = new URL('./', window.location.href);
    url.searchParams.set('signin', 'popup');
    this.popup = window.open(url.toString(), 'sundial-signin', 'popup,width=520,height=640');
    if (!this.popup) {
      replace(this.banner, 'The browser blocked the sign-in window: allow pop-ups for this page, or log out and sign in again.');
    }
  }

  // received takes the tokens of the popup this page opened.
  received(ev) {
    if (ev.origin !== window.location.origin || !this.popup || ev.source !== this.popup) return;
    const m = ev.data || {};
    if (m.kind !== messageKind || !this.session) return;
    this.popup = null;
    const now = lifetimeOf(this.session.token);
    const got = lifetimeOf(m.token);
    if (!got || (now && got.sub !== now.sub)) {
      replace(this.banner, 'The new sign-in is for another user: log out first to change user. ',
        h('button', {type: 'button', class: 'primary', id: 'renew-signin', onclick: () => this.signInAgain()}, 'Sign in again'));
      return;
    }
    this.refreshToken = m.refreshToken || '';
    this.use(m.token);
  }
}

// handOver sends a popup's sign-in to the page that opened it, and closes
// the popup; false when there is no such page (then this window logs in
// itself).
export function handOver(got) {
  const opener = window.opener;
  if (!opener || opener.closed) return false;
  try {
    if (opener.location.origin !== window.location.origin) return false;
  } catch (e) {
    return false; // another origin: its location cannot be read
  }
  opener.postMessage({kind: messageKind, token: got.token, refreshToken: got.refreshToken}, window.location.origin);
  window.close();
  return true;
}
