// Trigger-lag objectives: the label a job states its objective in, and
// where one late attempt lost its time (the run's page). The server
// measures a job against its objective (RunService.ListObjectives, package
// objective): the job's page and the overview show its figures, so the
// window's attempts are never read in the browser. causeOf is the rule of
// objective.CauseOf applied to one attempt the page already has.

import {between, duration, seconds} from './format.js';

export const objectiveLabel = 'sundial.io/trigger-lag-objective';

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

// lostIn says where a late attempt of ListObjectives (a LateAttempt) lost
// its time: the step, what to look at, how long, and its wait reason.
export function lostIn(l) {
  if (!l) return '–';
  const step = {dispatcher: 'the dispatcher', consumer: 'the consumer lag', runner: 'the runner'}[l.cause];
  if (!step) return l.waitReason ? `unknown step; it waited: ${l.waitReason}` : 'unknown (no step times recorded)';
  const what = l.culprit ? `: ${l.culprit}` : '';
  return `${step}${what} (${duration(seconds(l.causeTime))})${l.waitReason ? `, ${l.waitReason}` : ''}`;
}

// budgetLeft writes ListObjectives' budget_left (omitted when 0) as a
// share: 100 % untouched, negative overspent.
export function budgetLeft(o) {
  return `${Math.round(Number(o.budgetLeft || 0) * 1000) / 10} %`;
}
