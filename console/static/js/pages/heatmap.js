// The next hour's firing heat-map: runs due per minute × shard, team or
// pool, counted by the server (ForecastService.ForecastFires) from the
// schedule the dispatchers will read; and a draft job's load (PlanApply)
// overlaid before it is applied. No other console shows a herd, such as
// every job at the top of the hour, before it happens.

import {h, replace, table, num, errorBox} from '../dom.js';
import * as fmt from '../format.js';
import {filterForm, field, select, loadInto} from './common.js';

const groups = [['shard', 'shard'], ['team', 'team'], ['pool', 'pool']];
const groupEnum = {shard: 'FORECAST_GROUP_SHARD', team: 'FORECAST_GROUP_TEAM', pool: 'FORECAST_GROUP_POOL'};

// draftKey keeps the editor's draft for the heat-map's overlay, in the
// tab's session only.
export const draftKey = 'sundial.console.draft';

const minuteFormat = new Intl.DateTimeFormat(undefined, {hour: '2-digit', minute: '2-digit', hourCycle: 'h23'});

// level is a count's shade, 0 (none) to 5 (the busiest minute).
function level(n, peak) {
  if (!n || peak <= 0) return 0;
  return Math.min(5, 1 + Math.floor((4 * n) / peak));
}

// overlayColumns spreads a plan's load (per-minute buckets) over the
// forecast's columns.
function overlayColumns(forecast, load) {
  const start = new Date(forecast.start).getTime();
  const out = new Array(forecast.minutes || 0).fill(0);
  for (const b of load || []) {
    const i = Math.floor((new Date(b.bucket).getTime() - start) / 60000);
    if (i >= 0 && i < out.length) out[i] += b.delta || 0;
  }
  return out;
}

// heatGrid draws a forecast: a row per key, a cell per minute, shaded by
// its runs. overlay ({key, load}) outlines the cells a draft changes, on
// its key's row (added when the forecast has none), and counts them in.
export function heatGrid(forecast, overlay, groupName) {
  const minutes = forecast.minutes || 0;
  const rows = (forecast.rows || []).map((r) => ({key: r.key, counts: (r.counts || []).map(Number)}));
  const extra = overlay ? overlayColumns(forecast, overlay.load) : null;
  if (overlay && !rows.some((r) => r.key === overlay.key)) {
    rows.push({key: overlay.key, counts: new Array(minutes).fill(0)});
  }
  let peak = 0;
  for (const r of rows) {
    for (let i = 0; i < minutes; i++) {
      const n = (r.counts[i] || 0) + (extra && r.key === overlay.key ? Math.max(0, extra[i]) : 0);
      peak = Math.max(peak, n);
    }
  }
  const start = new Date(forecast.start).getTime();
  const head = [h('th', {scope: 'col'}, groupName)];
  for (let i = 0; i < minutes; i++) {
    const label = i % 10 === 0 ? minuteFormat.format(new Date(start + i * 60000)) : '';
    head.push(h('th', {scope: 'col', class: 'heat-minute'}, label));
  }
  head.push(h('th', {scope: 'col', class: 'num'}, 'runs'));
  const body = rows.map((r) => {
    const drafted = extra && r.key === overlay.key;
    let total = 0;
    const cells = [h('th', {scope: 'row'}, r.key)];
    for (let i = 0; i < minutes; i++) {
      const base = r.counts[i] || 0;
      const add = drafted ? extra[i] : 0;
      const n = Math.max(0, base + add);
      total += n;
      const at = minuteFormat.format(new Date(start + i * 60000));
      const words = `${groupName} ${r.key}, ${at}: ${n} run${n === 1 ? '' : 's'} due` + (add ? ` (${add > 0 ? '+' : ''}${add} from the draft)` : '');
      cells.push(h('td', {class: `heat heat-${level(n, peak)}${add ? ' heat-draft' : ''}`, title: words, 'data-count': String(n),
        'data-draft': add ? String(add) : null}, add ? h('span', {class: 'visually-hidden'}, words) : ''));
    }
    cells.push(h('td', {class: 'num'}, String(total)));
    return h('tr', {'data-key': r.key, class: drafted ? 'heat-draft-row' : null}, cells);
  });
  return h('div', {class: 'heat-wrap', id: 'heatmap'},
    h('table', {class: 'heatmap'},
      h('caption', {class: 'visually-hidden'}, `Runs due per minute over the next ${minutes} minutes, by ${groupName}`),
      h('thead', {}, h('tr', {}, head)),
      h('tbody', {}, body)),
    h('p', {class: 'legend muted'}, 'Shade: runs due in the minute, relative to the busiest cell (',
      [0, 1, 2, 3, 4, 5].map((l) => h('i', {class: `heat heat-${l}`, title: `level ${l}`})), ').',
      overlay ? [' ', h('i', {class: 'heat heat-3 heat-draft'}), ' outlined: the minutes the draft changes.'] : ''));
}

