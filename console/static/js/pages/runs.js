// One run with its attempts, events, logs and the answer to "why was this
// run late"; the list of runs is the explorer (explorer.js).

import {h, replace, table, num, stateTag, errorBox} from '../dom.js';
import * as fmt from '../format.js';
import {action, loadInto} from './common.js';
import {lostIn} from '../objective.js';
import {watch} from '../stream.js';

const logPausedKey = 'sundial.console.logPaused';
// logLines bounds the lines the live log keeps on the page, newest kept.
const logLines = 2000;

export const run = {
  id: 'run',
  mount(root, ctx) {
    const runId = ctx.route.parts[1];
    const status = h('div', {id: 'action-status', 'aria-live': 'polite'});
    const body = h('div', {id: 'results'});
    let terminal = false;
    const refresh = async () => {
      // A run that has ended does not change: it is not polled again.
      if (terminal) return;
      await loadInto(body, async () => {
        const resp = await ctx.session.call('RunService', 'GetRun', {runId});
        const r = resp.run;
        const last = (r.attempts || [])[(r.attempts || []).length - 1];
        terminal = Boolean(last && last.finishTime && !['RUN_ATTEMPT_STATE_SCHEDULED', 'RUN_ATTEMPT_STATE_RUNNING'].includes(last.state) &&
          !(r.events || []).some((e) => e.state === 'RUN_STATE_RETRYING' && e.attempt === last.attempt));
        return runBody(ctx, r, last, status);
      });
    };
    // When the attempt ends, the page reads the run again until the
    // history has recorded the end (its state, error and final log): at
    // most ten reads, a second apart.
    let left = false;
    const settle = async () => {
      for (let i = 0; i < 10 && !terminal && !left; i++) {
        if (i > 0) await new Promise((r) => window.setTimeout(r, 1000));
        await refresh();
      }
    };
    const log = liveLog(ctx, runId, settle);
    root.append(h('h1', {}, 'Run ', h('code', {}, runId)), status, log.section, body);
    ctx.onLeave(() => {
      left = true;
      log.stop();
    });
    log.start();
    return refresh;
  },
};

// liveLog is the latest attempt's log as it runs: a TailRunLog stream
// whose lines are appended as the runner ships them (about a second after
// they are logged), until the attempt ends; an attempt that has ended
// shows the lines its history kept. Pause closes the stream, so a paused
// log costs the server nothing; resume opens it again after the last
// offset received, so no line shows twice.
function liveLog(ctx, runId, onEnd) {
  const status = h('div', {id: 'log-status', class: 'muted', role: 'status'});
  // A log region (role log) that the keyboard can reach and scroll.
  const pre = h('pre', {id: 'live-log', tabindex: '0', role: 'log', 'aria-labelledby': 'log-h'});
  const toggle = h('button', {type: 'button', id: 'log-toggle', 'aria-controls': 'live-log'});
  const section = h('section', {'aria-labelledby': 'log-h', class: 'live', id: 'log'},
    h('h2', {id: 'log-h'}, 'Log'),
    h('div', {class: 'live-bar'}, toggle, ' ', status),
    pre);
  let abort = null;
  let offset = '';
  let attempt = 0;
  let ended = false;
  const lines = [];

  function add(m) {
    lines.push(...(m.lines || []));
    const dropped = Number(m.dropped || 0);
    if (dropped > 0) lines.push(`… ${dropped} line(s) left out`);
    if (lines.length > logLines) lines.splice(0, lines.length - logLines);
    pre.textContent = lines.join('\n');
    pre.dataset.lines = String(lines.length);
  }

  function paused() {
    return window.sessionStorage.getItem(logPausedKey) === 'true';
  }

  function label() {
    toggle.textContent = paused() ? 'Resume live log' : 'Pause live log';
    toggle.setAttribute('aria-pressed', String(paused()));
  }

  function start() {
    label();
    if (ended) return;
    if (paused()) {
      replace(status, 'Paused: the log is not read.');
      section.dataset.live = 'paused';
      return;
    }
    const mine = new AbortController();
    abort = mine;
    replace(status, 'Connecting…');
    section.dataset.live = 'connecting';
    const req = {runId, attempt, offset};
    watch(ctx.session.token, 'RunService', 'TailRunLog', req, (m) => {
      if (abort !== mine) return;
      if (!attempt) attempt = m.attempt || 0;
      if (m.offset) offset = m.offset;
      add(m);
      if (m.ended) {
        ended = true;
        toggle.hidden = true;
        replace(status, `Attempt ${attempt} ended${m.state ? ` (${fmt.enumName(m.state, 'RUN_ATTEMPT_STATE_')})` : ''}.`);
        section.dataset.live = 'ended';
        onEnd();
      } else if (section.dataset.live !== 'on') {
        replace(status, `Live: attempt ${attempt}.`);
        section.dataset.live = 'on';
      }
    }, mine.signal).then(() => {
      if (abort === mine && !ended) replace(status, 'The stream ended; resume to open it again.');
    }, (e) => {
      if (abort === mine) replace(status, errorBox(e));
    }).finally(() => {
      if (abort === mine) {
        abort = null;
        if (!ended) section.dataset.live = 'off';
      }
    });
  }

  function stop() {
    if (abort) abort.abort();
    abort = null;
  }

  toggle.addEventListener('click', () => {
    window.sessionStorage.setItem(logPausedKey, String(!paused()));
    stop();
    start();
  });
  return {section, start, stop};
}

