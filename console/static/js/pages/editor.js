// The job editor: every field of a job, as a form, as the JSON the API
// takes and as YAML (which the server reads: PlanApply's and ApplyJob's
// document), and before anything is applied the server's plan (PlanApply):
// the field diff, the fire times before and after, and the runs it adds
// per minute over the next hour. Apply names the revision that was edited
// (ApplyJob's expected_revision), so a definition that changed meanwhile
// is refused, not overwritten.

import {h, replace, table, num, errorBox} from '../dom.js';
import * as fmt from '../format.js';
import {loadInto} from './common.js';
import {loadChart, heatGrid, draftKey} from './heatmap.js';
import {toYAML} from '../yaml.js';

const kinds = [['', 'none: runs only when triggered'], ['cron', 'cron'], ['interval', 'interval'], ['at', 'once at a time'], ['delay', 'once after a delay'], ['immediate', 'once, when applied']];
const targets = [['http', 'HTTP request'], ['handler', 'worker handler'], ['kafka', 'Kafka record'], ['exec', 'command (exec)']];
const enums = {
  nonexistent: [['', 'default (shift forward)'], ['NONEXISTENT_TIME_POLICY_SKIP', 'skip'], ['NONEXISTENT_TIME_POLICY_SHIFT_FORWARD', 'shift forward']],
  ambiguous: [['', 'default (first)'], ['AMBIGUOUS_TIME_POLICY_FIRST', 'first'], ['AMBIGUOUS_TIME_POLICY_SECOND', 'second'], ['AMBIGUOUS_TIME_POLICY_BOTH', 'both']],
  misfire: [['', 'default (fire once)'], ['MISFIRE_POLICY_FIRE_ONCE', 'fire once'], ['MISFIRE_POLICY_FIRE_ALL', 'fire all'], ['MISFIRE_POLICY_SKIP', 'skip']],
  priority: [['', 'default'], ['PRIORITY_HIGH', 'high'], ['PRIORITY_DEFAULT', 'default topic'], ['PRIORITY_LOW', 'low']],
  routing: [['', 'by job id (any runner)'], ['ROUTING_STRATEGY_ROUND_ROBIN', 'round robin'], ['ROUTING_STRATEGY_RANDOM', 'random'],
    ['ROUTING_STRATEGY_LEAST_LOADED', 'least loaded'], ['ROUTING_STRATEGY_FIXED', 'fixed executor'], ['ROUTING_STRATEGY_BROADCAST', 'broadcast'],
    ['ROUTING_STRATEGY_SHARDED', 'sharded']],
  fallback: [['', 'default'], ['ROUTING_FALLBACK_ANY', 'any executor'], ['ROUTING_FALLBACK_WAIT', 'wait for it']],
  overlap: [['', 'default'], ['OVERLAP_POLICY_ALLOW', 'allow'], ['OVERLAP_POLICY_FORBID', 'forbid (skip the new run)'],
    ['OVERLAP_POLICY_QUEUE', 'queue (defer the new run)'], ['OVERLAP_POLICY_REPLACE', 'replace (cancel the old run)']],
};

