// The console's entry: login, the header's controls, and the router. Pages
// live in the URL's fragment (#/jobs?team=dev), so the server serves one
// page whatever sub-path a proxy mounts it under, and every filter is in
// the URL: a link or a reload shows the same view.

import {h, replace, errorBox} from './dom.js';
import {login, savedToken, whoAmI, forget, keep} from './session.js';
import {signInConfig, providerName, startSignIn, returning, completeSignIn} from './signin.js';
import {Renewal, handOver} from './renew.js';
import {Refresher} from './refresh.js';
import {route, drop} from './early.js';
import {overview} from './pages/overview.js';
import {jobs, job} from './pages/jobs.js';
import {run} from './pages/runs.js';
import {explorer} from './pages/explorer.js';
import {dags, dag, dagRun, dagEdit} from './pages/dags.js';
import {bulk} from './pages/bulk.js';
import {deadLetters} from './pages/dlq.js';
import {cluster} from './pages/cluster.js';
import {editor} from './pages/editor.js';
import {heatmap} from './pages/heatmap.js';
import {teams} from './pages/teams.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const controls = document.getElementById('controls');
const refreshed = document.getElementById('refreshed');
const refresher = new Refresher((at) => {
  refreshed.textContent = `updated ${at.toLocaleTimeString()}`;
});
let session = null;
// signIn is the API's OpenID sign-in (signin.json), null when it offers none.
let signIn = null;
// renewal renews an OpenID sign-in before it expires (null without signIn).
let renewal = null;
// signInRead settles when signin.json was read (boot starts it).
let signInRead = Promise.resolve();
// leaving holds what the shown page must undo when it goes (its streams).
const leaving = [];

function leave() {
  for (const f of leaving.splice(0)) f();
}

// go changes the fragment; the hashchange renders.
export function go(parts, query) {
  const q = query && [...query].length ? `?${query}` : '';
  window.location.hash = `#/${parts.map(encodeURIComponent).join('/')}${q}`;
}

const pages = {
  overview: () => overview,
  jobs: (r) => (r.parts[1] ? job : jobs),
  runs: (r) => (r.parts[1] ? run : explorer),
  dags: (r) => (r.parts[1] ? dag : dags),
  dagrun: () => dagRun,
  dagedit: () => dagEdit,
  bulk: () => bulk,
  dlq: () => deadLetters,
  cluster: () => cluster,
  edit: () => editor,
  heatmap: () => heatmap,
  teams: () => teams,
};

// rendered counts the pages rendered, so that a refresh of a page left
// while it was in flight does not mark the page shown since as loaded.
let rendered = 0;

