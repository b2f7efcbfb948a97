// Bulk actions: pause, resume or trigger every job that a search and
// filters select. The page first lists exactly what the action would touch
// (the count and every job id, read from the server page by page, at most
// maxJobs), then asks the user to type what it will do, and only then
// calls the API, one job at a time (each call audited as any other).

import {h, replace, table, stateTag, errorBox} from '../dom.js';
import * as fmt from '../format.js';
import {limited, filterForm, field, select, textInput} from './common.js';

// maxJobs bounds a bulk action: a selection larger than this is refused
// before anything is done, and the user narrows the search.
export const maxJobs = 1000;
const scanPage = 200;

const actions = {
  pause: {label: 'Pause', verb: 'pause', method: 'PauseJob', applies: (j) => fmt.jobState(j) !== 'paused', skip: 'already paused'},
  resume: {label: 'Resume', verb: 'resume', method: 'ResumeJob', applies: (j) => fmt.jobState(j) === 'paused', skip: 'not paused'},
  trigger: {label: 'Trigger now', verb: 'trigger', method: 'TriggerJob', applies: () => true, skip: ''},
};

// phrase is what the user types to confirm: "pause 3 jobs".
export function phrase(verb, n) {
  return `${verb} ${n} job${n === 1 ? '' : 's'}`;
}

// selection reads every job the filters select, page by page, and keeps
// those the caller may operate. It stops with an error past maxJobs.
async function selection(ctx, q) {
  const filter = {};
  if (q.get('team')) filter.team = q.get('team');
  if (q.get('state')) filter.state = q.get('state');
  if (q.get('kind')) filter.scheduleKind = q.get('kind');
  const text = q.get('text');
  const out = [];
  let token = '';
  do {
    const page = {size: scanPage};
    if (token) page.token = token;
    const resp = text ?
      await ctx.session.call('JobService', 'SearchJobs', {text, filter, page}) :
      await ctx.session.call('JobService', 'ListJobs', {filter, page});
    for (const j of resp.jobs || []) {
      out.push(j);
      if (out.length > maxJobs) {
        throw new Error(`more than ${maxJobs} jobs match: narrow the search or the filters`);
      }
    }
    token = resp.nextPageToken || '';
  } while (token);
  return out;
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
        replace(preview, previewOf(ctx, actions[act], await selection(ctx, q), status));
      } catch (e) {
        replace(preview, errorBox(e));
      }
    };
  },
};

function previewOf(ctx, a, jobs, status) {
  const mine = jobs.filter((j) => ctx.session.mayOperate(j.spec.ownerTeam));
  const touched = mine.filter(a.applies);
  const skipped = jobs.length - touched.length;
  const rows = jobs.map((j) => [
    h('a', {href: `#/jobs/${encodeURIComponent(j.spec.id)}`}, j.spec.id),
    j.spec.ownerTeam,
    stateTag(fmt.jobState(j)),
    !ctx.session.mayOperate(j.spec.ownerTeam) ? 'no: not your team\'s' : a.applies(j) ? h('strong', {}, `yes: ${a.verb}`) : `no: ${a.skip}`,
  ]);
  const out = [
    h('p', {}, h('strong', {id: 'bulk-count', 'data-count': String(touched.length)}, String(touched.length)),
      ` of the ${jobs.length} matching job${jobs.length === 1 ? '' : 's'} would be ${a.verb === 'trigger' ? 'triggered' : `${a.verb}d`}`,
      skipped ? ` (${skipped} left as they are)` : '', '.'),
    jobs.length ? table('Jobs the action would touch', ['Job', 'Team', 'State', 'Touched'], rows) : null,
  ];
  if (touched.length === 0) return out;
  const expect = phrase(a.verb, touched.length);
  const input = h('input', {type: 'text', id: 'bulk-confirm-text', autocomplete: 'off', spellcheck: 'false'});
  const go = h('button', {type: 'button', class: 'danger', id: 'bulk-confirm', 'data-write': 'true'}, `${a.label}: ${touched.length} jobs`);
  go.addEventListener('click', async () => {
    if (input.value.trim() !== expect) {
      replace(status, errorBox(new Error(`type "${expect}" to confirm`)));
      input.focus();
      return;
    }
    go.disabled = true;
    input.disabled = true;
    let done = 0;
    const results = await limited(touched, 4, async (j) => {
      const r = await ctx.session.call('OperatorService', a.method, {jobId: j.spec.id});
      done++;
      replace(status, `${a.label}: ${done} of ${touched.length}…`);
      return r;
    });
    const failed = touched.map((j, i) => [j, results[i]]).filter(([, r]) => r && r.error);
    replace(status, h('div', {id: 'bulk-done', role: 'status'},
      h('p', {}, `${a.label}: ${touched.length - failed.length} of ${touched.length} done.`),
      failed.length ? h('ul', {class: 'error'}, failed.map(([j, r]) => h('li', {}, `${j.spec.id}: ${r.error.code || ''} ${r.error.message}`))) : null));
  });
  out.push(h('div', {class: 'confirm'},
    h('label', {for: 'bulk-confirm-text', class: 'field'}, `Type "${expect}" to confirm`), input, go));
  return out;
}