// The form's fields: id, label, where the value lives in the spec, and its
// kind. Values are kept as protojson writes them (durations "30s", enums by
// name), so the form and the JSON are one definition.
const fields = [
  {id: 'e-id', label: 'Job id', path: 'id'},
  {id: 'e-team', label: 'Owner team', path: 'ownerTeam'},
  {id: 'e-description', label: 'Description', path: 'description'},
  {id: 'e-labels', label: 'Labels (key=value, comma separated)', path: 'labels', type: 'labels'},
  {id: 'e-paused', label: 'Paused', path: 'paused', type: 'bool'},
  {id: 'e-kind', label: 'Schedule', type: 'kind', options: kinds, section: 'Trigger'},
  {id: 'e-cron', label: 'Cron expression (5 or 6 fields)', path: 'schedule.cron.expression', when: ['cron']},
  {id: 'e-every', label: 'Every (like 30s)', path: 'schedule.interval.every', when: ['interval']},
  {id: 'e-offset', label: 'Offset (like 5s)', path: 'schedule.interval.offset', when: ['interval']},
  {id: 'e-at', label: 'At (RFC 3339, like 2030-01-02T03:04:05Z)', path: 'schedule.at.time', when: ['at']},
  {id: 'e-delay', label: 'Delay (like 90s)', path: 'schedule.delay.duration', when: ['delay']},
  {id: 'e-zone', label: 'Time zone (IANA, default UTC)', path: 'schedule.timeZone', when: ['cron', 'interval', 'at', 'delay', 'immediate']},
  {id: 'e-dst-nonexistent', label: 'DST: time that does not exist', path: 'schedule.dst.nonexistent', options: enums.nonexistent, when: ['cron']},
  {id: 'e-dst-ambiguous', label: 'DST: time that happens twice', path: 'schedule.dst.ambiguous', options: enums.ambiguous, when: ['cron']},
  {id: 'e-misfire', label: 'Misfire policy', path: 'schedule.misfirePolicy', options: enums.misfire, when: ['cron', 'interval', 'at', 'delay', 'immediate']},
  {id: 'e-catch-up', label: 'Catch-up window (like 3600s)', path: 'schedule.catchUpWindow', when: ['cron', 'interval', 'at', 'delay', 'immediate']},
  {id: 'e-target', label: 'Target', type: 'target', options: targets, section: 'Target'},
  {id: 'e-http-method', label: 'Method', path: 'target.http.method', target: 'http'},
  {id: 'e-http-url', label: 'URL', path: 'target.http.url', target: 'http'},
  {id: 'e-handler', label: 'Handler name', path: 'target.handler.name', target: 'handler'},
  {id: 'e-kafka-topic', label: 'Topic', path: 'target.kafka.topic', target: 'kafka'},
  {id: 'e-kafka-key', label: 'Key', path: 'target.kafka.key', target: 'kafka'},
  {id: 'e-exec', label: 'Command', path: 'target.exec.command', target: 'exec'},
  {id: 'e-priority', label: 'Priority', path: 'priority', options: enums.priority, section: 'Scheduling'},
  {id: 'e-pool', label: 'Executor pool', path: 'pool'},
  {id: 'e-routing', label: 'Routing strategy', path: 'routing.strategy', options: enums.routing},
  {id: 'e-executor', label: 'Fixed executor', path: 'routing.executor', routing: ['ROUTING_STRATEGY_FIXED']},
  {id: 'e-fallback', label: 'Fallback when it is gone', path: 'routing.fallback', options: enums.fallback, routing: ['ROUTING_STRATEGY_FIXED']},
  {id: 'e-shards', label: 'Shards', path: 'routing.shards', type: 'int', routing: ['ROUTING_STRATEGY_SHARDED']},
  {id: 'e-splay', label: 'Splay (like 30s)', path: 'splay'},
  {id: 'e-max-attempts', label: 'Max attempts', path: 'retry.maxAttempts', type: 'int', section: 'Failure policy'},
  {id: 'e-initial-backoff', label: 'Initial backoff (like 1s)', path: 'retry.initialBackoff'},
  {id: 'e-max-backoff', label: 'Max backoff (like 60s)', path: 'retry.maxBackoff'},
  {id: 'e-multiplier', label: 'Backoff multiplier', path: 'retry.multiplier', type: 'float'},
  {id: 'e-non-retryable', label: 'Errors not retried (comma separated)', path: 'retry.nonRetryableErrors', type: 'list'},
  {id: 'e-timeout', label: 'Timeout (like 30s)', path: 'timeout'},
  {id: 'e-concurrency', label: 'Concurrency limit (0: unlimited)', path: 'concurrencyLimit', type: 'int', section: 'Blocking'},
  {id: 'e-overlap', label: 'Overlap policy', path: 'overlapPolicy', options: enums.overlap},
  {id: 'e-queue-delay', label: 'Queue delay (like 5s)', path: 'queueDelay'},
];

function get(obj, path) {
  return path.split('.').reduce((o, k) => (o === undefined || o === null ? undefined : o[k]), obj);
}

// set writes a value at path, creating the objects on the way; an empty
// value deletes the key, and objects left empty are pruned.
function set(obj, path, value) {
  const keys = path.split('.');
  const chain = [obj];
  let o = obj;
  for (const k of keys.slice(0, -1)) {
    if (typeof o[k] !== 'object' || o[k] === null) o[k] = {};
    o = o[k];
    chain.push(o);
  }
  const last = keys[keys.length - 1];
  const empty = value === undefined || value === '' || value === false || (Array.isArray(value) && value.length === 0) ||
    (typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0);
  if (empty) delete o[last];
  else o[last] = value;
  for (let i = keys.length - 2; i >= 0; i--) {
    if (Object.keys(chain[i + 1]).length === 0) delete chain[i][keys[i]];
  }
}