function runBody(ctx, r, last, status) {
  const acts = [];
  if (ctx.session.mayOperate(r.ownerTeam) && last) {
    if (last.state === 'RUN_ATTEMPT_STATE_RUNNING') {
      acts.push(action('Cancel run', status, async () => {
        await ctx.session.call('OperatorService', 'CancelRun', {runId: r.runId});
        return 'Cancel sent.';
      }, 'danger'));
    }
    if (['RUN_ATTEMPT_STATE_FAILED', 'RUN_ATTEMPT_STATE_CANCELLED'].includes(last.state)) {
      acts.push(action('Retry run', status, async () => {
        await ctx.session.call('OperatorService', 'RetryRun', {runId: r.runId});
        return 'Retry scheduled as a new attempt.';
      }));
    }
    if ((r.events || []).some((e) => e.state === 'RUN_STATE_DEAD')) {
      acts.push(replayAction(ctx, r.runId, status));
    }
  }
  const attempts = (r.attempts || []).map((a) => [
    num(a.attempt),
    stateTag(fmt.enumName(a.state, 'RUN_ATTEMPT_STATE_')),
    fmt.time(a.attemptDueTime),
    fmt.time(a.startTime),
    fmt.time(a.finishTime),
    num(fmt.duration(fmt.between(a.attemptDueTime, a.startTime))),
    num(fmt.duration(fmt.seconds(a.duration))),
    a.error || '',
    (a.log || []).length ? h('pre', {}, a.log.join('\n')) : '',
  ]);
  const events = (r.events || []).map((e) => [
    fmt.time(e.time),
    stateTag(fmt.enumName(e.state, 'RUN_STATE_')),
    num(e.attempt),
    e.runnerId || '',
    e.error ? `${e.error.code || ''} ${e.error.message || ''}`.trim() : '',
    e.nextAttemptDueTime ? fmt.time(e.nextAttemptDueTime) : '',
  ]);
  return [
    h('dl', {class: 'props'},
      h('dt', {}, 'Job'), h('dd', {}, h('a', {href: `#/jobs/${encodeURIComponent(r.jobId)}`}, r.jobId)),
      h('dt', {}, 'Team'), h('dd', {}, r.ownerTeam),
      dagRunOf(r.runId) ? [h('dt', {}, 'DAG run'), h('dd', {}, h('a', {href: `#/dagrun/${encodeURIComponent(dagRunOf(r.runId))}`}, dagRunOf(r.runId)))] : null,
      h('dt', {}, 'Due'), h('dd', {}, `${fmt.time(r.dueTime, 'UTC')} · ${fmt.time(r.dueTime)}`),
      h('dt', {}, 'State'), h('dd', {}, last ? stateTag(fmt.enumName(last.state, 'RUN_ATTEMPT_STATE_')) : '–')),
    acts.length ? h('div', {class: 'actions'}, acts) : null,
    h('h2', {id: 'late'}, 'Why was this run late?'),
    lateness(r),
    h('h2', {}, 'Attempts'),
    attempts.length ? table('Attempts', [['Attempt', 'num'], 'State', 'Due', 'Started', 'Finished', ['Start lag', 'num'], ['Duration', 'num'], 'Error', 'Last log lines'], attempts) : h('p', {}, 'No attempt recorded yet.'),
    h('h2', {}, 'Events'),
    events.length ? table('Events', ['Time', 'State', ['Attempt', 'num'], 'Runner', 'Error', 'Next attempt due'], events) :
      h('p', {class: 'muted'}, 'The events topic no longer holds this run\'s events.'),
  ];
}

