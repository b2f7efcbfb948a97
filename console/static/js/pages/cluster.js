// Cluster: shards with their owner and watermark lag, runners, executors
// and consumer lag (GetCluster, for the cluster admin).

import {h, table, num, stateTag} from '../dom.js';
import * as fmt from '../format.js';
import {loadInto} from './common.js';

export const cluster = {
  id: 'cluster',
  mount(root, ctx) {
    const results = h('div', {id: 'results', 'aria-live': 'polite'});
    root.append(h('h1', {}, 'Cluster'), results);
    return () => loadInto(results, async () => {
      if (!ctx.session.clusterAdmin) {
        return h('p', {class: 'notice'}, 'The cluster view is for the cluster admin: log in with the cluster admin\'s token.');
      }
      return clusterBody(await ctx.session.call('ClusterService', 'GetCluster', {}));
    });
  },
};

// shards lists every shard with its owner, sorted by shard number.
export function shards(c) {
  const out = [];
  for (const d of c.dispatchers || []) for (const s of d.shards || []) out.push({...s, owner: d.id});
  for (const s of c.unownedShards || []) out.push({...s, owner: ''});
  return out.sort((a, b) => (a.shard || 0) - (b.shard || 0));
}

function clusterBody(c) {
  const sh = shards(c).map((s) => [
    num(s.shard || 0), s.owner || h('span', {class: 'state state-failed'}, 'unowned'), num(s.epoch || '0'),
    fmt.time(s.watermark), num(fmt.duration(fmt.seconds(s.watermarkLag))), fmt.time(s.claimTime),
  ]);
  const runners = (c.runners || []).map((r) => [r.group, r.clientId, r.clientHost,
    (r.partitions || []).map((p) => `${p.topic} [${(p.partitions || []).join(', ')}]`).join('; ')]);
  const execs = (c.executors || []).map((e) => [e.id, e.pool || 'default', stateTag(e.state), num(e.slots || 0), num(e.inFlight || 0),
    num((e.cpuCores || 0).toFixed(2)), num(`${Math.round(Number(e.memoryBytes || 0) / (1 << 20))} MiB`), fmt.time(e.heartbeatTime), e.version || '']);
  const groups = (c.consumerGroups || []).map((g) => [g.role, g.group, g.state || '', num(g.totalLag || '0'), g.error || '']);
  return [
    h('p', {}, `${c.shardCount} shards; view taken ${fmt.time(c.time)}.`),
    (c.unavailable || []).length ? h('ul', {class: 'muted'}, c.unavailable.map((u) => h('li', {}, u))) : null,
    h('h2', {}, 'Shards'),
    table('Shards', [['Shard', 'num'], 'Owner (dispatcher)', ['Epoch', 'num'], 'Watermark', ['Watermark lag', 'num'], 'Claimed'], sh),
    h('h2', {}, 'Consumer lag'),
    groups.length ? table('Consumer groups', ['Role', 'Group', 'State', ['Lag', 'num'], 'Error'], groups) : h('p', {}, 'None.'),
    h('h2', {}, 'Executors'),
    execs.length ? table('Executors', ['Executor', 'Pool', 'State', ['Slots', 'num'], ['In flight', 'num'], ['CPU cores', 'num'], ['Memory', 'num'], 'Heartbeat', 'Version'], execs) : h('p', {}, 'None announced.'),
    h('h2', {}, 'Runners'),
    runners.length ? table('Runners', ['Group', 'Client', 'Host', 'Partitions'], runners) : h('p', {}, 'None.'),
  ];
}