function scheduleKind(spec) {
  const s = spec.schedule || {};
  return ['cron', 'interval', 'at', 'delay', 'immediate'].find((k) => s[k] !== undefined) || '';
}

function targetKind(spec) {
  const t = spec.target || {};
  return ['http', 'handler', 'kafka', 'exec'].find((k) => t[k] !== undefined) || 'http';
}

// readForm writes the form's values into a copy of spec: the fields the
// form does not show (headers, payload, ...) stay as they are.
export function readForm(form, spec) {
  const out = structuredClone(spec);
  const kind = form.querySelector('#e-kind').value;
  const sched = out.schedule || {};
  for (const k of ['cron', 'interval', 'at', 'delay', 'immediate']) if (k !== kind) delete sched[k];
  if (kind && sched[kind] === undefined) sched[kind] = {};
  out.schedule = sched;
  const tkind = form.querySelector('#e-target').value;
  const target = out.target || {};
  for (const k of ['http', 'handler', 'kafka', 'exec']) if (k !== tkind) delete target[k];
  if (target[tkind] === undefined) target[tkind] = {};
  out.target = target;
  for (const f of fields) {
    if (!f.path) continue;
    const el = form.querySelector(`#${f.id}`);
    if (el.closest('[hidden]')) {
      // A field of another kind or strategy: not part of the definition.
      if (f.when || f.routing) set(out, f.path, undefined);
      continue;
    }
    let v = el.type === 'checkbox' ? el.checked : el.value.trim();
    if (f.type === 'int') v = v === '' ? undefined : Number(v);
    if (f.type === 'float') v = v === '' ? undefined : Number(v);
    if (f.type === 'list') v = v.split(',').map((x) => x.trim()).filter(Boolean);
    if (f.type === 'labels') {
      const m = {};
      for (const pair of v.split(',').map((x) => x.trim()).filter(Boolean)) {
        const [k, ...rest] = pair.split('=');
        m[k.trim()] = rest.join('=').trim();
      }
      v = m;
    }
    set(out, f.path, v);
  }
  // An immediate schedule is an empty message; keep it.
  if (kind === 'immediate') out.schedule = {...(out.schedule || {}), immediate: {}};
  if (!kind && out.schedule && Object.keys(out.schedule).length === 0) delete out.schedule;
  if (kind && !out.schedule) out.schedule = {[kind]: {}};
  if (!out.target || Object.keys(out.target).length === 0) out.target = {[tkind]: {}};
  return out;
}

// fillForm shows spec in the form.
export function fillForm(form, spec) {
  form.querySelector('#e-kind').value = scheduleKind(spec);
  form.querySelector('#e-target').value = targetKind(spec);
  for (const f of fields) {
    if (!f.path) continue;
    const el = form.querySelector(`#${f.id}`);
    const v = get(spec, f.path);
    if (el.type === 'checkbox') el.checked = Boolean(v);
    else if (f.type === 'labels') el.value = Object.entries(v || {}).map(([k, x]) => `${k}=${x}`).join(', ');
    else if (f.type === 'list') el.value = (v || []).join(', ');
    else el.value = v === undefined || v === null ? '' : String(v);
  }
  showWhat(form);
}

// showWhat shows the fields of the chosen schedule kind, target and
// routing strategy, and hides the others.
function showWhat(form) {
  const kind = form.querySelector('#e-kind').value;
  const tkind = form.querySelector('#e-target').value;
  const routing = form.querySelector('#e-routing').value;
  for (const f of fields) {
    const wrap = form.querySelector(`#${f.id}`).closest('label');
    let shown = true;
    if (f.when) shown = f.when.includes(kind);
    if (f.target) shown = f.target === tkind;
    if (f.routing) shown = f.routing.includes(routing);
    wrap.hidden = !shown;
  }
}

function control(f) {
  if (f.type === 'bool') return h('input', {type: 'checkbox', id: f.id});
  if (f.options || f.type === 'kind' || f.type === 'target') {
    return h('select', {id: f.id}, f.options.map(([v, t]) => h('option', {value: v}, t)));
  }
  const type = f.type === 'int' || f.type === 'float' ? 'number' : 'text';
  return h('input', {type, id: f.id, autocomplete: 'off', spellcheck: 'false', step: f.type === 'float' ? 'any' : null, min: f.type === 'int' ? '0' : null});
}

