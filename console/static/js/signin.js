// Sign-in with the OpenID provider whose tokens the API accepts: an
// authorization-code flow with PKCE (RFC 7636, S256), as a public client.
// There is no client secret anywhere. The API publishes what the page
// needs (signin.json, beside index.html): the issuer, the provider's
// authorization and token endpoints and the console's client id.
//
// The flow: the page makes a code_verifier, its S256 code_challenge, a
// state and a nonce with Web Crypto, keeps them in this tab's
// sessionStorage, and sends the browser to the authorization endpoint.
// The provider sends it back to the page's own folder with a code and the
// state. The page forgets what it kept (whatever happens next), checks the
// state, exchanges the code with the verifier at the token endpoint, and
// checks the ID token's nonce. The ID token is then the bearer, exactly
// like a pasted one: WhoAmI says who it stands for, and the server checks
// its signature, issuer and audience on every call.
//
// A refresh token, when the provider answers one (it is asked for with
// offline_access when its discovery lists the scope), is handed to the
// caller and kept in memory only (renew.js), never in any storage: it
// renews the ID token before it expires (renewSignIn). A sign-in started
// with {popup: true} runs in a window the page opened, which hands the
// tokens to its opener (same origin only) and closes, so the page that
// asked keeps its state.

const pendingKey = 'sundial.console.signin';
const exchangeTimeoutMs = 30000;

// signInConfig reads signin.json: null when the API offers no sign-in (or
// the document cannot be read: the pasted token still works).
export async function signInConfig() {
  try {
    const res = await fetch(new URL('signin.json', window.location.href), {cache: 'no-store', credentials: 'omit'});
    if (!res.ok) return null;
    const cfg = await res.json();
    if (!cfg || !cfg.authorizationEndpoint || !cfg.tokenEndpoint || !cfg.clientId) return null;
    return cfg;
  } catch (e) {
    return null;
  }
}

// providerName is what the button names: the issuer's host.
export function providerName(cfg) {
  try {
    return new URL(cfg.issuer || cfg.authorizationEndpoint).host;
  } catch (e) {
    return 'your identity provider';
  }
}

// base64url is the unpadded URL-safe base64 of bytes.
function base64url(bytes) {
  let s = '';
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return window.btoa(s).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

// randomString is n random bytes, base64url: 32 bytes make a 43-character
// verifier, inside RFC 7636's 43 to 128.
function randomString(n) {
  return base64url(window.crypto.getRandomValues(new Uint8Array(n)));
}

// challengeOf is the S256 code_challenge of a verifier.
export async function challengeOf(verifier) {
  const digest = await window.crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return base64url(digest);
}

// redirectURI is the page's own folder, without query or fragment: the
// same under any sub-path a proxy mounts the API under.
function redirectURI() {
  return new URL('./', window.location.href).toString();
}

// startSignIn keeps a new verifier, state and nonce in this tab and sends
// the browser to the provider. It does not return.
export async function startSignIn(cfg, opts) {
  const verifier = randomString(32);
  const state = randomString(16);
  const nonce = randomString(16);
  const redirectUri = redirectURI();
  window.sessionStorage.setItem(pendingKey, JSON.stringify({
    verifier, state, nonce, redirectUri, fragment: window.location.hash, popup: Boolean(opts && opts.popup),
  }));
  const to = new URL(cfg.authorizationEndpoint);
  const q = to.searchParams;
  q.set('response_type', 'code');
  q.set('client_id', cfg.clientId);
  q.set('redirect_uri', redirectUri);
  q.set('scope', (cfg.scopes && cfg.scopes.length ? cfg.scopes : ['openid']).join(' '));
  q.set('state', state);
  q.set('nonce', nonce);
  q.set('code_challenge', await challengeOf(verifier));
  q.set('code_challenge_method', 'S256');
  window.location.assign(to.toString());
}

// returning says whether the page was loaded by the provider's redirect.
export function returning() {
  const q = new URLSearchParams(window.location.search);
  return q.has('code') || q.has('error') || q.has('state');
}

// SignInError is a sign-in that was refused, by the page or the provider.
export class SignInError extends Error {
  constructor(message) {
    super(message);
    this.code = 'sign-in refused';
  }
}

// claimsOf decodes a JWT's payload; the page reads only the nonce, the
// subject and the times (to renew before expiry), the API verifies the
// signature and every other claim.
export function claimsOf(jwt) {
  const part = String(jwt).split('.')[1] || '';
  const b64 = part.replaceAll('-', '+').replaceAll('_', '/');
  const text = window.atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(text, (c) => c.charCodeAt(0))));
}

