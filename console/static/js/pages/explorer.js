// The runs explorer: runs across jobs, of one job or of a whole team,
// filtered by state, due time, lateness and error text, paged by the
// server, with every filter in the URL; and a live stream of run changes
// (WatchRuns) that the user can pause and resume without a reload.

import {h, replace, table, num, stateTag, errorBox} from '../dom.js';
import * as fmt from '../format.js';
import {watch} from '../stream.js';
import {pager, filterForm, field, select, textInput, loadInto} from './common.js';

const pageSize = 50;
// liveRows bounds the live table: the oldest rows fall off.
const liveRows = 200;
const pausedKey = 'sundial.console.livePaused';

export const attemptStates = [
  ['', 'any'], ['RUN_ATTEMPT_STATE_SCHEDULED', 'scheduled'], ['RUN_ATTEMPT_STATE_RUNNING', 'running'],
  ['RUN_ATTEMPT_STATE_SUCCEEDED', 'succeeded'], ['RUN_ATTEMPT_STATE_FAILED', 'failed'],
  ['RUN_ATTEMPT_STATE_SKIPPED', 'skipped'], ['RUN_ATTEMPT_STATE_CANCELLED', 'cancelled'],
  ['RUN_ATTEMPT_STATE_SUSPENDED', 'suspended'],
];

// runStatesOf maps an attempt state (the list's filter) to the run states
// a watch streams for it (the stream's filter).
export function runStatesOf(attemptState) {
  return {
    RUN_ATTEMPT_STATE_SCHEDULED: ['RUN_STATE_ENQUEUED', 'RUN_STATE_DEFERRED'],
    RUN_ATTEMPT_STATE_RUNNING: ['RUN_STATE_STARTED'],
    RUN_ATTEMPT_STATE_SUCCEEDED: ['RUN_STATE_SUCCEEDED'],
    RUN_ATTEMPT_STATE_FAILED: ['RUN_STATE_FAILED', 'RUN_STATE_RETRYING', 'RUN_STATE_DEAD', 'RUN_STATE_TIMED_OUT'],
    RUN_ATTEMPT_STATE_SKIPPED: ['RUN_STATE_SKIPPED'],
    RUN_ATTEMPT_STATE_CANCELLED: ['RUN_STATE_CANCELLED'],
    RUN_ATTEMPT_STATE_SUSPENDED: ['RUN_STATE_SUSPENDED'],
  }[attemptState] || [];
}

const lateOptions = [['', 'any'], ['1s', '≥ 1 s'], ['5s', '≥ 5 s'], ['30s', '≥ 30 s'], ['60s', '≥ 1 min'], ['300s', '≥ 5 min']];

