// Dead letters: the runs that used up their attempts, paged, with a dry
// run before every replay.

import {h, replace, table, errorBox} from '../dom.js';
import * as fmt from '../format.js';
import {pager, filterForm, field, textInput, loadInto} from './common.js';

const pageSize = 50;

export const deadLetters = {
  id: 'dlq',
  mount(root, ctx) {
    const q = ctx.route.query;
    const results = h('div', {id: 'results', 'aria-live': 'polite'});
    const status = h('div', {id: 'action-status', 'aria-live': 'polite'});
    root.append(
      h('h1', {}, 'Dead letters'),
      h('p', {class: 'muted'}, 'A replay runs the dead run again with the same run id, attempts from 1, and the job\'s current definition.'),
      filterForm(ctx, ['dlq'], [field('Job', 'f-job', textInput('job', q.get('job')))]),
      status, results);
    return () => loadInto(results, () => listDead(ctx, status));
  },
};

async function listDead(ctx, status) {
  const q = ctx.route.query;
  const filter = {};
  if (q.get('job')) filter.jobId = q.get('job');
  const req = {filter, pageSize};
  if (q.get('page')) req.pageToken = q.get('page');
  const resp = await ctx.session.call('DlqService', 'ListDeadLetters', req);
  const list = resp.deadLetters || [];
  const rows = list.map((d) => {
    const r = d.run || {};
    return [
      h('a', {href: `#/runs/${encodeURIComponent(r.runId)}`}, r.runId),
      h('a', {href: `#/jobs/${encodeURIComponent(r.jobId)}`}, r.jobId),
      r.ownerTeam || '',
      String(d.attempts || ''),
      fmt.time(d.deadAt),
      d.lastError ? `${d.lastError.code || ''} ${d.lastError.message || ''}`.trim() : '',
      ctx.session.mayOperate(r.ownerTeam) ? replayButton(ctx, status, {runId: r.runId}, `Replay ${r.runId}`) : '',
    ];
  });
  const all = filter.jobId && list.some((d) => ctx.session.mayOperate((d.run || {}).ownerTeam)) ?
    h('div', {class: 'actions'}, replayButton(ctx, status, {jobId: filter.jobId}, `Replay every dead run of ${filter.jobId}…`)) : null;
  return [
    all,
    rows.length ? table('Dead letters', ['Run', 'Job', 'Team', 'Attempts', `Dead at (${fmt.viewerZone})`, 'Last error', 'Action'], rows) : h('p', {}, 'No dead letters match.'),
    pager(ctx, ['dlq'], resp.nextPageToken),
  ];
}

// replayButton asks the server for a dry run first and shows what a
// replay would touch; only then is the replay offered.
function replayButton(ctx, status, filter, label) {
  const b = h('button', {type: 'button', 'data-write': 'true', class: 'replay'}, label.endsWith('…') ? label : 'Replay…');
  b.setAttribute('aria-label', label);
  b.addEventListener('click', async () => {
    replace(status, 'Dry run…');
    try {
      const dry = await ctx.session.call('DlqService', 'ReplayDeadLetters', {filter, dryRun: true});
      const ids = dry.runIds || [];
      const skipped = dry.skippedRunIds || [];
      const confirm = h('button', {type: 'button', class: 'primary', 'data-write': 'true', id: 'confirm-replay'}, `Replay ${ids.length} run${ids.length === 1 ? '' : 's'}`);
      const cancel = h('button', {type: 'button', onclick: () => {
        replace(status);
        b.focus();
      }}, 'Cancel');
      confirm.disabled = ids.length === 0;
      confirm.addEventListener('click', async () => {
        confirm.disabled = true;
        try {
          const done = await ctx.session.call('DlqService', 'ReplayDeadLetters', {filter});
          replace(status, h('p', {class: 'notice', id: 'replayed'}, `Replayed ${(done.runIds || []).length}: `, (done.runIds || []).join(', '),
            (done.skippedRunIds || []).length ? `; skipped (job deleted): ${done.skippedRunIds.join(', ')}` : ''));
        } catch (e) {
          replace(status, errorBox(e));
        }
      });
      replace(status, h('div', {class: 'confirm', id: 'replay-preview'},
        h('p', {}, `Dry run: a replay would run ${ids.length} dead run${ids.length === 1 ? '' : 's'} again`,
          ids.length ? `: ${ids.slice(0, 20).join(', ')}${ids.length > 20 ? ', …' : ''}` : '',
          skipped.length ? `; ${skipped.length} skipped because their job no longer exists` : '', '.'),
        confirm, cancel));
      confirm.focus();
    } catch (e) {
      replace(status, errorBox(e));
    }
  });
  return b;
}
