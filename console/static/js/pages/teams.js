// Teams: who the caller is (WhoAmI), the quotas in force with what the
// team uses of them (GetQuotas), and the audit trail of a team or a job
// (ListAudit). Each shows only what the caller's role may read: a team's
// principal its own team, the cluster admin any team it names.

import {h, table, num} from '../dom.js';
import * as fmt from '../format.js';
import {filterForm, field, textInput, loadInto} from './common.js';

const auditLimit = 100;

function limit(n) {
  return Number(n || 0) === 0 ? 'unlimited' : String(n);
}

function usage(n) {
  return Number(n) < 0 ? '–' : String(n);
}

export const teams = {
  id: 'teams',
  mount(root, ctx) {
    const q = ctx.route.query;
    const s = ctx.session;
    // The team shown: the caller's own, or for the cluster admin the one
    // named in the URL.
    const team = s.clusterAdmin ? (q.get('team') || '') : s.team;
    const job = q.get('job') || '';
    const whoEl = h('div', {id: 'who'});
    const quotaEl = h('div', {id: 'quotas', 'aria-live': 'polite'});
    const auditEl = h('div', {id: 'audit', 'aria-live': 'polite'});
    root.append(
      h('h1', {}, s.clusterAdmin ? 'Teams' : `Team ${s.team}`),
      h('h2', {}, 'You'), whoEl,
      filterForm(ctx, ['teams'], [
        s.clusterAdmin ? field('Team', 'f-team', textInput('team', team, {placeholder: 'every team with a quota'})) : null,
        field('Job (its audit trail)', 'f-job', textInput('job', job)),
      ]),
      h('h2', {}, 'Quotas'), quotaEl,
      h('h2', {}, 'Tokens'),
      h('p', {class: 'muted', id: 'tokens'}, 'The API has no call that lists or makes tokens: ', h('code', {}, 'sundial tokens create'), ', ',
        h('code', {}, 'list'), ' and ', h('code', {}, 'revoke'), ' manage them with the store\'s credentials (docs/api.md). A token\'s secret is shown once, when it is made.'),
      h('h2', {}, job ? `Audit trail of job ${job}` : `Audit trail${team ? ` of team ${team}` : ''}`), auditEl);
    whoEl.append(h('dl', {class: 'props'},
      h('dt', {}, 'Subject'), h('dd', {id: 'who-subject'}, s.subject || '–'),
      h('dt', {}, 'Team'), h('dd', {}, s.clusterAdmin ? 'every team (cluster admin)' : s.team),
      h('dt', {}, 'Role'), h('dd', {id: 'who-role'}, s.role),
      h('dt', {}, 'May'), h('dd', {id: 'who-may'}, [...s.permissions].join(', ') || 'nothing')));
    return () => Promise.all([
      loadInto(quotaEl, async () => {
        const resp = await s.call('QuotaService', 'GetQuotas', team ? {teams: [team]} : {});
        const rows = (resp.quotas || []).map((u) => [
          u.team === '*' ? 'default (every team without its own)' : u.team,
          num(limit(u.maxJobs)), num(usage(u.jobs ?? 0)),
          num(limit(u.maxConcurrentRuns)), num(usage(u.concurrentRuns ?? -1)),
          num(limit(u.maxRunsPerMinute)),
        ]);
        if (!rows.length) return h('p', {}, 'No team has a quota of its own, and there is no default: every team is unlimited.');
        return table('Quotas', ['Team', ['Max jobs', 'num'], ['Jobs', 'num'], ['Max concurrent runs', 'num'], ['Running now', 'num'], ['Max runs a minute', 'num']], rows);
      }),
      loadInto(auditEl, async () => {
        if (!job && !team) return h('p', {class: 'notice'}, 'Name a team or a job to read its audit trail.');
        const resp = await s.call('AuditService', 'ListAudit', job ? {jobId: job, limit: auditLimit} : {team, limit: auditLimit});
        const rows = (resp.records || []).map((r) => [
          fmt.time(r.at),
          r.actor,
          h('span', {class: 'audit-action'}, r.action),
          h('a', {href: `#/jobs/${encodeURIComponent(r.subject)}`}, r.subject),
          num(`${r.revisionBefore || 0} → ${r.revisionAfter || 0}`),
          (r.changes || []).length ? h('details', {}, h('summary', {}, (r.changes || []).map((c) => c.field).join(', ')),
            table('Changes', ['Field', 'Before', 'After'], r.changes.map((c) => [h('code', {}, c.field), c.before || '–', c.after || '–']))) : '',
          r.detail || '',
        ]);
        if (!rows.length) return h('p', {}, 'No record.');
        return [table('Audit trail', [`When (${fmt.viewerZone})`, 'Actor', 'Action', 'Subject', ['Revisions', 'num'], 'Changes', 'Detail'], rows),
          rows.length === auditLimit ? h('p', {class: 'muted'}, `The newest ${auditLimit} records.`) : null];
      }),
    ]);
  },
};