function buildForm() {
  const sections = [];
  let current = h('fieldset', {}, h('legend', {}, 'Job'));
  sections.push(current);
  for (const f of fields) {
    if (f.section) {
      current = h('fieldset', {}, h('legend', {}, f.section));
      sections.push(current);
    }
    current.append(h('label', {for: f.id, class: 'field'}, f.label, control(f)));
  }
  return h('form', {class: 'editor', id: 'editor-form', novalidate: true}, sections);
}

// A new job's starting point: a cron job of the caller's team.
function blank(session) {
  return {
    id: '',
    ownerTeam: session.clusterAdmin ? '' : session.team,
    schedule: {cron: {expression: '0 */5 * * * *'}, timeZone: 'UTC'},
    target: {handler: {name: ''}},
  };
}

export const editor = {
  id: 'editor',
  mount(root, ctx) {
    const id = ctx.route.parts[1] || '';
    const status = h('div', {id: 'editor-status', 'aria-live': 'polite'});
    const planEl = h('div', {id: 'plan'});
    root.append(h('h1', {}, id ? ['Edit job ', h('code', {}, id)] : 'New job'));
    let mounted = false;
    return async () => {
      // The editor loads once: a refresh would throw the user's edits away.
      if (mounted) return;
      mounted = true;
      const body = h('div', {id: 'results'});
      root.append(body);
      await loadInto(body, async () => {
        let spec = blank(ctx.session);
        let revision = '0';
        if (id) {
          const got = await ctx.session.call('JobService', 'GetJob', {id});
          spec = got.job.spec;
          revision = String(got.job.revision);
        }
        const team = spec.ownerTeam || ctx.session.team;
        if (!ctx.session.may('operate', team)) {
          return h('p', {class: 'notice'}, `Read only: ${ctx.session.describe()} may not plan or apply team ${team}'s jobs.`);
        }
        return editorBody(ctx, {id, spec, revision, status, planEl});
      });
    };
  },
};