// lateness splits the first attempt's start lag with the figures the API
// has: due → enqueued by the dispatcher (the shard's dispatch lag),
// enqueued → started by a runner (the runner's queue: consumer lag,
// concurrency, slots), and names the deferrals and retries.
export function lateness(r) {
  const first = (r.attempts || [])[0];
  const evs = r.events || [];
  const at = (state, attempt) => evs.find((e) => e.state === state && (attempt === undefined || e.attempt === attempt));
  const enq = at('RUN_STATE_ENQUEUED', 1) || at('RUN_STATE_ENQUEUED');
  const started = (at('RUN_STATE_STARTED', 1) || {}).time || (first && first.startTime);
  const deferred = evs.filter((e) => e.state === 'RUN_STATE_DEFERRED').length;
  const skipped = at('RUN_STATE_SKIPPED');
  const total = fmt.between(r.dueTime, started);
  const dispatch = enq ? fmt.between(r.dueTime, enq.time) : NaN;
  const queue = enq ? fmt.between(enq.time, started) : NaN;
  const out = [];
  if (!Number.isFinite(total)) {
    out.push(h('p', {}, skipped ? `It did not start: it was skipped (${skipped.error ? skipped.error.message : 'overlap, misfire or pause'}).` : 'It has not started yet.'));
  } else {
    out.push(h('dl', {class: 'props', id: 'lag-figures'},
      h('dt', {}, 'Started after its due time'), h('dd', {}, fmt.duration(total)),
      h('dt', {}, 'Due → enqueued (dispatcher)'), h('dd', {}, Number.isFinite(dispatch) ? fmt.duration(dispatch) : 'no ENQUEUED event retained'),
      h('dt', {}, 'Enqueued → started (runner)'), h('dd', {}, Number.isFinite(queue) ? fmt.duration(queue) : '–'),
      h('dt', {}, 'Deferrals'), h('dd', {}, deferred ? `${deferred} (concurrency limit or team quota)` : 'none')));
    if (Number.isFinite(dispatch) && Number.isFinite(queue) && total > 0) {
      const pct = (x) => `${Math.max(0, Math.round((x / total) * 100))}%`;
      const seg = (cls, x, label) => {
        const s = h('span', {class: cls, title: `${label}: ${fmt.duration(x)}`});
        s.style.width = pct(x);
        return s;
      };
      out.push(h('div', {class: 'lag-bar', role: 'img', 'aria-label': `dispatch ${fmt.duration(dispatch)}, queue ${fmt.duration(queue)}`},
        seg('lag-dispatch', dispatch, 'dispatch'), seg('lag-queue', queue, 'queue')));
      out.push(h('p', {class: 'legend muted'}, h('span', {}, h('i', {class: 'lag-dispatch'}), 'due → enqueued'), h('span', {}, h('i', {class: 'lag-queue'}), 'enqueued → started')));
      out.push(h('p', {}, dispatch >= queue ?
        'Most of the delay came before the run was enqueued: the dispatcher of its shard fired it late (see the shard\'s watermark lag on the Cluster page).' :
        'Most of the delay came after the run was enqueued: it waited for a runner (the runners\' consumer lag on the Cluster page, the job\'s concurrency limit, or the pool\'s slots).'));
    }
  }
  const retries = (r.attempts || []).length - 1;
  if (retries > 0) out.push(h('p', {}, `It took ${retries + 1} attempts; each retry waited its backoff before its own due time (see Attempts).`));
  out.push(...timeline(r.attempts || []));
  return out;
}

