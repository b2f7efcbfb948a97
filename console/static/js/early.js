// The calls a load starts before the rest of the console is loaded and
// run: index.html runs this module async, as soon as it and api.js have
// arrived. With a token saved in the tab, it asks WhoAmI and, when the URL
// names the jobs list, the list's page, at once and side by side; the
// session and the jobs page then take these answers instead of asking
// again. Nothing is shown from them before WhoAmI accepted the token, and
// each is taken once, by the very call it stands for (same token, method
// and body), during the first page only (drop).

import {call} from './api.js';

// tokenKey is where the tab keeps the token (session.js).
export const tokenKey = 'sundial.console.token';

// route parses the fragment: #/jobs/dev.hello?x=1 -> ['jobs', 'dev.hello'].
export function route() {
  const frag = window.location.hash.replace(/^#\/?/, '');
  const [path, query] = frag.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return {parts, query: new URLSearchParams(query || '')};
}

// jobsPageSize is the jobs list's page.
export const jobsPageSize = 25;

// jobsListCall is the call that lists the jobs page of the URL's query:
// SearchJobs with a text, ListJobs without.
export function jobsListCall(q) {
  const filter = {};
  if (q.get('team')) filter.team = q.get('team');
  if (q.get('state')) filter.state = q.get('state');
  if (q.get('kind')) filter.scheduleKind = q.get('kind');
  const page = {size: jobsPageSize};
  if (q.get('page')) page.token = q.get('page');
  const text = q.get('text');
  return text ?
    {method: 'SearchJobs', body: {text, filter, page}} :
    {method: 'ListJobs', body: {filter, page}};
}

const started = new Map(); // key -> the call's promise

function key(token, service, method, body) {
  return JSON.stringify([token, service, method, body || {}]);
}

function begin(token, service, method, body) {
  const p = call(token, service, method, body);
  p.catch(() => {}); // an answer nobody takes is no error; the taker sees it
  started.set(key(token, service, method, body), p);
}

// take returns the answer of the same call started early, once, or null.
export function take(token, service, method, body) {
  const k = key(token, service, method, body);
  const p = started.get(k);
  started.delete(k);
  return p || null;
}

// drop forgets what was not taken: later calls ask the API afresh.
export function drop() {
  started.clear();
}

// A sign-in coming back from the provider brings its own token.
const q = new URLSearchParams(window.location.search);
const token = q.has('code') || q.has('error') || q.has('state') ? null : window.sessionStorage.getItem(tokenKey);
if (token) {
  begin(token, 'IdentityService', 'WhoAmI', {});
  const r = route();
  if (r.parts[0] === 'jobs' && !r.parts[1]) {
    const c = jobsListCall(r.query);
    begin(token, 'JobService', c.method, c.body);
  }
}
