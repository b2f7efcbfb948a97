// Jobs: a server-side paged list with search and filters, and a job's page
// with its schedule, next fires, last runs, trigger-lag figures and the
// operator's actions.

import {h, add, replace, table, num, stateTag, errorBox} from '../dom.js';
import * as fmt from '../format.js';
import {pager, action, confirmTyped, filterForm, field, select, textInput, loadInto} from './common.js';
import {objectiveLabel, lostIn, budgetLeft} from '../objective.js';
import {jobsListCall} from '../early.js';

export const jobs = {
  id: 'jobs',
  mount(root, ctx) {
    const q = ctx.route.query;
    const results = h('div', {id: 'results', 'aria-live': 'polite'});
    add(root,
      h('h1', {}, 'Jobs'),
      ctx.session.permissions.has('apply') ? h('p', {}, h('a', {href: '#/edit', class: 'button', 'data-write': 'true', id: 'new-job'}, 'New job')) : null,
      filterForm(ctx, ['jobs'], [
        field('Search (id, description, labels)', 'f-text', textInput('text', q.get('text'), {type: 'search'})),
        field('Team', 'f-team', textInput('team', q.get('team'))),
        field('State', 'f-state', select('state', q.get('state') || '', [
          ['', 'any'], ['DEFINITION_STATE_ACTIVE', 'active'], ['DEFINITION_STATE_PAUSED', 'paused']])),
        field('Schedule', 'f-kind', select('kind', q.get('kind') || '', [
          ['', 'any'], ['SCHEDULE_KIND_CRON', 'cron'], ['SCHEDULE_KIND_INTERVAL', 'interval'], ['SCHEDULE_KIND_AT', 'at'],
          ['SCHEDULE_KIND_DELAY', 'delay'], ['SCHEDULE_KIND_IMMEDIATE', 'immediate'], ['SCHEDULE_KIND_NONE', 'none']])),
      ]),
      bulkLink(ctx),
      results);
    return async () => {
      try {
        await listJobs(ctx, results);
      } catch (e) {
        replace(results, errorBox(e));
      }
    };
  },
};

// bulkLink leads an operator to the bulk actions on this page's search;
// null for others.
function bulkLink(ctx) {
  const s = ctx.session;
  if (!s.clusterAdmin && !['operator', 'admin'].includes(s.role)) return null;
  const q = new URLSearchParams(ctx.route.query);
  q.delete('page');
  return h('p', {}, h('a', {href: `#/bulk?${q}`, 'data-write': 'true', id: 'bulk-link'}, 'Bulk actions on the jobs this search selects…'));
}

// listJobs shows a page of jobs in results as soon as the server lists
// it, then fills in each row's next fire and figures (one bounded
// GetJobViews call for the ids of this page only), so that the list
// appears at the speed of one listing call whatever the number of jobs.
async function listJobs(ctx, results) {
  const c = jobsListCall(ctx.route.query);
  const resp = await ctx.session.call('JobService', c.method, c.body);
  const list = resp.jobs || [];
  if (list.length === 0) {
    // The server reads a bounded number of definitions per page: an empty
    // page with a next one is a partial answer, not the end.
    const partial = 'No job matched among the definitions this page read; the server reads a bounded number per page, and the next page reads on.';
    replace(results, h('p', {id: 'no-jobs'}, resp.nextPageToken ? partial : 'No jobs match.'), pager(ctx, ['jobs'], resp.nextPageToken));
    return;
  }
  const pending = () => h('span', {class: 'muted'}, '…');
  const cells = list.map(() => ({next: h('td', {}, pending()), rate: h('td', {class: 'num'}, pending()), lag: h('td', {class: 'num'}, pending())}));
  const rows = list.map((j, i) => h('tr', {},
    h('td', {}, h('a', {href: `#/jobs/${encodeURIComponent(j.spec.id)}`}, j.spec.id)),
    h('td', {}, j.spec.ownerTeam),
    h('td', {}, fmt.schedule(j.spec.schedule)),
    h('td', {}, stateTag(fmt.jobState(j))),
    cells[i].next, cells[i].rate, cells[i].lag));
  const head = ['Job', 'Team', 'Schedule', 'State', `Next fire (${fmt.viewerZone})`, ['Success, last runs', 'num'], ['p99 trigger lag', 'num']];
  results.dataset.figures = 'loading';
  replace(results,
    h('table', {},
      h('caption', {class: 'visually-hidden'}, 'Jobs'),
      h('thead', {}, h('tr', {}, head.map((t) => {
        const [label, cls] = Array.isArray(t) ? t : [t, null];
        return h('th', {scope: 'col', class: cls}, label);
      }))),
      h('tbody', {}, rows)),
    pager(ctx, ['jobs'], resp.nextPageToken));
  // One call for the figures of the whole page: the views of its jobs
  // (GetJobViews), their stats without the attempts.
  const views = new Map();
  try {
    const resp = await ctx.session.call('JobService', 'GetJobViews', {ids: list.map((j) => j.spec.id), nextFireTimes: 1, lastRuns: 20});
    for (const v of resp.views || []) views.set(v.job.spec.id, v);
  } catch {
    // The rows stay without figures ('–'); the list itself is shown.
  }
  list.forEach((j, i) => {
    const v = views.get(j.spec.id) || {};
    const stats = v.stats || {};
    const next = (v.nextFireTimes || [])[0];
    const zone = (j.spec.schedule || {}).timeZone || 'UTC';
    const c = cells[i];
    replace(c.next, next ? h('span', {title: `${fmt.time(next, zone)} (job's zone)`}, fmt.time(next)) : '–');
    replace(c.rate, stats.finished ? `${Math.round((stats.successRate || 0) * 100)} % of ${stats.finished}` : '–');
    replace(c.lag, fmt.duration(fmt.seconds(stats.triggerLatencyP99)));
  });
  results.dataset.figures = 'done';
}

