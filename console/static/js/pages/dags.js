// DAGs: the list, a DAG's graph with its recent runs as a runs × nodes
// grid, the editor that draws the graph as the definition is typed, and a
// DAG run's graph whose node states change live (WatchRuns).

import {h, add, replace, table, num, stateTag, errorBox} from '../dom.js';
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
    add(root, h('h1', {}, 'DAGs'),
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
    const actions = h('div', {id: 'dag-run-actions', 'aria-live': 'polite'});
    const resumeBtn = h('button', {type: 'button', id: 'dag-resume', 'data-write': 'true'}, 'Resume: rerun the failed nodes');
    root.append(h('h1', {}, 'DAG run ', h('code', {}, id)), status, actions, graph, body);
    let last = null;
    let timer = 0;
    let loading = null;
    let abort = null;
    let streaming = false;
    let left = false;

    const show = (run) => {
      last = run;
      const nodes = (run.nodes || []).map((n) => ({id: n.nodeId, parents: n.parents || [], phase: n.phase,
        href: n.runId ? `#/runs/${encodeURIComponent(n.runId)}` : null}));
      const {svg} = draw(nodes, `The graph of DAG run ${id}, each node with its state`);
      replace(graph, svg);
      const r = run.run || {};
      // Resume is offered to the team's admins for a run with a node to
      // rerun; the server decides (ResumeDagRun).
      if (run.resumable && mayAdmin(ctx.session, (run.spec || {}).ownerTeam)) {
        if (!actions.contains(resumeBtn)) replace(actions, resumeBtn);
      } else if (actions.contains(resumeBtn)) {
        replace(actions);
      }
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
      if (!r.active) closeStream('The DAG run has ended: nothing more to stream.');
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
      left = true;
      if (abort) abort.abort();
      window.clearTimeout(timer);
    });
    // Subscribe, then snapshot: the stream is open before the state is
    // read, so no change falls between the two.
    // A resume opens it again: each stream answers only while it is the
    // page's current one.
    const openStream = () => {
      const mine = new AbortController();
      abort = mine;
      streaming = true;
      replace(status, 'Connecting to the live stream…');
      return new Promise((resolve) => {
        watch(ctx.session.token, 'WatchService', 'WatchRuns', {filter: {}}, (m) => {
          if (m.watchingSince && abort === mine) {
            replace(status, `Live since ${fmt.time(m.watchingSince)}: node states change as the runs do.`);
          }
          if (m.watchingSince) resolve();
          if (m.change) onChange(m.change);
        }, mine.signal).then(() => {
          resolve();
          if (streaming && abort === mine) replace(status, 'The stream ended; reload the page to open it again.');
        }, (e) => {
          resolve();
          if (abort === mine) replace(status, errorBox(e));
        });
      });
    };
    const closeStream = (why) => {
      if (!streaming) return;
      streaming = false;
      abort.abort();
      replace(status, why);
    };
    resumeBtn.addEventListener('click', async () => {
      resumeBtn.disabled = true;
      try {
        // The stream is open again before the resume, so that no change
        // of the rerun nodes is missed.
        if (!streaming && !left) await openStream();
        const resp = await ctx.session.call('DagService', 'ResumeDagRun', {dagRunId: id});
        show(resp.dagRun);
        replace(actions, h('p', {id: 'dag-resumed'}, `Resumed: ${(resp.rerun || []).join(', ')} run again.`));
      } catch (e) {
        // Refused: the run is as it was, and an ended run needs no stream.
        replace(actions, resumeBtn, errorBox(e));
        if (last && !(last.run || {}).active) closeStream('The DAG run has ended: nothing more to stream.');
      } finally {
        resumeBtn.disabled = false;
      }
    });
    const opened = openStream();
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

