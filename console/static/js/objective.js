// A job's trigger-lag objective and its error budget: pure decisions over
// the attempts the API lists, with no page and no call in them (the job's
// page reads the attempts; the browser tests run these on tables).
//
// The objective is the job's label objectiveLabel, written
// "p99 <= 2s over 7d" (or "p99<=2s/7d"): the share of attempts that must
// start within the lag of their due time (start − due, the figure of
// GetJobView's percentiles), over a window of due times ending now. The
// error budget is the attempts that may start later: (1 − p/100) of those
// counted. An attempt that has not started while its lag is already over
// the bound counts as a late one.

import {between, span} from './format.js';

export const objectiveLabel = 'sundial.io/trigger-lag-objective';

// parseObjective reads a label's value. It throws an Error naming what is
// wrong, so the page can show the label's mistake instead of a figure.
export function parseObjective(text) {
  const m = /^\s*p(\d+(?:\.\d+)?)\s*<=\s*(\S+?)\s*(?:\/|\s+over\s+)\s*(\S+)\s*$/.exec(String(text || ''));
  if (!m) throw new Error(`${objectiveLabel} "${text}": must read like "p99 <= 2s over 7d"`);
  const percent = Number(m[1]);
  const lag = span(m[2]);
  const window = span(m[3]);
  if (!(percent > 0 && percent < 100)) throw new Error(`${objectiveLabel} "${text}": the percentile ${m[1]} must be above 0 and below 100`);
  if (!Number.isFinite(lag) || lag <= 0) throw new Error(`${objectiveLabel} "${text}": the lag "${m[2]}" must be a positive duration (250ms, 2s, 1m, 1h)`);
  if (!Number.isFinite(window) || window <= 0) throw new Error(`${objectiveLabel} "${text}": the window "${m[3]}" must be a positive duration (1h, 7d)`);
  return {percent, lag, window, text: `p${m[1]} ≤ ${m[2]} over ${m[3]}`};
}

// lagOf is an attempt's trigger lag in seconds: start − due, or, not
// started, now − due once due; NaN when it is not due yet or has ended
// without starting (skipped, cancelled before it started).
export function lagOf(a, now) {
  const due = a.attemptDueTime || a.dueTime;
  if (a.startTime) return Math.max(0, between(due, a.startTime));
  if (a.finishTime || !due) return NaN;
  const waited = (now - new Date(due).getTime()) / 1000;
  return waited >= 0 ? waited : NaN;
}

// causeOf names where a late attempt lost its time, from the times the
// history records: due → dispatched is the dispatcher of its shard (the
// shard's watermark lag), dispatched → received the runners' consumer lag
// on the runs topic, received → started the runner (the pool's slots, the
// job's concurrency, the team's quota). An attempt still waiting is
// waiting in the first step it has not passed, until now. The attempt's
// wait reason, when it reported one, says more.
export function causeOf(a, now) {
  const steps = [a.attemptDueTime || a.dueTime, a.dispatchTime, a.receiveTime, a.startTime];
  if (!a.startTime) {
    const open = steps.findIndex((t, i) => i > 0 && !t);
    steps[open] = new Date(now).toISOString();
    steps.fill(undefined, open + 1);
  }
  const parts = [
    ['dispatcher', 'the dispatcher of its shard (watermark lag)', between(steps[0], steps[1])],
    ['consumer', 'the runners\' consumer lag on the runs topic', between(steps[1], steps[2])],
    ['runner', 'the runner: the pool\'s slots, the job\'s concurrency or the team\'s quota', between(steps[2], steps[3])],
  ].filter((p) => Number.isFinite(p[2]));
  const reason = a.waitReason || '';
  if (parts.length === 0) {
    return {where: reason ? 'wait' : 'unknown', text: reason ? `it waited: ${reason}` : 'no times recorded', waitReason: reason, seconds: NaN};
  }
  parts.sort((x, y) => y[2] - x[2]);
  const [where, text, secs] = parts[0];
  return {where, text, waitReason: reason, seconds: Math.max(0, secs)};
}

// assess measures attempts against an objective at now (milliseconds):
// counted are the attempts due in the window with a lag (started, or
// waiting past their due time), late those whose lag is over the bound.
// budget is how many may be late; left is the share of it not spent (1
// untouched, 0 spent, negative overspent); met says whether the
// objective holds. causes counts the late ones by where they lost time.
export function assess(objective, attempts, now) {
  const from = now - objective.window * 1000;
  const counted = [];
  const late = [];
  for (const a of attempts || []) {
    const due = new Date(a.attemptDueTime || a.dueTime).getTime();
    if (!(due >= from && due <= now)) continue;
    const lag = lagOf(a, now);
    if (!Number.isFinite(lag)) continue;
    counted.push(a);
    if (lag > objective.lag) late.push({attempt: a, lag, cause: causeOf(a, now)});
  }
  late.sort((x, y) => y.lag - x.lag);
  const budget = (1 - objective.percent / 100) * counted.length;
  const causes = {};
  for (const l of late) causes[l.cause.where] = (causes[l.cause.where] || 0) + 1;
  return {
    counted: counted.length,
    late,
    budget,
    left: budget > 0 ? 1 - late.length / budget : (late.length ? -Infinity : 1),
    met: late.length <= budget,
    causes,
  };
}