// isoOf reads a datetime-local value (the viewer's zone) as an instant.
function isoOf(local) {
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

export const explorer = {
  id: 'runs',
  mount(root, ctx) {
    const q = ctx.route.query;
    const results = h('div', {id: 'results', 'aria-live': 'polite'});
    const jump = h('form', {class: 'filters', 'aria-label': 'Open a run', onsubmit: (ev) => {
      ev.preventDefault();
      const v = jump.querySelector('input').value.trim();
      if (v) ctx.go(['runs', v]);
    }}, field('Go to run id', 'f-run', textInput('run', '', {placeholder: 'job@1700000000000'})), h('button', {type: 'submit'}, 'Open'));
    const live = liveStream(ctx, () => loadInto(results, () => listRuns(ctx)));
    root.append(
      h('h1', {}, 'Runs'),
      live.bar,
      filterForm(ctx, ['runs'], [
        field('Job', 'f-job', textInput('job', q.get('job'))),
        field('Team', 'f-team', textInput('team', q.get('team') || (ctx.session.clusterAdmin ? '' : ctx.session.team))),
        field('State', 'f-state', select('state', q.get('state') || '', attemptStates)),
        field(`Due after (${fmt.viewerZone})`, 'f-after', h('input', {type: 'datetime-local', name: 'after', value: q.get('after') || '', step: '1'})),
        field(`Due before (${fmt.viewerZone})`, 'f-before', h('input', {type: 'datetime-local', name: 'before', value: q.get('before') || '', step: '1'})),
        field('Late by', 'f-late', select('late', q.get('late') || '', lateOptions)),
        field('Error contains', 'f-error', textInput('error', q.get('error'), {type: 'search'})),
      ]),
      jump,
      results,
      live.section);
    ctx.onLeave(live.stop);
    live.start();
    return () => loadInto(results, () => listRuns(ctx));
  },
};

// request builds the ListRuns request of the URL's filters.
export function request(q, session) {
  const req = {pageSize};
  if (q.get('job')) req.jobId = q.get('job');
  const team = q.get('team') || (session.clusterAdmin ? '' : session.team);
  if (team) req.team = team;
  if (q.get('state')) req.states = [q.get('state')];
  if (q.get('after')) req.dueAfter = isoOf(q.get('after'));
  if (q.get('before')) req.dueBefore = isoOf(q.get('before'));
  if (q.get('late')) req.minLateBy = q.get('late');
  if (q.get('error')) req.errorContains = q.get('error');
  if (q.get('page')) req.pageToken = q.get('page');
  return req;
}

async function listRuns(ctx) {
  const q = ctx.route.query;
  const req = request(q, ctx.session);
  if (!req.jobId && !req.team) {
    return h('p', {class: 'notice'}, 'Name a team (or a job) to list runs: a cluster admin lists one team at a time.');
  }
  const resp = await ctx.session.call('RunService', 'ListRuns', req);
  const rows = (resp.attempts || []).map((a) => {
    const due = a.attemptDueTime || a.dueTime;
    return [
      h('a', {href: `#/runs/${encodeURIComponent(a.runId)}`, 'data-run-id': a.runId}, a.runId),
      h('a', {href: `#/jobs/${encodeURIComponent(a.jobId)}`}, a.jobId),
      a.ownerTeam || '',
      num(a.attempt),
      stateTag(fmt.enumName(a.state, 'RUN_ATTEMPT_STATE_')),
      fmt.time(due),
      fmt.time(a.startTime),
      num(fmt.duration(fmt.between(due, a.startTime))),
      num(fmt.duration(fmt.seconds(a.duration))),
      a.error || '',
    ];
  });
  const sum = resp.summary;
  const scope = req.jobId ? `job ${req.jobId}` : `team ${req.team}, due ${req.dueAfter ? 'in the chosen window' : 'within the last hour and the next'}`;
  return [
    h('p', {}, `Attempts of ${scope}, newest due time first, ${pageSize} a page.`,
      sum ? ` The job's retained history: ${sum.runs || 0} runs, ${sum.attempts || 0} attempts, ${sum.failures || 0} failed attempts${sum.nextDueTime ? `; next due ${fmt.time(sum.nextDueTime)}` : ''}.` : ''),
    rows.length ?
      table('Runs', ['Run', 'Job', 'Team', ['Attempt', 'num'], 'State', `Due (${fmt.viewerZone})`, 'Started', ['Lag from due', 'num'], ['Duration', 'num'], 'Error'], rows) :
      h('p', {}, 'No runs match.'),
    pager(ctx, ['runs'], resp.nextPageToken),
  ];
}

// liveStream is the live section: a WatchRuns stream with the URL's job,
// team and state filters (and the error text, matched here), its changes
// prepended to a bounded table. Pause closes the stream, so a paused page
// costs the server nothing; resume opens it again and, once the server
// says it is watching, reloads the list, so nothing is missed between the
// two (subscribe, then snapshot).
function liveStream(ctx, reload) {
  const q = ctx.route.query;
  const status = h('div', {id: 'live-status', class: 'muted', role: 'status'});
  const body = h('tbody', {id: 'live'});
  const toggle = h('button', {type: 'button', id: 'live-toggle', 'aria-controls': 'live'});
  // The toggle and its status stand at the top of the page, before the
  // filters and the list, so that the keyboard reaches them at once; the
  // changes are listed below the runs.
  const bar = h('div', {class: 'live-bar'}, toggle, ' ', status);
  const section = h('section', {'aria-labelledby': 'live-h', class: 'live'},
    h('h2', {id: 'live-h'}, 'Live changes'),
    h('table', {},
      h('caption', {class: 'visually-hidden'}, 'Live run changes, newest first'),
      h('thead', {}, h('tr', {}, ['Time', 'Run', 'Job', 'Attempt', 'State', 'Error'].map((t) => h('th', {scope: 'col'}, t)))),
      body));
  let abort = null;
  let opened = 0;
  const errorText = (q.get('error') || '').toLowerCase();
  const filter = {};
  if (q.get('job')) filter.jobId = q.get('job');
  const team = q.get('team') || (ctx.session.clusterAdmin ? '' : ctx.session.team);
  if (team) filter.team = team;
  if (q.get('state')) filter.states = runStatesOf(q.get('state'));

  function add(c) {
    if (errorText && !(c.error || '').toLowerCase().includes(errorText)) return;
    const tr = h('tr', {'data-live-run': c.runId},
      h('td', {}, fmt.time(c.time)),
      h('td', {}, h('a', {href: `#/runs/${encodeURIComponent(c.runId)}`}, c.runId)),
      h('td', {}, c.jobId),
      h('td', {class: 'num'}, String(c.attempt || '')),
      h('td', {}, stateTag(fmt.enumName(c.state, 'RUN_STATE_'))),
      h('td', {}, c.error || ''));
    body.prepend(tr);
    while (body.children.length > liveRows) body.lastElementChild.remove();
  }

  function paused() {
    return window.sessionStorage.getItem(pausedKey) === 'true';
  }

  function label() {
    toggle.textContent = paused() ? 'Resume live stream' : 'Pause live stream';
    toggle.setAttribute('aria-pressed', String(paused()));
  }

  function start() {
    label();
    if (paused()) {
      replace(status, 'Paused: no changes are streamed.');
      section.dataset.live = 'paused';
      return;
    }
    const mine = new AbortController();
    abort = mine;
    const resumed = opened++ > 0;
    replace(status, 'Connecting…');
    section.dataset.live = 'connecting';
    watch(ctx.session.token, 'WatchService', 'WatchRuns', {filter}, (m) => {
      if (m.watchingSince) {
        replace(status, `Live since ${fmt.time(m.watchingSince)}.`);
        section.dataset.live = 'on';
        if (resumed) reload();
      }
      if (m.change) add(m.change);
    }, mine.signal).then(() => {
      if (abort === mine) replace(status, 'The stream ended; resume to open it again.');
    }, (e) => {
      if (abort === mine) replace(status, errorBox(e));
    }).finally(() => {
      if (abort === mine) {
        abort = null;
        section.dataset.live = 'off';
      }
    });
  }

  function stop() {
    if (abort) abort.abort();
    abort = null;
  }

  toggle.addEventListener('click', () => {
    window.sessionStorage.setItem(pausedKey, String(!paused()));
    stop();
    start();
  });
  return {bar, section, start, stop};
}