// planView shows PlanDag's answer: the problems, or the node, edge and
// field diff, the next fires and what it means for the DAG's runs that
// have not succeeded. ok is false when the definition would be refused.
export function planView(p, spec) {
  if ((p.errors || []).length) {
    return {ok: false, nodes: [h('h2', {}, 'Plan'), h('div', {role: 'alert', class: 'error', id: 'plan-errors'},
      h('p', {}, 'The definition would be refused:'),
      h('ul', {}, p.errors.map((e) => h('li', {}, h('code', {}, e.field || 'spec'), `: ${e.reason}`))))]};
  }
  const zone = (spec.schedule || {}).timeZone || 'UTC';
  const nodes = p.nodes || [];
  const edges = p.edges || [];
  const changes = p.changes || [];
  const runs = p.runs || [];
  const count = (n, what) => `${n} ${what}${n === 1 ? '' : 's'}`;
  return {ok: true, nodes: [
    h('h2', {}, 'Plan'),
    h('p', {id: 'plan-summary'}, p.created ? `Creates the DAG with ${count((spec.nodes || []).length, 'node')}. ` :
      `Against revision ${p.revision}: ${count(nodes.length, 'node')} added, removed or changed, ${count(edges.length, 'dependency')} added or removed, ${count(changes.length, 'other field')} changed. `,
    'Nothing is applied until you press Apply.'),
    h('h3', {}, 'Nodes'),
    nodes.length ? h('div', {id: 'plan-nodes'}, table('Nodes added, removed or changed', ['Node', 'Change', 'Fields'], nodes.map((n) => [
      h('code', {}, n.nodeId), stateTag(n.change),
      (n.fields || []).map((f) => h('div', {}, h('code', {}, f.field), `: ${f.before || '–'} → ${f.after || '–'}`)),
    ]))) : h('p', {id: 'plan-nodes'}, 'No node added, removed or changed.'),
    h('h3', {}, 'Dependencies'),
    edges.length ? h('div', {id: 'plan-edges'}, table('Dependencies added or removed', ['Parent', 'Child', 'Change'], edges.map((e) => [
      h('code', {}, e.parent), h('code', {}, e.child), stateTag(e.change)]))) : h('p', {id: 'plan-edges'}, 'No dependency added or removed.'),
    changes.length ? [h('h3', {}, 'Other fields'), h('div', {id: 'plan-diff'}, table('Field diff', ['Field', 'In force', 'After apply'],
      changes.map((c) => [h('code', {}, c.field), c.before || '–', c.after || '–'])))] : null,
    h('h3', {}, 'Next fires'),
    (p.nextFires || []).length ? h('div', {id: 'plan-fires'}, table('Next fire times after apply', [['#', 'num'], `In ${zone}`, `In ${fmt.viewerZone}`],
      p.nextFires.map((t, i) => [num(i + 1), fmt.time(t, zone), fmt.time(t)]))) :
      h('p', {id: 'plan-fires'}, 'It fires nothing on its own (no schedule, or paused): a trigger starts its runs.'),
    h('h3', {}, 'DAG runs not succeeded'),
    h('p', {class: 'muted'}, 'A DAG run goes on with the definition it follows. A resume reruns its failed nodes with the definition in force, if it has the run\'s shape (the same nodes, jobs, parents and team).'),
    runs.length ? h('div', {id: 'plan-runs'}, table('What a resume would do with each run', ['DAG run', 'Status', 'After apply'], runs.map((r) => [
      h('a', {href: `#/dagrun/${encodeURIComponent(r.dagRunId)}`}, r.dagRunId), stateTag(r.status),
      r.sameShape ? (r.resumable ? 'a resume reruns its failed nodes with this definition' : 'same shape; nothing to resume yet') :
        h('span', {class: 'error'}, `a resume would be refused: ${r.reason}`),
    ]))) : h('p', {id: 'plan-runs'}, 'None.'),
  ]};
}

