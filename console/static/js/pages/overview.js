// Overview: the states of recent runs over the first page of jobs, the
// worst of those jobs, the jobs with the least trigger-lag error budget
// left, the dead-letter count and the cluster's health. Every figure comes
// from a bounded call: one page of jobs, at most 20 attempts each, one
// page of the server's objective ranking (itself bounded in records read),
// at most 1,000 dead letters counted.

import {h, table, num, stateTag} from '../dom.js';
import * as fmt from '../format.js';
import {loadInto} from './common.js';
import {shards} from './cluster.js';
import {lostIn, budgetLeft} from '../objective.js';

const jobsCounted = 25;
const deadCounted = 1000;

export const overview = {
  id: 'overview',
  mount(root, ctx) {
    const runsEl = h('div', {id: 'overview-runs'});
    const objectivesEl = h('div', {id: 'overview-objectives'});
    const dlqEl = h('div', {id: 'overview-dlq'});
    const clusterEl = h('div', {id: 'overview-cluster'});
    root.append(h('h1', {}, 'Overview'),
      h('h2', {}, 'Recent runs'), runsEl,
      h('h2', {}, 'Least error budget left'), objectivesEl,
      h('h2', {}, 'Dead letters'), dlqEl,
      h('h2', {}, 'Cluster health'), clusterEl);
    return () => Promise.all([
      loadInto(runsEl, () => recentRuns(ctx)),
      loadInto(objectivesEl, () => worstObjectives(ctx)),
      loadInto(dlqEl, () => deadCount(ctx)),
      loadInto(clusterEl, () => health(ctx)),
    ]);
  },
};

function tile(label, value, id) {
  return h('div', {class: 'tile', id}, h('span', {class: 'n'}, String(value)), label);
}

async function recentRuns(ctx) {
  const resp = await ctx.session.call('JobService', 'ListJobs', {page: {size: jobsCounted}});
  const list = resp.jobs || [];
  // The views of these jobs in one call, with their attempts (counted by
  // state below).
  const byID = new Map();
  if (list.length) {
    const got = await ctx.session.call('JobService', 'GetJobViews', {ids: list.map((j) => j.spec.id), nextFireTimes: 1, lastRuns: 20, withRuns: true});
    for (const v of got.views || []) byID.set(v.job.spec.id, v);
  }
  const byState = new Map();
  const worst = [];
  list.forEach((j) => {
    const v = byID.get(j.spec.id) || {};
    for (const r of v.lastRuns || []) byState.set(r.state, (byState.get(r.state) || 0) + 1);
    const st = v.stats || {};
    worst.push({id: j.spec.id, team: j.spec.ownerTeam, rate: st.finished ? st.successRate || 0 : 1, finished: st.finished || 0,
      p99: fmt.seconds(st.triggerLatencyP99), paused: fmt.jobState(j) === 'paused'});
  });
  worst.sort((a, b) => a.rate - b.rate || (b.p99 || 0) - (a.p99 || 0));
  const states = [...byState.entries()].sort((a, b) => b[1] - a[1]);
  return [
    h('p', {class: 'muted'}, `The last 20 attempts of each of the first ${list.length} jobs${resp.nextPageToken ? ' (more jobs exist)' : ''}.`),
    h('div', {class: 'tiles', id: 'runs-by-state'}, states.length ? states.map(([s, n]) => tile(s, n, `state-${s}`)) : h('p', {}, 'No runs yet.')),
    h('h2', {}, 'Worst jobs'),
    worst.length ? table('Worst jobs', ['Job', 'Team', 'State', ['Success', 'num'], ['p99 trigger lag', 'num']], worst.slice(0, 10).map((w) => [
      h('a', {href: `#/jobs/${encodeURIComponent(w.id)}`}, w.id), w.team, stateTag(w.paused ? 'paused' : 'active'),
      num(w.finished ? `${Math.round(w.rate * 100)} % of ${w.finished}` : '–'), num(fmt.duration(w.p99)),
    ])) : h('p', {}, 'No jobs.'),
  ];
}

// objectivesShown is how many jobs of the server's ranking are shown.
const objectivesShown = 10;

// worstObjectives lists the jobs with the least trigger-lag error budget
// left over the last day, as the server ranks them (the caller's team, or
// every team for the cluster admin).
async function worstObjectives(ctx) {
  const body = ctx.session.team ? {pageSize: objectivesShown} : {allTeams: true, pageSize: objectivesShown};
  const resp = await ctx.session.call('RunService', 'ListObjectives', body);
  const list = resp.objectives || [];
  const note = `Jobs with the label sundial.io/trigger-lag-objective and runs due in the last day, least budget left first (${resp.jobsRanked || 0} ranked).`;
  return [
    h('p', {class: 'muted'}, note, resp.truncated ? ` Partial: the server read its bound of ${resp.recordsRead} attempts, due since ${fmt.time(resp.countedFrom)}.` : ''),
    list.length ? table('Least error budget left', ['Job', 'Team', 'Objective', ['Attempts', 'num'], ['Late', 'num'], ['Budget left', 'num'], ['p99 lag', 'num'], 'Worst breach lost its time in'], list.map((o) => [
      h('a', {href: `#/jobs/${encodeURIComponent(o.jobId)}`}, o.jobId), o.team, o.objective,
      num(Number(o.attempts || 0)), num(Number(o.late || 0)), num(`${budgetLeft(o)}${o.met ? '' : ' (breached)'}`),
      num(fmt.duration(fmt.seconds(o.lagP99))), lostIn(o.worst),
    ])) : h('p', {}, 'No job with an objective has runs in the last day.'),
  ];
}

async function deadCount(ctx) {
  const resp = await ctx.session.call('DlqService', 'ListDeadLetters', {pageSize: deadCounted});
  const n = (resp.deadLetters || []).length;
  return h('div', {class: 'tiles'}, tile(h('a', {href: '#/dlq'}, 'dead letters'), resp.nextPageToken ? `${n}+` : n, 'dead-count'));
}

async function health(ctx) {
  if (!ctx.session.clusterAdmin) return h('p', {class: 'muted'}, 'The cluster view is for the cluster admin.');
  const c = await ctx.session.call('ClusterService', 'GetCluster', {});
  const all = shards(c);
  const owned = all.filter((s) => s.owner).length;
  const maxLag = Math.max(0, ...all.map((s) => fmt.seconds(s.watermarkLag)).filter(Number.isFinite));
  const live = (c.executors || []).filter((e) => e.state === 'live').length;
  const lag = (c.consumerGroups || []).reduce((n, g) => n + Number(g.totalLag || 0), 0);
  return h('div', {class: 'tiles'},
    tile('shards owned', `${owned} / ${c.shardCount}`, 'shards-owned'),
    tile('worst watermark lag', fmt.duration(maxLag)),
    tile('live executors', live),
    tile('consumer lag (records)', lag),
    tile(h('a', {href: '#/cluster'}, 'cluster page'), '→'));
}