export const job = {
  id: 'job',
  mount(root, ctx) {
    const id = ctx.route.parts[1];
    const status = h('div', {id: 'action-status', 'aria-live': 'polite'});
    const actions = h('div', {class: 'actions', id: 'actions'});
    const body = h('div', {id: 'results'});
    const backfill = h('div', {id: 'backfill'});
    let actionsKey = '';
    root.append(h('h1', {}, 'Job ', h('code', {}, id)),
      h('p', {}, h('a', {href: `#/runs?job=${encodeURIComponent(id)}`}, 'Runs of this job'), ' · ',
        h('a', {href: `#/dlq?job=${encodeURIComponent(id)}`}, 'Its dead letters')),
      actions, status, backfill, body);
    const refresh = async () => {
      let view;
      try {
        view = await ctx.session.call('JobService', 'GetJobView', {id, nextFireTimes: 10, lastRuns: 20});
      } catch (e) {
        await loadInto(body, () => Promise.reject(e));
        return;
      }
      const j = view.job;
      const paused = fmt.jobState(j) === 'paused';
      // The buttons are rebuilt only when what they offer changes, so an
      // auto-refresh never takes the keyboard's focus away.
      const key = `${paused}:${ctx.session.mayOperate(j.spec.ownerTeam)}:${ctx.session.mayApply(j.spec.ownerTeam)}`;
      if (key !== actionsKey) {
        const hadFocus = actionsKey !== '' && (actions.contains(document.activeElement) || document.activeElement === document.body);
        actionsKey = key;
        replace(actions, jobActions(ctx, j, paused, status, refresh));
        if (hadFocus && actions.querySelector('button')) actions.querySelector('button').focus();
        // The backfill's form keeps what the user typed across refreshes:
        // it is built again only when the role's offer changes.
        replace(backfill, ctx.session.mayOperate(j.spec.ownerTeam) && (j.spec.schedule || null) ? backfillForm(ctx, j) : null);
      }
      const objective = h('div', {id: 'objective'});
      replace(body, jobBody(view, objective));
      await loadInto(objective, () => objectiveSection(ctx, j));
    };
    return refresh;
  },
};