async function render() {
  const mine = ++rendered;
  refresher.stop();
  leave();
  if (!session) return;
  const r = route();
  const name = pages[r.parts[0]] ? r.parts[0] : 'overview';
  for (const a of nav.querySelectorAll('a')) {
    if (a.getAttribute('href') === `#/${name}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const page = pages[name](r);
  main.replaceChildren();
  main.dataset.page = page.id;
  delete main.dataset.loaded;
  const refresh = page.mount(main, {session, route: r, go, onLeave: (f) => leaving.push(f)});
  await refresher.page(async () => {
    try {
      await refresh();
    } finally {
      drop(); // the first page took what was started early for it
    }
    if (mine === rendered) main.dataset.loaded = 'true';
  });
}

function showLogin(message) {
  nav.hidden = true;
  controls.hidden = true;
  main.dataset.page = 'login';
  const input = h('input', {type: 'password', id: 'token', name: 'token', autocomplete: 'off', required: true, spellcheck: 'false'});
  const status = h('div', {'aria-live': 'polite'}, message ? errorBox(message) : null);
  const form = h('form', {onsubmit: async (ev) => {
    ev.preventDefault();
    replace(status, 'Checking the token…');
    try {
      session = await login(input.value.trim());
      start();
    } catch (e) {
      replace(status, errorBox(e));
    }
  }},
  h('label', {for: 'token'}, 'API token (a Sundial token, a token of sundial dev, or an OpenID Connect token of the API\'s provider)'),
  input,
  h('button', {type: 'submit', class: 'primary', id: 'login'}, 'Log in'));
  let provider = null;
  if (signIn) {
    const button = h('button', {type: 'button', class: 'primary', id: 'signin', onclick: async () => {
      button.disabled = true;
      replace(status, `Going to ${providerName(signIn)}…`);
      try {
        await startSignIn(signIn);
      } catch (e) {
        button.disabled = false;
        replace(status, errorBox(e));
      }
    }}, `Sign in with ${providerName(signIn)}`);
    provider = h('div', {class: 'signin'},
      button,
      h('p', {class: 'muted'}, 'Signs in with the API\'s OpenID provider (authorization code with PKCE); its ID token is kept in this tab only. Or paste a token below.'));
  }
  replace(main, h('section', {class: 'login'},
    h('h1', {}, 'Log in to Sundial'),
    provider,
    h('p', {}, 'Paste a token. It is kept in this tab only (sessionStorage) and sent to the API as a bearer token; log out to forget it.'),
    form, status));
  input.focus();
}

// finishSignIn completes the provider's redirect back: the ID token is
// then logged in with exactly as a pasted one. A popup's sign-in goes to
// the page that opened it (renew.js), and the popup closes.
async function finishSignIn() {
  showLogin();
  const status = main.querySelector('.login [aria-live]');
  replace(status, 'Signing in…');
  try {
    const got = await completeSignIn(signIn);
    if (got.popup && handOver(got)) {
      replace(status, 'Signed in: back to the console.');
      return;
    }
    session = await login(got.token);
    start(got.refreshToken);
  } catch (e) {
    showLogin(e);
  }
}

// start shows the console for session; refreshToken ('' for none) renews
// an OpenID sign-in.
function start(refreshToken) {
  nav.hidden = false;
  controls.hidden = false;
  document.getElementById('whoami').textContent = session.describe();
  if (renewal) renewal.start(session, refreshToken);
  render();
}

// startRenewal makes the renewal of OpenID sign-ins, with its banner
// above the page.
function startRenewal() {
  const banner = h('div', {id: 'renew', class: 'notice renew', role: 'status', hidden: true});
  main.before(banner);
  renewal = new Renewal(signIn, {banner, keep});
}

function wireControls() {
  const auto = document.getElementById('auto-refresh');
  const every = document.getElementById('refresh-interval');
  auto.checked = refresher.on;
  every.value = String(refresher.every);
  auto.addEventListener('change', () => refresher.setOn(auto.checked));
  every.addEventListener('change', () => refresher.setEvery(Number(every.value)));
  document.getElementById('refresh-now').addEventListener('click', () => refresher.run());
  document.getElementById('logout').addEventListener('click', async () => {
    forget();
    if (renewal) renewal.stop();
    session = null;
    refresher.stop();
    leave();
    await signInRead;
    showLogin();
  });
  window.addEventListener('hashchange', render);
}

// boot reads signin.json beside the session check, not before it: only
// the login form needs it.
async function boot() {
  wireControls();
  signInRead = signInConfig().then((c) => {
    signIn = c;
    if (signIn) startRenewal();
  });
  if (returning()) {
    await signInRead;
    await finishSignIn();
    return;
  }
  // A popup the console opened to sign in again (renew.js): straight to
  // the provider.
  const popup = new URLSearchParams(window.location.search).get('signin') === 'popup';
  if (popup) await signInRead;
  if (popup && signIn) {
    showLogin();
    replace(main.querySelector('.login [aria-live]'), `Going to ${providerName(signIn)}…`);
    await startSignIn(signIn, {popup: true});
    return;
  }
  const token = savedToken();
  if (!token) {
    await signInRead;
    showLogin();
    return;
  }
  try {
    session = await whoAmI(token);
    // The renewal is made once signin.json is read, which began beside
    // WhoAmI: wait for it, so that a kept OpenID session is renewed too.
    await signInRead;
    start();
  } catch (e) {
    forget();
    drop();
    await signInRead;
    showLogin(e);
  }
}

boot();
