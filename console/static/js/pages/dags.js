// DAGs: the list, a DAG's graph with its recent runs as a runs × nodes
// grid, the editor that draws the graph as the definition is typed, and a
// DAG run's graph whose node states change live (WatchRuns).

import {h, replace, table, stateTag, errorBox} from '../dom.js';
import * as fmt from '../format.js';
import {draw} from '../graph.js';
import {watch} from '../stream.js';
import {limited, pager, loadInto} from './common.js';

const pageSize = 25;
const gridRuns = 10;

// mayAdmin says whether the console shows the editor's Apply: ApplyDag
// needs the admin role in the DAG's team (the server decides).
function mayAdmin(session, team) {
  return session.clusterAdmin || (session.role === 'admin' && (!team || team === session.team));
}

function nodesOf(spec) {
  return (spec.nodes || []).map((n) => ({id: n.id, parents: n.parents || []}));
}

export const dags = {
  id: 'dags',
  mount(root, ctx) {
    const results = h('div', {id: 'results', 'aria-live': 'polite'});
    root.append(h('h1', {}, 'DAGs'),
      mayAdmin(ctx.session) ? h('p', {}, h('a', {href: '#/dagedit', 'data-write': 'true'}, 'New DAG…')) : null,
      results);
    return () => loadInto(results, async () => {
      const page = {size: pageSize};
      if (ctx.route.query.get('page')) page.token = ctx.route.query.get('page');
      const resp = await ctx.session.call('DagService', 'ListDags', {page});
      const rows = (resp.dags || []).map((d) => [
        h('a', {href: `#/dags/${encodeURIComponent(d.spec.id)}`}, d.spec.id),
        d.spec.ownerTeam,
        fmt.schedule(d.spec.schedule),
        stateTag(fmt.enumName(d.state, 'DEFINITION_STATE_')),
        String((d.spec.nodes || []).length),
        d.spec.description || '',
      ]);
      return [
        rows.length ? table('DAGs', ['DAG', 'Team', 'Schedule', 'State', 'Nodes', 'Description'], rows) : h('p', {}, 'No DAGs.'),
        pager(ctx, ['dags'], resp.nextPageToken),
      ];
    });
  },
};

export const dag = {
  id: 'dag',
  mount(root, ctx) {
    const id = ctx.route.parts[1];
    const body = h('div', {id: 'results'});
    root.append(h('h1', {}, 'DAG ', h('code', {}, id)), body);
    return () => loadInto(body, async () => {
      const {dag: d} = await ctx.session.call('DagService', 'GetDag', {id});
      const spec = d.spec;
      const list = await ctx.session.call('DagService', 'ListDagRuns', {dagId: id, limit: gridRuns});
      const runs = list.dagRuns || [];
      // The grid's cells need each run's nodes: one bounded read per run
      // shown, at most gridRuns.
      const details = await limited(runs, 4, (r) => ctx.session.call('DagService', 'GetDagRun', {dagRunId: r.dagRunId}));
      const ids = (spec.nodes || []).map((n) => n.id);
      const rows = runs.map((r, i) => {
        const nodes = new Map(((details[i] || {}).dagRun?.nodes || []).map((n) => [n.nodeId, n]));
        return [
          h('a', {href: `#/dagrun/${encodeURIComponent(r.dagRunId)}`}, fmt.time(r.dueTime)),
          stateTag(r.status),
          ...ids.map((nid) => {
            const n = nodes.get(nid);
            if (!n) return details[i] && details[i].error ? '?' : '–';
            return {cell: n.runId ? h('a', {href: `#/runs/${encodeURIComponent(n.runId)}`, title: `${nid}: ${n.phase}`}, stateTag(n.phase)) : stateTag(n.phase), cls: `cell phase-${n.phase}`};
          }),
        ];
      });
      const {svg} = draw(nodesOf(spec), `The graph of DAG ${id}`);
      return [
        h('dl', {class: 'props'},
          h('dt', {}, 'Team'), h('dd', {}, spec.ownerTeam),
          h('dt', {}, 'Schedule'), h('dd', {}, fmt.schedule(spec.schedule)),
          h('dt', {}, 'Failure policy'), h('dd', {}, fmt.enumName(spec.failurePolicy, 'DAG_FAILURE_POLICY_') || 'default (stop)'),
          h('dt', {}, 'State'), h('dd', {}, stateTag(fmt.enumName(d.state, 'DEFINITION_STATE_'))),
          h('dt', {}, 'Revision'), h('dd', {}, `${d.revision}, updated ${fmt.time(d.updatedAt)}`)),
        mayAdmin(ctx.session, spec.ownerTeam) ? h('p', {}, h('a', {href: `#/dagedit/${encodeURIComponent(id)}`, 'data-write': 'true'}, 'Edit this DAG…')) : null,
        h('h2', {}, 'Graph'),
        h('div', {class: 'graph-box'}, svg),
        h('h2', {}, `Recent runs × nodes (newest ${gridRuns})`),
        rows.length ? h('div', {id: 'dag-grid'}, table('Recent runs by node', ['Due', 'Status', ...ids], rows)) : h('p', {}, 'No runs yet.'),
      ];
    });
  },
};