function editorBody(ctx, st) {
  const form = buildForm();
  const json = h('textarea', {id: 'e-json', rows: 24, spellcheck: 'false', autocomplete: 'off'});
  const jsonError = h('p', {class: 'muted', id: 'e-json-status', 'aria-live': 'polite'}, 'The definition as the API takes it (protojson). Edits here fill the form.');
  let draft = st.spec;
  // source is where the definition is being written: 'form' (the form or
  // the JSON, which the page reads itself) or 'yaml' (the YAML, which the
  // server reads, with the rule of sundial jobs apply -f: the page has no
  // YAML reader of its own that could read it otherwise).
  let source = 'form';
  let planned = null; // what was last planned without errors (plannedKey)
  const applyBtn = h('button', {type: 'button', class: 'primary', id: 'apply', 'data-write': 'true', disabled: true}, 'Apply');
  const planBtn = h('button', {type: 'button', id: 'plan-button', 'data-write': 'true'}, 'Plan: show the diff, fire times and load');
  const mayApply = () => ctx.session.mayApply(draft.ownerTeam || ctx.session.team);
  const yaml = h('textarea', {id: 'e-yaml', rows: 24, spellcheck: 'false', autocomplete: 'off'});
  const yamlStatus = h('p', {class: 'muted', id: 'e-yaml-status', 'aria-live': 'polite'},
    'Paste or type YAML here: Plan has the server read it, as sundial jobs apply -f reads a file, and the form follows.');
  const plannedKey = () => (source === 'yaml' ? `yaml:${yaml.value}` : `json:${JSON.stringify(draft)}`);
  const stale = () => {
    applyBtn.disabled = planned === null || planned !== plannedKey() || !mayApply();
  };
  // While the YAML holds edits the server has not read, the form and the
  // JSON show the definition before them: they wait, read only.
  const holdForm = (held) => {
    for (const set of form.querySelectorAll('fieldset')) set.disabled = held;
    json.readOnly = held;
  };
  const showJSON = () => {
    if (document.activeElement !== json) json.value = JSON.stringify(draft, null, 2);
    if (document.activeElement !== yaml) yaml.value = toYAML(draft);
  };
  fillForm(form, draft);
  if (st.id) form.querySelector('#e-id').readOnly = true;
  showJSON();
  const fromForm = () => {
    showWhat(form);
    draft = readForm(form, draft);
    source = 'form';
    showJSON();
    stale();
  };
  form.addEventListener('input', fromForm);
  form.addEventListener('change', fromForm);
  json.addEventListener('input', () => {
    if (json.readOnly) return;
    try {
      const parsed = JSON.parse(json.value);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('the definition is a JSON object');
      draft = parsed;
      source = 'form';
      fillForm(form, draft);
      yaml.value = toYAML(draft);
      replace(jsonError, 'The JSON is read; the form shows it.');
    } catch (e) {
      replace(jsonError, h('span', {class: 'error'}, `Not valid JSON: ${e.message}`));
    }
    stale();
  });
  yaml.addEventListener('input', () => {
    source = 'yaml';
    holdForm(true);
    replace(yamlStatus, 'YAML edited: Plan has the server read it; the form and the JSON wait for it.');
    stale();
  });
  planBtn.addEventListener('click', async () => {
    planBtn.disabled = true;
    replace(st.status, 'Planning…');
    const key = plannedKey();
    const request = source === 'yaml' ? {document: {text: yaml.value, format: 'DOCUMENT_FORMAT_YAML'}, nextFires: 10} : {jobs: [draft], nextFires: 10};
    try {
      const shown = await plan(ctx, st, request, draft);
      replace(st.planEl, shown.nodes);
      if (source === 'yaml' && shown.spec) {
        // What the server read becomes the draft: the form shows it.
        draft = shown.spec;
        fillForm(form, draft);
        json.value = JSON.stringify(draft, null, 2);
        holdForm(false);
        replace(yamlStatus, 'The server read the YAML; the form and the JSON show what it read. Apply sends this YAML.');
      } else if (source === 'yaml') {
        replace(yamlStatus, h('span', {class: 'error'}, 'The server could not read the YAML: see the plan\'s errors below.'));
      }
      planned = shown.ok && key === plannedKey() ? key : null;
      replace(st.status, shown.ok ? 'Planned. Nothing is applied until you press Apply.' : 'The plan found errors: nothing can be applied.');
    } catch (e) {
      planned = null;
      replace(st.status, errorBox(e));
    } finally {
      planBtn.disabled = false;
      stale();
    }
  });
  applyBtn.addEventListener('click', async () => {
    applyBtn.disabled = true;
    replace(st.status, 'Applying…');
    try {
      const body = source === 'yaml' ? {document: {text: yaml.value, format: 'DOCUMENT_FORMAT_YAML'}} : {spec: draft};
      const resp = await ctx.session.call('JobService', 'ApplyJob', {...body, expectedRevision: st.revision});
      const s = resp.status || {};
      if (!resp.accepted) {
        replace(st.status, h('div', {role: 'alert', class: 'error', id: 'apply-result'}, `Rejected: ${fieldErrors(s.errors)}`));
        return;
      }
      const jid = s.jobId || draft.id;
      replace(st.status, h('p', {class: 'notice', id: 'apply-result'}, `Applied: ${fmt.enumName(s.outcome, 'DEFINITION_OUTCOME_')}. `,
        h('a', {href: `#/jobs/${encodeURIComponent(jid)}`}, `Open job ${jid}`)));
      planned = null;
    } catch (e) {
      replace(st.status, h('div', {id: 'apply-result'}, errorBox(e),
        e.code === 'failed_precondition' ? h('p', {}, 'Someone changed this definition after you opened it. ',
          h('a', {href: `#/jobs/${encodeURIComponent(draft.id)}`}, 'See the definition in force'), ', then edit it again.') : null));
    } finally {
      stale();
    }
  });
  const note = mayApply() ? null :
    h('p', {class: 'muted'}, `${ctx.session.describe()} may plan but not apply: applying a definition needs the admin role.`);
  return [
    h('p', {class: 'muted'}, st.id ? `Editing revision ${st.revision}. Apply is refused if the definition changes before you apply.` :
      'A new job. Apply is refused if a job with this id is created before you apply.'),
    h('div', {class: 'editor-panes'},
      form,
      h('div', {class: 'json-pane'}, h('label', {for: 'e-json', class: 'field'}, 'JSON'), json, jsonError,
        h('details', {id: 'e-yaml-box'}, h('summary', {}, 'YAML, as sundial jobs apply -f reads it: read and write'),
          h('label', {for: 'e-yaml', class: 'field'}, 'YAML'), yaml, yamlStatus))),
    h('div', {class: 'actions'}, planBtn, applyBtn), note,
    st.status,
    st.planEl,
  ];
}

// where says where a field error is: its line in the YAML, when it names
// one.
function where(e) {
  return e.line ? ` (line ${e.line})` : '';
}