function jobActions(ctx, j, paused, status, refresh) {
  if (!ctx.session.mayOperate(j.spec.ownerTeam)) {
    return h('p', {class: 'muted'}, `Read only: ${ctx.session.describe()} may not operate team ${j.spec.ownerTeam}'s jobs.`);
  }
  const id = j.spec.id;
  const call = (m, body) => ctx.session.call('OperatorService', m, body);
  const out = [
    action('Trigger now', status, async () => {
      const r = await call('TriggerJob', {jobId: id});
      return h('span', {}, 'Triggered ', h('a', {href: `#/runs/${encodeURIComponent(r.runId)}`}, r.runId));
    }),
    paused ?
      action('Resume', status, async () => {
        const r = await call('ResumeJob', {jobId: id});
        await refresh();
        return r.changed ? 'Resumed.' : 'It was not paused; nothing changed.';
      }, 'primary') :
      action('Pause', status, async () => {
        const r = await call('PauseJob', {jobId: id});
        await refresh();
        return r.changed ? 'Paused.' : 'It was already paused; nothing changed.';
      }),
  ];
  // Editing and deleting a definition are the admin's.
  if (ctx.session.mayApply(j.spec.ownerTeam)) {
    out.push(h('a', {href: `#/edit/${encodeURIComponent(id)}`, class: 'button', 'data-write': 'true', id: 'edit'}, 'Edit'));
    out.push(...confirmTyped('Delete', id, status, async () => {
      await ctx.session.call('JobService', 'DeleteJob', {id});
      ctx.go(['jobs']);
      return 'Deleted.';
    }));
  }
  return out;
}