export const dagEdit = {
  id: 'dagedit',
  mount(root, ctx) {
    const id = ctx.route.parts[1];
    const area = h('textarea', {id: 'dag-spec', rows: 24, cols: 70, spellcheck: 'false', 'aria-describedby': 'dag-problems'});
    const problems = h('div', {id: 'dag-problems', role: 'status', 'aria-live': 'polite'});
    const graph = h('div', {id: 'dag-graph', class: 'graph-box'});
    const status = h('div', {id: 'action-status', 'aria-live': 'polite'});
    const planEl = h('div', {id: 'plan'});
    // revision is the one opened ("0" for a new DAG): Apply sends it, so a
    // definition changed meanwhile is refused.
    let revision = '0';
    let planned = null; // the text last planned without errors
    let team = '';
    const apply = h('button', {type: 'button', class: 'primary', id: 'dag-apply', 'data-write': 'true', disabled: true}, 'Apply');
    const planBtn = h('button', {type: 'button', id: 'dag-plan', 'data-write': 'true'}, 'Plan: show the diff, fires and runs');
    const gate = () => {
      apply.disabled = planned === null || planned !== area.value || !mayAdmin(ctx.session, team);
    };
    const redraw = () => {
      gate();
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
        h('p', {class: 'muted'}, `${(spec.nodes || []).length} nodes, no problem seen here (Plan has the server check everything).`));
    };
    area.addEventListener('input', redraw);
    planBtn.addEventListener('click', async () => {
      planBtn.disabled = true;
      const text = area.value;
      replace(status, 'Planning…');
      try {
        const spec = JSON.parse(text);
        team = spec.ownerTeam || '';
        const p = await ctx.session.call('DagService', 'PlanDag', {spec, nextFires: 5, expectedRevision: revision});
        const shown = planView(p, spec);
        replace(planEl, shown.nodes);
        planned = shown.ok ? text : null;
        replace(status, shown.ok ? (mayAdmin(ctx.session, team) ? 'Planned. Apply applies exactly this draft.' : 'Planned. Only an admin of the team may apply.') :
          'The plan found errors: nothing can be applied.');
      } catch (e) {
        planned = null;
        replace(planEl);
        replace(status, e instanceof SyntaxError ? h('p', {class: 'error', role: 'alert'}, `Not JSON: ${e.message}`) : errorBox(e));
      } finally {
        planBtn.disabled = false;
        gate();
      }
    });
    apply.addEventListener('click', async () => {
      if (planned !== area.value) return;
      apply.disabled = true;
      replace(status, 'Applying…');
      try {
        const spec = JSON.parse(area.value);
        const r = await ctx.session.call('DagService', 'ApplyDag', {spec, expectedRevision: revision});
        const st = r.status || {};
        if (r.accepted) {
          planned = null;
          // The next apply of this page expects the revision now in force.
          const {dag: d} = await ctx.session.call('DagService', 'GetDag', {id: spec.id});
          revision = String(d.revision || '0');
          replace(status, h('p', {id: 'dag-applied'}, 'Applied: ', h('a', {href: `#/dags/${encodeURIComponent(spec.id)}`}, spec.id), '.'));
        } else {
          replace(status, h('div', {class: 'error', role: 'alert'}, 'Refused: ',
            h('ul', {}, (st.errors || []).map((e) => h('li', {}, `${e.field || ''}: ${e.reason || e.message || ''}`))), st.message || ''));
        }
      } catch (e) {
        replace(status, errorBox(e));
      } finally {
        gate();
      }
    });
    add(root, h('h1', {}, id ? h('span', {}, 'Edit DAG ', h('code', {}, id)) : 'New DAG'),
      h('p', {class: 'muted'}, 'The definition as JSON (a DagSpec, as the API takes it). The graph is drawn as you type; Plan asks the server what applying it would do, and Apply is offered after a clean plan of the same draft.'),
      h('div', {class: 'editor'},
        h('div', {}, h('label', {for: 'dag-spec', class: 'field'}, 'Definition (JSON)'), area),
        h('div', {}, h('h2', {}, 'Graph'), problems, graph)),
      // PlanDag needs the operator role, ApplyDag the admin's (WhoAmI's
      // permissions; the server decides).
      ctx.session.permissions.has('operate') ? h('div', {class: 'actions'}, planBtn, mayAdmin(ctx.session) ? apply : null) : null,
      mayAdmin(ctx.session) ? null : h('p', {class: 'muted'}, 'Only an admin of the team may apply.'),
      status, planEl);
    let loaded = false;
    return async () => {
      if (loaded) return; // an auto-refresh never overwrites what is typed
      loaded = true;
      if (id) {
        try {
          const {dag: d} = await ctx.session.call('DagService', 'GetDag', {id});
          area.value = JSON.stringify(d.spec, null, 2);
          revision = String(d.revision || '0');
          team = d.spec.ownerTeam || '';
        } catch (e) {
          replace(status, errorBox(e));
        }
      } else {
        const spec = {...example, ownerTeam: ctx.session.clusterAdmin ? 'team' : ctx.session.team};
        spec.id = `${spec.ownerTeam}.my-dag`;
        spec.nodes = spec.nodes.map((n) => ({...n, jobId: `${spec.ownerTeam}.${n.id}`}));
        area.value = JSON.stringify(spec, null, 2);
        team = spec.ownerTeam;
      }
      redraw();
    };
  },
};