// timeline is each attempt's way from its due time to its start, as the
// history records it (due → dispatched → received → leased → started, each
// with the time since the step before), the wait it reported, and the step
// where it lost the most time, which the server names by the rule of a
// job's objective (AttemptDetail.cause).
function timeline(attempts) {
  const known = attempts.filter((a) => a.dispatchTime || a.receiveTime || a.leaseTime || a.waitReason);
  if (known.length === 0) return [];
  const step = (from, to) => {
    if (!to) return '–';
    const gap = fmt.between(from, to);
    return Number.isFinite(gap) ? `${fmt.time(to)} (+${fmt.duration(gap)})` : fmt.time(to);
  };
  const rows = known.map((a) => {
    const due = a.attemptDueTime || a.dueTime;
    return [
      num(a.attempt),
      fmt.time(due),
      step(due, a.dispatchTime),
      step(a.dispatchTime, a.receiveTime),
      step(a.receiveTime, a.leaseTime),
      step(a.leaseTime || a.receiveTime, a.startTime),
      a.waitReason || '–',
      lostIn(a),
    ];
  });
  return [
    h('h3', {}, 'Each attempt, step by step'),
    table('Each attempt, step by step', [['Attempt', 'num'], 'Due', 'Dispatched', 'Received by a runner', 'Leased', 'Started', 'Wait reason', 'Lost the most time in'], rows),
    h('p', {class: 'muted'}, 'Dispatched: the dispatcher of the run\'s shard wrote it to the runs topic. Received: a runner read it (the gap is the consumer lag). Leased, then started: the runner took the run\'s lease and started it (the gap before is the pool\'s slots, the job\'s concurrency or the team\'s quota). The wait reason is the last wait the attempt reported.'),
  ];
}

// dagRunOf is the DAG run a node's run belongs to (dag run id + "/" +
// node id), or "" for a job's run.
function dagRunOf(runId) {
  const i = runId.indexOf('/');
  return i > 0 && runId.indexOf('@') < i ? runId.slice(0, i) : '';
}

// replayAction replays a dead run from the dead-letter topic: a dry run
// first, which says what the replay would touch, then the replay.
function replayAction(ctx, runId, status) {
  return action('Replay from dead letters', status, async () => {
    const filter = {runId};
    const dry = await ctx.session.call('DlqService', 'ReplayDeadLetters', {filter, dryRun: true});
    const ids = dry.runIds || [];
    if (ids.length === 0) {
      return (dry.skippedRunIds || []).length ? 'Its job no longer exists: nothing to replay.' : 'The dead-letter topic no longer holds it.';
    }
    const confirm = h('button', {type: 'button', class: 'primary', 'data-write': 'true', id: 'confirm-run-replay'}, `Replay ${ids.join(', ')}`);
    confirm.addEventListener('click', async () => {
      confirm.disabled = true;
      try {
        const done = await ctx.session.call('DlqService', 'ReplayDeadLetters', {filter});
        replace(status, `Replayed: ${(done.runIds || []).join(', ')} (with the job's current definition).`);
      } catch (e) {
        replace(status, h('p', {class: 'error', role: 'alert'}, `${e.code || ''} ${e.message}`));
      }
    });
    return h('span', {}, `A replay would run ${ids.length} dead run again with the job's current definition. `, confirm);
  });
}