// completeSignIn handles the provider's redirect back: it removes the code
// from the address bar, forgets the kept verifier, checks the state,
// exchanges the code and returns {token: the ID token, refreshToken (''
// when the provider gave none), popup: whether a popup sign-in started
// it}. It throws a SignInError naming what was wrong.
export async function completeSignIn(cfg) {
  const q = new URLSearchParams(window.location.search);
  const raw = window.sessionStorage.getItem(pendingKey);
  window.sessionStorage.removeItem(pendingKey);
  let pending = null;
  try {
    pending = raw ? JSON.parse(raw) : null;
  } catch (e) {
    pending = null;
  }
  // The code leaves the address bar (and the history) at once.
  window.history.replaceState(null, '', redirectURI() + ((pending && pending.fragment) || ''));
  if (q.has('error')) {
    const why = q.get('error_description');
    throw new SignInError(`the provider did not sign you in: ${q.get('error')}${why ? `: ${why}` : ''}`);
  }
  if (!cfg) throw new SignInError('the API offers no sign-in with a provider (signin.json): log in with a token');
  if (!pending) throw new SignInError('this tab started no sign-in, or it has already been used: sign in again');
  if (!q.get('state') || q.get('state') !== pending.state) {
    throw new SignInError('the state the provider sent back is not the one this tab sent: the sign-in is refused. Sign in again from this page');
  }
  if (!q.get('code')) throw new SignInError('the provider sent back no code: sign in again');
  const form = new URLSearchParams();
  form.set('grant_type', 'authorization_code');
  form.set('code', q.get('code'));
  form.set('redirect_uri', pending.redirectUri);
  form.set('client_id', cfg.clientId);
  form.set('code_verifier', pending.verifier);
  const data = await tokenCall(cfg, form, 'exchange the code');
  let claims;
  try {
    claims = claimsOf(data.id_token);
  } catch (e) {
    throw new SignInError('the provider\'s ID token is not a JWT');
  }
  if (claims.nonce !== pending.nonce) {
    throw new SignInError('the ID token does not carry the nonce this tab sent: the sign-in is refused');
  }
  return {token: data.id_token, refreshToken: data.refresh_token || '', popup: Boolean(pending.popup)};
}

// renewSignIn exchanges a refresh token for a new ID token of the same
// subject, and returns {token, refreshToken}: the provider's new refresh
// token, or the same one when it answered none. It throws a SignInError.
export async function renewSignIn(cfg, refreshToken, subject) {
  const form = new URLSearchParams();
  form.set('grant_type', 'refresh_token');
  form.set('refresh_token', refreshToken);
  form.set('client_id', cfg.clientId);
  const data = await tokenCall(cfg, form, 'renew the sign-in');
  let claims;
  try {
    claims = claimsOf(data.id_token);
  } catch (e) {
    throw new SignInError('the provider\'s renewed ID token is not a JWT');
  }
  if (claims.sub !== subject) throw new SignInError('the provider renewed the sign-in for another subject: it is refused');
  return {token: data.id_token, refreshToken: data.refresh_token || refreshToken};
}

// tokenCall posts form to the token endpoint and returns its answer,
// which holds an ID token; what names the call in errors.
async function tokenCall(cfg, form, what) {
  let res;
  try {
    res = await fetch(cfg.tokenEndpoint, {
      method: 'POST', body: form, cache: 'no-store', credentials: 'omit',
      signal: AbortSignal.timeout(exchangeTimeoutMs),
    });
  } catch (e) {
    throw new SignInError(`the provider's token endpoint did not answer: ${e.message}`);
  }
  let data = {};
  try {
    data = await res.json();
  } catch (e) {
    data = {};
  }
  if (!res.ok) {
    const why = [data.error, data.error_description].filter(Boolean).join(': ') || `HTTP ${res.status}`;
    throw new SignInError(`the provider refused to ${what}: ${why}`);
  }
  if (!data.id_token) throw new SignInError('the provider answered no ID token (is "openid" among the client\'s scopes?)');
  return data;
}