function fieldErrors(errs) {
  return (errs || []).map((e) => `${e.field}${where(e)}: ${e.reason}`).join('; ') || 'no reason given';
}

// plan asks the server what applying a definition would do (request: the
// draft as jobs, or the YAML as a document the server reads), and the
// definition in force for its fire times, and returns the nodes that show
// both, and the definition the server planned (spec: for a document, as
// it read it).
async function plan(ctx, st, request, given) {
  const resp = await ctx.session.call('OperatorService', 'PlanApply', request);
  const p = (resp.plans || [])[0] || {};
  if ((p.errors || []).length) {
    return {ok: false, nodes: [h('h2', {}, 'Plan'), h('div', {role: 'alert', class: 'error', id: 'plan-errors'},
      h('p', {}, 'The definition is invalid:'),
      h('ul', {}, p.errors.map((e) => h('li', {}, h('code', {}, e.field), `${where(e)}: ${e.reason}`))))]};
  }
  const draft = p.spec || given;
  let before = null;
  let inForce = null;
  if (!p.created && draft.id) {
    try {
      before = await ctx.session.call('JobService', 'GetJobView', {id: draft.id, nextFireTimes: 10, lastRuns: 1});
      inForce = String(before.job.revision);
    } catch {
      before = null;
    }
  }
  const zone = (draft.schedule || {}).timeZone || 'UTC';
  const changes = (p.changes || []).map((c) => [h('code', {}, c.field), c.before || '–', c.after || '–']);
  const beforeFires = before ? before.nextFireTimes || [] : [];
  const afterFires = p.nextFires || [];
  const n = Math.max(beforeFires.length, afterFires.length);
  const fires = [];
  for (let i = 0; i < n; i++) {
    fires.push([num(i + 1), beforeFires[i] ? fmt.time(beforeFires[i], zone) : '–', afterFires[i] ? fmt.time(afterFires[i], zone) : '–',
      afterFires[i] ? fmt.time(afterFires[i]) : '–']);
  }
  const load = p.load || [];
  const added = load.reduce((s, b) => s + (b.delta || 0), 0);
  const peak = load.reduce((m, b) => (Math.abs(b.delta || 0) > Math.abs(m.delta || 0) ? b : m), {delta: 0});
  const changed = st.id && inForce && inForce !== st.revision;
  const forecast = await ctx.session.call('ForecastService', 'ForecastFires', {group: 'FORECAST_GROUP_SHARD'}).catch(() => null);
  return {ok: true, spec: p.spec, nodes: [
    h('h2', {}, 'Plan'),
    changed ? h('p', {class: 'error', role: 'alert', id: 'plan-stale'}, `The definition in force is now revision ${inForce}, not ${st.revision} that you edited: Apply will be refused.`) : null,
    h('p', {id: 'plan-summary'}, p.created ? 'Creates the job' : `Changes ${changes.length} field${changes.length === 1 ? '' : 's'}`,
      ` on shard ${p.shard || 0}. `,
      `Over the next hour it ${added >= 0 ? 'adds' : 'removes'} ${Math.abs(added)} run${Math.abs(added) === 1 ? '' : 's'}`,
      peak.delta ? `, at most ${Math.abs(peak.delta)} in one minute (${fmt.time(peak.bucket)})` : '', '.'),
    h('h3', {}, 'Field diff'),
    changes.length ? h('div', {id: 'plan-diff'}, table('Field diff', ['Field', 'In force', 'After apply'], changes)) :
      h('p', {id: 'plan-diff'}, 'No field changes: applying it changes nothing.'),
    h('h3', {}, 'Fire times'),
    n ? h('div', {id: 'plan-fires'}, table('Fire times before and after', [['#', 'num'], `Before (${zone})`, `After (${zone})`, `After (${fmt.viewerZone})`], fires)) :
      h('p', {id: 'plan-fires'}, 'It fires nothing on its own (no schedule, or paused).'),
    h('h3', {}, 'Runs added per minute, next hour'),
    loadChart(load),
    forecast ? [h('h3', {}, 'On the next hour\'s heat-map (this draft outlined)'),
      heatGrid(forecast, {key: String(p.shard || 0), load}, 'shard')] : null,
    h('p', {}, h('a', {href: '#/heatmap', id: 'to-heatmap', onclick: () => window.sessionStorage.setItem(draftKey, JSON.stringify(draft, null, 2))},
      'Open the heat-map with this draft (by team or pool)')),
  ]};
}
