// Bulk actions: pause, resume or trigger every job that a search and
// filters select, on the server (OperatorService.BulkJobs). The page asks
// the server for a dry run first, which lists every matching job and
// whether the action touches it; then the user types what it will do, and
// the page sends the same selection with the count the dry run gave. The
// server refuses it if the selection changed meanwhile, and checks and
// audits each job as its own call would.

import {h, replace, table, stateTag, errorBox} from '../dom.js';
import * as fmt from '../format.js';
import {filterForm, field, select, textInput} from './common.js';

// maxJobs is the server's bound on a selection (apiserver.MaxBulkJobs): a
// larger one is refused before anything is done.
export const maxJobs = 1000;

// bulkTimeoutMs bounds the action: up to maxJobs calls in one request.
const bulkTimeoutMs = 5 * 60 * 1000;

const actions = {
  pause: {label: 'Pause', verb: 'pause', action: 'BULK_ACTION_PAUSE'},
  resume: {label: 'Resume', verb: 'resume', action: 'BULK_ACTION_RESUME'},
  trigger: {label: 'Trigger now', verb: 'trigger', action: 'BULK_ACTION_TRIGGER'},
};

// phrase is what the user types to confirm: "pause 3 jobs".
export function phrase(verb, n) {
  return `${verb} ${n} job${n === 1 ? '' : 's'}`;
}

// request is the BulkJobs request of the URL's selection.
function request(q, a) {
  const filter = {};
  if (q.get('team')) filter.team = q.get('team');
  if (q.get('state')) filter.state = q.get('state');
  if (q.get('kind')) filter.scheduleKind = q.get('kind');
  const body = {action: a.action, filter};
  if (q.get('text')) body.text = q.get('text');
  return body;
}

export const bulk = {
  id: 'bulk',
  mount(root, ctx) {
    const q = ctx.route.query;
    const act = actions[q.get('action')] ? q.get('action') : 'pause';
    const preview = h('div', {id: 'bulk-preview', 'aria-live': 'polite'});
    const status = h('div', {id: 'action-status', 'aria-live': 'polite'});
    root.append(
      h('h1', {}, 'Bulk actions'),
      h('p', {}, 'Choose the jobs with a search and filters, and an action. The preview lists every job the action would touch; nothing is done until you type what it will do.'),
      filterForm(ctx, ['bulk'], [
        field('Action', 'f-action', select('action', act, Object.entries(actions).map(([k, a]) => [k, a.label]))),
        field('Search (id, description, labels)', 'f-text', textInput('text', q.get('text'), {type: 'search'})),
        field('Team', 'f-team', textInput('team', q.get('team'))),
        field('State', 'f-state', select('state', q.get('state') || '', [
          ['', 'any'], ['DEFINITION_STATE_ACTIVE', 'active'], ['DEFINITION_STATE_PAUSED', 'paused']])),
        field('Schedule', 'f-kind', select('kind', q.get('kind') || '', [
          ['', 'any'], ['SCHEDULE_KIND_CRON', 'cron'], ['SCHEDULE_KIND_INTERVAL', 'interval'], ['SCHEDULE_KIND_AT', 'at'],
          ['SCHEDULE_KIND_DELAY', 'delay'], ['SCHEDULE_KIND_IMMEDIATE', 'immediate'], ['SCHEDULE_KIND_NONE', 'none']])),
      ]),
      preview, status);
    let shown = '';
    return async () => {
      // The preview is read once per selection: an auto-refresh never
      // replaces what the user is confirming.
      const key = q.toString();
      if (shown === key) return;
      shown = key;
      if (![...q.keys()].some((k) => ['text', 'team', 'state', 'kind'].includes(k))) {
        replace(preview, h('p', {class: 'notice'}, 'Search or filter first: a bulk action never applies to every job by default.'));
        return;
      }
      replace(preview, 'Reading the selection…');
      try {
        const body = request(q, actions[act]);
        const dry = await ctx.session.call('OperatorService', 'BulkJobs', {...body, dryRun: true});
        replace(preview, previewOf(ctx, actions[act], body, dry, status));
      } catch (e) {
        replace(preview, errorBox(e));
      }
    };
  },
};

function previewOf(ctx, a, body, dry, status) {
  const jobs = dry.jobs || [];
  const touched = dry.touched || 0;
  const skipped = jobs.length - touched;
  const rows = jobs.map((j) => [
    h('a', {href: `#/jobs/${encodeURIComponent(j.jobId)}`}, j.jobId),
    j.ownerTeam,
    stateTag(fmt.enumName(j.state, 'DEFINITION_STATE_')),
    j.touched ? h('strong', {}, `yes: ${a.verb}`) : `no: ${j.skipped}`,
  ]);
  const out = [
    h('p', {}, h('strong', {id: 'bulk-count', 'data-count': String(touched)}, String(touched)),
      ` of the ${jobs.length} matching job${jobs.length === 1 ? '' : 's'} would be ${a.verb === 'trigger' ? 'triggered' : `${a.verb}d`}`,
      skipped ? ` (${skipped} left as they are)` : '', '.'),
    jobs.length ? table('Jobs the action would touch', ['Job', 'Team', 'State', 'Touched'], rows) : null,
  ];
  if (touched === 0) return out;
  const expect = phrase(a.verb, touched);
  const input = h('input', {type: 'text', id: 'bulk-confirm-text', autocomplete: 'off', spellcheck: 'false'});
  const go = h('button', {type: 'button', class: 'danger', id: 'bulk-confirm', 'data-write': 'true'}, `${a.label}: ${touched} jobs`);
  go.addEventListener('click', async () => {
    if (input.value.trim() !== expect) {
      replace(status, errorBox(new Error(`type "${expect}" to confirm`)));
      input.focus();
      return;
    }
    go.disabled = true;
    input.disabled = true;
    replace(status, `${a.label}: ${touched} jobs…`);
    try {
      const done = await ctx.session.call('OperatorService', 'BulkJobs', {...body, expectedCount: touched}, {timeoutMs: bulkTimeoutMs});
      const failed = (done.jobs || []).filter((j) => j.error);
      replace(status, h('div', {id: 'bulk-done', role: 'status'},
        h('p', {}, `${a.label}: ${(done.touched || 0) - failed.length} of ${done.touched || 0} done.`),
        failed.length ? h('ul', {class: 'error'}, failed.map((j) => h('li', {}, `${j.jobId}: ${j.error}`))) : null));
    } catch (e) {
      replace(status, errorBox(e), e.code === 'failed_precondition' ? h('p', {}, 'The selection changed since the preview: nothing was done. Preview it again.') : null);
      go.disabled = false;
      input.disabled = false;
    }
  });
  out.push(h('div', {class: 'confirm'},
    h('label', {for: 'bulk-confirm-text', class: 'field'}, `Type "${expect}" to confirm`), input, go));
  return out;
}