// phaseOfChange is what a node's run change says of the node's phase
// before the DAG engine's own state is read again.
export function phaseOfChange(state) {
  return {
    RUN_STATE_ENQUEUED: 'running', RUN_STATE_STARTED: 'running', RUN_STATE_DEFERRED: 'running', RUN_STATE_RETRYING: 'running',
    RUN_STATE_SUCCEEDED: 'succeeded', RUN_STATE_DEAD: 'failed', RUN_STATE_SKIPPED: 'failed', RUN_STATE_CANCELLED: 'cancelled',
  }[state] || '';
}

// nodeOfRun is the node id of a node's run id in DAG run dagRunId
// (dagRunId + "/" + node, "#" + generation from the second), or "".
export function nodeOfRun(dagRunId, runId) {
  const prefix = `${dagRunId}/`;
  if (!runId || !runId.startsWith(prefix)) return '';
  return runId.slice(prefix.length).split('#')[0];
}

export const dagRun = {
  id: 'dagrun',
  mount(root, ctx) {
    const id = ctx.route.parts[1];
    const status = h('div', {id: 'dag-live-status', class: 'muted', role: 'status'});
    const graph = h('div', {id: 'dag-graph', class: 'graph-box'});
    const body = h('div', {id: 'results'});
    root.append(h('h1', {}, 'DAG run ', h('code', {}, id)), status, graph, body);
    let last = null;
    let timer = 0;
    let loading = null;
    const abort = new AbortController();
    let streaming = false;

    const show = (run) => {
      last = run;
      const nodes = (run.nodes || []).map((n) => ({id: n.nodeId, parents: n.parents || [], phase: n.phase,
        href: n.runId ? `#/runs/${encodeURIComponent(n.runId)}` : null}));
      const {svg} = draw(nodes, `The graph of DAG run ${id}, each node with its state`);
      replace(graph, svg);
      const r = run.run || {};
      replace(body,
        h('dl', {class: 'props'},
          h('dt', {}, 'DAG'), h('dd', {}, h('a', {href: `#/dags/${encodeURIComponent(r.dagId)}`}, r.dagId)),
          h('dt', {}, 'Status'), h('dd', {id: 'dag-run-status'}, stateTag(r.status)),
          h('dt', {}, 'Nodes'), h('dd', {}, r.summary || ''),
          h('dt', {}, 'Due'), h('dd', {}, fmt.time(r.dueTime)),
          h('dt', {}, 'Origin'), h('dd', {}, r.origin || ''),
          h('dt', {}, 'Ended'), h('dd', {}, fmt.time(run.endedAt))),
        h('h2', {}, 'Nodes'),
        table('Nodes of the DAG run', ['Node', 'State', 'Run', 'Attempt', 'Started', 'Ended', 'Reason'], (run.nodes || []).map((n) => [
          n.nodeId, stateTag(n.phase),
          n.runId ? h('a', {href: `#/runs/${encodeURIComponent(n.runId)}`}, n.runId) : '–',
          n.attempt ? String(n.attempt) : '–', fmt.time(n.startedAt), fmt.time(n.endedAt), n.reason || '',
        ])));
      if (!r.active && streaming) {
        abort.abort();
        streaming = false;
        replace(status, 'The DAG run has ended: nothing more to stream.');
      }
    };
    const load = async () => {
      if (loading) return loading;
      loading = (async () => {
        try {
          const {dagRun: run} = await ctx.session.call('DagService', 'GetDagRun', {dagRunId: id});
          show(run);
        } catch (e) {
          replace(body, errorBox(e));
        } finally {
          loading = null;
        }
      })();
      return loading;
    };
    // A change moves its node at once; the engine's state is read again
    // at most every two seconds.
    const onChange = (c) => {
      if (c.dagRunId !== id) return;
      const node = nodeOfRun(id, c.runId);
      const phase = phaseOfChange(c.state);
      const g = node && graph.querySelector(`g[data-node="${CSS.escape(node)}"]`);
      if (g && phase) {
        g.setAttribute('class', `node phase-${phase}`);
        g.dataset.phase = phase;
        const label = g.querySelector('text.phase');
        if (label) label.textContent = phase;
        const title = g.querySelector('title');
        if (title) title.textContent = `${node}: ${phase}`;
      }
      if (!timer) {
        timer = window.setTimeout(() => {
          timer = 0;
          load();
        }, 2000);
      }
    };
    ctx.onLeave(() => {
      abort.abort();
      window.clearTimeout(timer);
    });
    // Subscribe, then snapshot: the stream is open before the state is
    // read, so no change falls between the two.
    streaming = true;
    replace(status, 'Connecting to the live stream…');
    const opened = new Promise((resolve) => {
      watch(ctx.session.token, 'WatchService', 'WatchRuns', {filter: {}}, (m) => {
        if (m.watchingSince) {
          replace(status, `Live since ${fmt.time(m.watchingSince)}: node states change as the runs do.`);
          resolve();
        }
        if (m.change) onChange(m.change);
      }, abort.signal).then(() => {
        resolve();
        if (streaming) replace(status, 'The stream ended; reload the page to open it again.');
      }, (e) => {
        resolve();
        replace(status, errorBox(e));
      });
    });
    return async () => {
      await opened;
      if (last && !(last.run || {}).active) return; // an ended run does not change
      await load();
    };
  },
};