function jobBody(view, objective) {
  const j = view.job;
  const s = j.spec;
  const zone = (s.schedule || {}).timeZone || 'UTC';
  const stats = view.stats || {};
  const retry = s.retry || {};
  const props = [
    ['State', stateTag(fmt.jobState(j))],
    ['Team', s.ownerTeam],
    ['Description', s.description || '–'],
    ['Schedule', fmt.schedule(s.schedule)],
    ['Time zone', zone],
    ['Misfire policy', fmt.enumName((s.schedule || {}).misfirePolicy, 'MISFIRE_POLICY_') || 'default'],
    ['Target', target(s.target)],
    ['Priority', fmt.enumName(s.priority, 'PRIORITY_') || 'default'],
    ['Retries', retry.maxAttempts ? `${retry.maxAttempts} attempts, backoff ${fmt.duration(fmt.seconds(retry.initialBackoff))} × ${retry.multiplier || 2} up to ${fmt.duration(fmt.seconds(retry.maxBackoff))}` : 'default'],
    ['Timeout', s.timeout ? fmt.duration(fmt.seconds(s.timeout)) : 'default'],
    ['Concurrency', `${s.concurrencyLimit || 'unlimited'}, overlap ${fmt.enumName(s.overlapPolicy, 'OVERLAP_POLICY_') || 'default'}`],
    ['Pool and routing', `${s.pool || 'default pool'}, ${fmt.enumName((s.routing || {}).strategy, 'ROUTING_STRATEGY_') || 'default routing'}`],
    ['Revision', `${j.revision}, updated ${fmt.time(j.updatedAt)}`],
  ];
  const fires = (view.nextFireTimes || []).map((t) => [fmt.time(t, zone), fmt.time(t)]);
  const runs = (view.lastRuns || []).map((r) => [
    h('a', {href: `#/runs/${encodeURIComponent(r.runId)}`}, r.runId),
    num(r.attempt),
    stateTag(r.state),
    fmt.time(r.attemptDueTime || r.dueTime),
    fmt.time(r.startedAt),
    num(fmt.duration(fmt.between(r.attemptDueTime || r.dueTime, r.startedAt))),
    num(fmt.duration(fmt.seconds(r.duration))),
    r.error || '',
  ]);
  return [
    h('dl', {class: 'props'}, props.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
    h('h2', {}, 'Trigger lag and success'),
    h('div', {class: 'tiles'},
      tile('finished runs (last runs)', stats.finished || 0),
      tile('success rate', stats.finished ? `${Math.round((stats.successRate || 0) * 100)} %` : '–'),
      tile('p50 trigger lag', fmt.duration(fmt.seconds(stats.triggerLatencyP50))),
      tile('p90 trigger lag', fmt.duration(fmt.seconds(stats.triggerLatencyP90))),
      tile('p99 trigger lag', fmt.duration(fmt.seconds(stats.triggerLatencyP99)))),
    h('p', {class: 'muted'}, 'Trigger lag is start minus due time, over the attempts listed below.'),
    h('h2', {}, 'Trigger-lag objective'),
    objective,
    h('h2', {}, 'Next fires'),
    fires.length ? table('Next fires', [`Job's zone (${zone})`, `Your zone (${fmt.viewerZone})`], fires) : h('p', {}, 'None scheduled.'),
    h('h2', {}, 'Last runs'),
    runs.length ? table('Last runs', ['Run', ['Attempt', 'num'], 'State', 'Due', 'Started', ['Lag', 'num'], ['Duration', 'num'], 'Error'], runs) : h('p', {}, 'No runs yet.'),
    h('h2', {}, 'Definition'),
    h('pre', {}, JSON.stringify(s, null, 2)),
  ];
}

function tile(label, value) {
  return h('div', {class: 'tile'}, h('span', {class: 'n'}, String(value)), label);
}

function target(t) {
  if (!t) return '–';
  if (t.http) return `HTTP ${t.http.method || 'POST'} ${t.http.url}`;
  if (t.handler) return `handler ${t.handler.name}`;
  if (t.kafka) return `Kafka topic ${t.kafka.topic}`;
  if (t.exec) return `exec ${t.exec.command}`;
  return Object.keys(t).join(', ');
}

// objectiveSection shows the job measured against its trigger-lag
// objective (the label objectiveLabel) by the server, over the attempts due
// in its window, and for each late attempt where it lost its time.
async function objectiveSection(ctx, j) {
  const text = (j.spec.labels || {})[objectiveLabel];
  if (!text) {
    return h('p', {class: 'muted', id: 'no-objective'}, `No objective. Set the label ${objectiveLabel}, for example to "p99 <= 2s over 7d": the share of attempts that must start within that lag of their due time.`);
  }
  const resp = await ctx.session.call('RunService', 'ListObjectives', {jobId: j.spec.id});
  const o = (resp.objectives || [])[0] || {};
  if (o.objectiveError) return errorBox(new Error(o.objectiveError));
  const counted = Number(o.attempts || 0);
  const late = o.lateAttempts || [];
  const causes = Object.entries(o.lateByCause || {}).sort((x, y) => y[1] - x[1]);
  const where = {dispatcher: 'dispatcher (shard)', consumer: 'consumer lag', runner: 'runner (pool, concurrency, quota)', unknown: 'unknown'};
  return [
    h('div', {class: 'tiles', id: 'objective-tiles'},
      tile('objective', o.objective || text),
      tile('attempts counted', counted),
      tile(`late (over ${fmt.duration(fmt.seconds(o.lag))})`, Number(o.late || 0)),
      tile('error budget left', counted ? budgetLeft(o) : '–'),
      h('div', {class: 'tile', id: 'objective-state'}, h('span', {class: 'n'}, counted === 0 ? 'no runs' : (o.met ? 'met' : 'breached')), 'state')),
    resp.truncated ? h('p', {class: 'muted', id: 'objective-partial'}, `Partial: the server counted the newest ${resp.recordsRead} attempts only, due since ${fmt.time(resp.countedFrom)} (its bound of records read).`) : null,
    causes.length ? h('p', {id: 'objective-causes'}, 'Late attempts by where they lost their time: ', causes.map(([k, n]) => `${where[k] || k} ${n}`).join(', '), '.') : null,
    late.length ? table('Late attempts', ['Run', ['Attempt', 'num'], 'Due', ['Lag', 'num'], 'Lost its time in'], late.slice(0, 20).map((l) => [
      h('a', {href: `#/runs/${encodeURIComponent(l.runId)}`}, l.runId),
      num(l.attempt),
      fmt.time(l.dueTime),
      num(fmt.duration(fmt.seconds(l.lag))),
      lostIn(l),
    ])) : null,
  ];
}

// backfillTimeoutMs bounds a backfill that runs: the call returns when
// every run it enqueued has ended, so it gets longer than a read. Cut
// short (or the page left), the runs already enqueued still run, and the
// same backfill again skips the occurrences that have run.
const backfillTimeoutMs = 10 * 60 * 1000;

// backfillForm runs the job's occurrences of a past range
// (OperatorService.BackfillJob): a dry run first, which counts and lists
// the occurrences, then the backfill of exactly that request.
function backfillForm(ctx, j) {
  const id = j.spec.id;
  const zone = (j.spec.schedule || {}).timeZone || 'UTC';
  const from = h('input', {type: 'datetime-local', step: '1', required: true});
  const to = h('input', {type: 'datetime-local', step: '1', required: true});
  const policy = select('policy', 'BACKFILL_POLICY_EVERY', [
    ['BACKFILL_POLICY_EVERY', 'every occurrence'], ['BACKFILL_POLICY_ONE_PER_WINDOW', 'the last occurrence of each window']]);
  const window = textInput('window', '1h');
  const maxConcurrent = h('input', {type: 'number', min: '1', max: '1000', value: '4', name: 'max-concurrent'});
  const out = h('div', {id: 'backfill-result', 'aria-live': 'polite'});
  const request = () => {
    const f = new Date(from.value);
    const t = new Date(to.value);
    if (Number.isNaN(f.getTime()) || Number.isNaN(t.getTime())) throw new Error('from and to: both required');
    const body = {jobId: id, from: f.toISOString(), to: t.toISOString(), policy: policy.value, maxConcurrent: Number(maxConcurrent.value) || 0};
    if (policy.value === 'BACKFILL_POLICY_ONE_PER_WINDOW') {
      const w = fmt.span(window.value);
      if (!Number.isFinite(w) || w <= 0) throw new Error(`window "${window.value}": a duration such as 1h or 15m`);
      body.window = `${w}s`;
    }
    return body;
  };
  const preview = h('button', {type: 'submit', 'data-write': 'true', id: 'backfill-preview'}, 'Preview backfill');
  const form = h('form', {class: 'filters', 'aria-label': 'Backfill'},
    field(`From (your zone, ${fmt.viewerZone})`, 'bf-from', from),
    field('To, excluded', 'bf-to', to),
    field('Runs', 'bf-policy', policy),
    field('Window', 'bf-window', window),
    field('At most pending at once', 'bf-max', maxConcurrent),
    preview);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    preview.disabled = true;
    replace(out, 'Computing the occurrences…');
    try {
      const body = request();
      const dry = await ctx.session.call('OperatorService', 'BackfillJob', {...body, dryRun: true});
      const n = dry.occurrenceCount || 0;
      if (n === 0) {
        replace(out, h('p', {id: 'backfill-count'}, 'No occurrence of the schedule falls in that range: nothing to run.'));
        return;
      }
      const listed = dry.occurrences || [];
      const run = h('button', {type: 'button', class: 'primary', 'data-write': 'true', id: 'backfill-run'}, `Run ${n} occurrence${n === 1 ? '' : 's'}`);
      run.addEventListener('click', async () => {
        run.disabled = true;
        replace(out, `Running ${n} occurrences, at most ${body.maxConcurrent} at once; keep this page open until they end…`);
        try {
          const done = await ctx.session.call('OperatorService', 'BackfillJob', body, {timeoutMs: backfillTimeoutMs});
          const finished = Object.entries(done.finished || {}).map(([st, k]) => `${k} ${fmt.enumName(st, 'RUN_STATE_')}`).join(', ');
          replace(out, h('p', {id: 'backfill-done'},
            `Backfilled: ${done.enqueued || 0} enqueued, ${done.alreadyDone || 0} had already run`, finished ? `; ended: ${finished}.` : '.'));
        } catch (e) {
          replace(out, errorBox(e), h('p', {class: 'muted'}, 'The runs already enqueued still run; the same backfill again skips the occurrences that have run.'));
        }
      });
      replace(out,
        h('p', {id: 'backfill-count'}, `${n} occurrence${n === 1 ? '' : 's'} to run`, listed.length < n ? ` (the first ${listed.length} listed)` : '', ':'),
        table('Occurrences', [`Job's zone (${zone})`, `Your zone (${fmt.viewerZone})`], listed.slice(0, 20).map((t) => [fmt.time(t, zone), fmt.time(t)])),
        n > 20 ? h('p', {class: 'muted'}, `and ${n - 20} more.`) : null,
        run);
    } catch (e) {
      replace(out, errorBox(e));
    } finally {
      preview.disabled = false;
    }
  });
  return h('details', {id: 'backfill-box'}, h('summary', {}, 'Backfill…'),
    h('p', {class: 'muted'}, 'Run the occurrences the schedule had in a past range, as triggers due now with the occurrences\' run ids: an occurrence that has run is skipped.'),
    form, out);
}
