// Trigger-lag objectives: the label a job states its objective in, and how
// the page writes where an attempt lost its time. The server
// measures a job against its objective (RunService.ListObjectives, package
// objective): the job's page and the overview show its figures, so the
// window's attempts are never read in the browser, and names where each
// attempt of a run lost its time (AttemptDetail.cause), which the run's
// page shows.

import {duration, seconds} from './format.js';

export const objectiveLabel = 'sundial.io/trigger-lag-objective';

// lostIn says where an attempt lost its time, from the server's cause
// (a LateAttempt of ListObjectives, or an AttemptDetail, which has no
// culprit): the step, what to look at, how long, and its wait reason.
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