// loadChart draws a plan's load: one bar per minute of the next hour, up
// for runs added and down for runs removed.
export function loadChart(load) {
  const list = load || [];
  if (!list.length) return h('p', {id: 'plan-load'}, 'It adds no run in the next hour.');
  const peak = Math.max(...list.map((b) => Math.abs(b.delta || 0)), 1);
  const bars = list.map((b) => {
    const d = b.delta || 0;
    const bar = h('span', {class: d < 0 ? 'bar neg' : 'bar', title: `${fmt.time(b.bucket)}: ${d > 0 ? '+' : ''}${d}`});
    bar.style.height = `${Math.max(4, Math.round((Math.abs(d) / peak) * 100))}%`;
    return bar;
  });
  const rows = list.map((b) => [fmt.time(b.bucket), num(`${b.delta > 0 ? '+' : ''}${b.delta || 0}`)]);
  return h('div', {id: 'plan-load'},
    h('div', {class: 'load-chart', role: 'img', 'aria-label': `${list.length} minutes with runs added or removed; at most ${peak} in one minute`}, bars),
    h('details', {}, h('summary', {}, 'Minute by minute'), table('Runs added per minute', [`Minute (${fmt.viewerZone})`, ['Runs', 'num']], rows)));
}

export const heatmap = {
  id: 'heatmap',
  mount(root, ctx) {
    const q = ctx.route.query;
    const group = groups.some(([g]) => g === q.get('group')) ? q.get('group') : 'shard';
    const results = h('div', {id: 'results', 'aria-live': 'polite'});
    const draftStatus = h('div', {id: 'draft-status', 'aria-live': 'polite'});
    const draft = h('textarea', {id: 'draft', rows: 8, spellcheck: 'false', autocomplete: 'off'});
    draft.value = window.sessionStorage.getItem(draftKey) || '';
    let overlay = null;
    const overlayBtn = h('button', {type: 'button', id: 'overlay'}, 'Overlay the draft');
    const clearBtn = h('button', {type: 'button', id: 'overlay-clear'}, 'Clear');
    let refresh = null;
    overlayBtn.addEventListener('click', async () => {
      overlayBtn.closest('details').open = true;
      replace(draftStatus, 'Planning the draft…');
      try {
        const spec = JSON.parse(draft.value);
        window.sessionStorage.setItem(draftKey, draft.value);
        const resp = await ctx.session.call('OperatorService', 'PlanApply', {jobs: [spec], nextFires: 1});
        const p = (resp.plans || [])[0] || {};
        if ((p.errors || []).length) {
          overlay = null;
          replace(draftStatus, h('p', {class: 'error', role: 'alert'}, 'The draft is invalid: ', p.errors.map((e) => `${e.field}: ${e.reason}`).join('; ')));
        } else {
          const key = {shard: String(p.shard || 0), team: spec.ownerTeam || '', pool: spec.pool || 'default'}[group];
          overlay = {key, load: p.load || []};
          const added = (p.load || []).reduce((s, b) => s + (b.delta || 0), 0);
          replace(draftStatus, h('p', {class: 'notice', id: 'draft-summary'}, `The draft ${p.created ? 'creates' : 'changes'} ${p.jobId}: `,
            `${added >= 0 ? '+' : ''}${added} runs in the next hour on ${group} ${key}, outlined below. Nothing is applied.`));
        }
      } catch (e) {
        overlay = null;
        replace(draftStatus, e instanceof SyntaxError ? h('p', {class: 'error', role: 'alert'}, `Not valid JSON: ${e.message}`) : errorBox(e));
      }
      if (refresh) await refresh();
    });
    clearBtn.addEventListener('click', async () => {
      overlay = null;
      replace(draftStatus);
      if (refresh) await refresh();
    });
    const mayPlan = ctx.session.permissions.has('operate');
    root.append(
      h('h1', {}, 'Next hour\'s firings'),
      h('p', {class: 'muted'}, 'Runs due in each minute of the next hour, counted by the server from the schedule the dispatchers will read. ',
        ctx.session.clusterAdmin ? 'Every team\'s runs.' : `Team ${ctx.session.team}'s runs.`),
      filterForm(ctx, ['heatmap'], [field('Rows', 'f-group', select('group', group, groups))]),
      mayPlan ? h('details', {class: 'draft', open: draft.value ? true : null},
        h('summary', {}, 'Overlay a draft job (what-if)'),
        h('label', {for: 'draft', class: 'field'}, 'A job definition (JSON, as the API takes it); the editor puts its draft here'),
        draft, h('div', {class: 'actions'}, overlayBtn, clearBtn), draftStatus) : null,
      results);
    refresh = () => loadInto(results, async () => {
      const f = await ctx.session.call('ForecastService', 'ForecastFires', {group: groupEnum[group]});
      const total = (f.rows || []).reduce((s, r) => s + Number(r.total || 0), 0);
      return [
        h('p', {id: 'forecast-summary'}, `${total} runs due from ${fmt.time(f.start)} over ${f.minutes} minutes`,
          group === 'shard' ? ` on ${(f.rows || []).length} of ${f.shardCount} shards` : ` in ${(f.rows || []).length} ${group}s`,
          `; ${f.entriesRead || 0} due entries read.`),
        f.truncated ? h('p', {class: 'notice'}, 'The forecast reached its bound of entries read: the counts are a lower bound.') : null,
        heatGrid(f, overlay, group),
      ];
    });
    return refresh;
  },
};