const example = {
  id: 'team.my-dag',
  ownerTeam: 'team',
  description: 'two extracts, a join, a publish',
  schedule: {timeZone: 'UTC', cron: {expression: '0 0 2 * * *'}},
  nodes: [
    {id: 'extract-a', jobId: 'team.extract-a'},
    {id: 'extract-b', jobId: 'team.extract-b'},
    {id: 'join', jobId: 'team.join', parents: ['extract-a', 'extract-b']},
    {id: 'publish', jobId: 'team.publish', parents: ['join']},
  ],
};

export const dagEdit = {
  id: 'dagedit',
  mount(root, ctx) {
    const id = ctx.route.parts[1];
    const area = h('textarea', {id: 'dag-spec', rows: 24, cols: 70, spellcheck: 'false', 'aria-describedby': 'dag-problems'});
    const problems = h('div', {id: 'dag-problems', role: 'status', 'aria-live': 'polite'});
    const graph = h('div', {id: 'dag-graph', class: 'graph-box'});
    const status = h('div', {id: 'action-status', 'aria-live': 'polite'});
    const redraw = () => {
      let spec;
      try {
        spec = JSON.parse(area.value);
      } catch (e) {
        replace(problems, h('p', {class: 'error'}, `Not JSON yet: ${e.message}`));
        return;
      }
      const {svg, problems: list} = draw(nodesOf(spec || {}), 'The graph of the DAG being edited');
      replace(graph, svg);
      replace(problems, list.length ?
        h('ul', {class: 'error'}, list.map((p) => h('li', {}, p))) :
        h('p', {class: 'muted'}, `${(spec.nodes || []).length} nodes, no problem seen here (the server checks everything on Apply).`));
    };
    area.addEventListener('input', redraw);
    const apply = h('button', {type: 'button', class: 'primary', id: 'dag-apply', 'data-write': 'true'}, 'Apply');
    apply.addEventListener('click', async () => {
      apply.disabled = true;
      replace(status, 'Applying…');
      try {
        const spec = JSON.parse(area.value);
        const r = await ctx.session.call('DagService', 'ApplyDag', {spec});
        const st = r.status || {};
        if (r.accepted) {
          replace(status, h('p', {}, 'Applied: ', h('a', {href: `#/dags/${encodeURIComponent(spec.id)}`}, spec.id), '.'));
        } else {
          replace(status, h('div', {class: 'error', role: 'alert'}, 'Refused: ',
            h('ul', {}, (st.errors || []).map((e) => h('li', {}, `${e.field || ''}: ${e.reason || e.message || ''}`))), st.message || ''));
        }
      } catch (e) {
        replace(status, errorBox(e));
      } finally {
        apply.disabled = false;
      }
    });
    root.append(h('h1', {}, id ? h('span', {}, 'Edit DAG ', h('code', {}, id)) : 'New DAG'),
      h('p', {class: 'muted'}, 'The definition as JSON (a DagSpec, as the API takes it). The graph is drawn as you type.'),
      h('div', {class: 'editor'},
        h('div', {}, h('label', {for: 'dag-spec', class: 'field'}, 'Definition (JSON)'), area),
        h('div', {}, h('h2', {}, 'Graph'), problems, graph)),
      mayAdmin(ctx.session) ? h('div', {class: 'actions'}, apply) : h('p', {class: 'muted'}, 'Only an admin of the team may apply.'),
      status);
    let loaded = false;
    return async () => {
      if (loaded) return; // an auto-refresh never overwrites what is typed
      loaded = true;
      if (id) {
        try {
          const {dag: d} = await ctx.session.call('DagService', 'GetDag', {id});
          area.value = JSON.stringify(d.spec, null, 2);
        } catch (e) {
          replace(status, errorBox(e));
        }
      } else {
        const spec = {...example, ownerTeam: ctx.session.clusterAdmin ? 'team' : ctx.session.team};
        spec.id = `${spec.ownerTeam}.my-dag`;
        spec.nodes = spec.nodes.map((n) => ({...n, jobId: `${spec.ownerTeam}.${n.id}`}));
        area.value = JSON.stringify(spec, null, 2);
      }
      redraw();
    };
  },
};
