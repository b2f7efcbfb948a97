// Teams: who the caller is (WhoAmI), the teams (TeamService.ListTeams,
// cluster admin), the quotas in force with what the team uses of them
// (GetQuotas), the team's tokens (ListTokens, CreateToken, RevokeToken)
// and the audit trail of a team or a job (ListAudit). Each shows only what
// the caller's role may read or do: a team's principal its own team, the
// cluster admin any team it names; the server still decides every call.
// A new token's secret is shown once, in this page's memory only: never in
// the URL, the tab's storage or a refresh. The cluster admin also creates
// and deletes teams and sets quotas (teamadmin.js).

import {h, replace, table, num, stateTag, errorBox} from '../dom.js';
import * as fmt from '../format.js';
import {filterForm, field, select, textInput, loadInto} from './common.js';
import {mayManageTeams, createTeamSection, deleteTeamSection, quotaEditor} from './teamadmin.js';

const auditLimit = 100;

function limit(n) {
  return Number(n || 0) === 0 ? 'unlimited' : String(n);
}

function usage(n) {
  return Number(n) < 0 ? '–' : String(n);
}

// mayManageTokens mirrors the server's rule: the cluster admin manages any
// team's tokens, a team's admin its own team's.
export function mayManageTokens(s, team) {
  return s.clusterAdmin || (s.role === 'admin' && team !== '' && team === s.team);
}

// revokePhrase is what the user types to revoke a token.
export function revokePhrase(id) {
  return `revoke ${id}`;
}

function tokenState(t) {
  if (t.revokedAt) return 'revoked';
  return t.live ? 'live' : 'expired';
}

// lifetimes are the lifetimes a new token may be given.
const lifetimes = [['', 'never expires'], ['86400s', '1 day'], ['2592000s', '30 days'], ['7776000s', '90 days'], ['31536000s', '1 year']];

// tokensSection builds the token list, its revoke confirmation and, for a
// caller who may, the form that creates one. It returns the nodes and the
// list's refresh.
function tokensSection(s, team) {
  const listEl = h('div', {id: 'token-list', 'aria-live': 'polite'});
  if (!mayManageTokens(s, s.clusterAdmin ? team : s.team)) {
    return {nodes: [h('p', {class: 'muted', id: 'tokens'}, `Your role (${s.role}) may not manage tokens: your team's admin lists, makes and revokes them here, the cluster admin any team's.`)], refresh: async () => {}};
  }
  const status = h('div', {id: 'token-status', 'aria-live': 'polite'});
  const secretEl = h('div', {id: 'token-secret-box'});
  // One confirmation for every row: the row's Revoke fills it in.
  const confirmInput = h('input', {type: 'text', id: 'token-revoke-text', autocomplete: 'off', spellcheck: 'false'});
  const confirmLabel = h('label', {for: 'token-revoke-text', class: 'field'}, 'Type "revoke" and the token\'s id to confirm');
  const confirmGo = h('button', {type: 'button', class: 'danger', id: 'token-revoke-confirm', 'data-write': 'true'}, 'Revoke');
  const confirmCancel = h('button', {type: 'button', id: 'token-revoke-cancel'}, 'Cancel');
  const confirmBox = h('div', {class: 'confirm', id: 'token-revoke', hidden: true}, confirmLabel, confirmInput, confirmGo, confirmCancel);
  let revoking = '';
  let opener = null;
  confirmCancel.addEventListener('click', () => {
    confirmBox.hidden = true;
    if (opener) opener.focus();
  });
  const refresh = () => loadInto(listEl, async () => {
    const resp = await s.call('TeamService', 'ListTokens', team ? {team} : {});
    const rows = (resp.tokens || []).map((t) => {
      const revoke = t.live ? h('button', {type: 'button', class: 'danger', 'data-write': 'true', 'data-token': t.id,
        'aria-label': `Revoke token ${t.id}`, onclick: (ev) => {
          revoking = t.id;
          opener = ev.currentTarget;
          replace(confirmLabel, `Type "${revokePhrase(t.id)}" to confirm`);
          confirmGo.textContent = `Revoke ${t.id}`;
          confirmInput.value = '';
          confirmBox.hidden = false;
          confirmInput.focus();
        }}, 'Revoke…') : '';
      return [h('code', {}, t.id), t.clusterAdmin ? 'every team (cluster admin)' : t.team, t.role, stateTag(tokenState(t)),
        fmt.time(t.createdAt), t.createdBy || '–', t.expiresAt ? fmt.time(t.expiresAt) : 'never', t.description || '–', revoke];
    });
    if (!rows.length) return h('p', {}, 'No token.');
    return table('Tokens', ['Id', 'Team', 'Role', 'State', `Created (${fmt.viewerZone})`, 'Created by', 'Expires', 'Description', ''], rows);
  });
  confirmGo.addEventListener('click', async () => {
    const expect = revokePhrase(revoking);
    if (confirmInput.value.trim() !== expect) {
      replace(status, errorBox(new Error(`type "${expect}" to confirm`)));
      confirmInput.focus();
      return;
    }
    confirmGo.disabled = true;
    try {
      await s.call('TeamService', 'RevokeToken', {id: revoking});
      confirmBox.hidden = true;
      replace(status, h('p', {role: 'status', id: 'token-revoked'}, `Revoked token ${revoking}. A server that cached it refuses it within its token cache's lifetime.`));
      await refresh();
    } catch (e) {
      replace(status, errorBox(e));
    } finally {
      confirmGo.disabled = false;
    }
  });

  const roleSel = select('role', 'viewer', [['viewer', 'viewer'], ['operator', 'operator'], ['admin', 'admin']]);
  const lifeSel = select('expires', '', lifetimes);
  const descIn = textInput('description', '', {maxlength: '1024'});
  const teamIn = s.clusterAdmin ? textInput('team', team, {required: true}) : null;
  const form = h('form', {class: 'filters', id: 'token-create-form'},
    teamIn ? field('Team', 't-team', teamIn) : null,
    field('Role', 't-role', roleSel),
    field('Lifetime', 't-expires', lifeSel),
    field('Description', 't-description', descIn),
    h('button', {type: 'submit', class: 'primary', id: 'token-create', 'data-write': 'true'}, 'Create token'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const body = {role: roleSel.value, description: descIn.value.trim()};
    if (teamIn) body.team = teamIn.value.trim();
    if (lifeSel.value) body.expiresIn = lifeSel.value;
    replace(status, 'Creating the token…');
    try {
      const resp = await s.call('TeamService', 'CreateToken', body);
      replace(status);
      showSecret(secretEl, resp);
      await refresh();
    } catch (e) {
      replace(status, errorBox(e));
    }
  });
  return {nodes: [form, status, secretEl, confirmBox, listEl], refresh};
}

// showSecret shows a new token's bearer once, with a copy button and a
// warning; it is gone when the user dismisses it or leaves the page.
function showSecret(el, resp) {
  const bearer = resp.bearer || '';
  const code = h('code', {id: 'token-bearer'}, bearer);
  const copied = h('span', {id: 'token-copied', 'aria-live': 'polite'});
  const copy = h('button', {type: 'button', id: 'token-copy'}, 'Copy');
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(bearer);
      copied.textContent = 'Copied.';
    } catch {
      // Without clipboard access, select it for the user to copy.
      const range = document.createRange();
      range.selectNodeContents(code);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      copied.textContent = 'Selected: copy it with your keyboard.';
    }
  });
  const done = h('button', {type: 'button', id: 'token-secret-done', onclick: () => replace(el)}, 'I have stored it');
  replace(el, h('div', {class: 'notice', id: 'token-secret', role: 'alert'},
    h('p', {}, h('strong', {}, `Token ${resp.token ? resp.token.id : ''} created. `),
      'This is the only time its secret is shown: store it now. It cannot be read back; if it is lost, revoke the token and make another.'),
    h('p', {}, code), h('p', {}, copy, ' ', copied, ' ', done)));
  copy.focus();
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
    const teamsEl = h('div', {id: 'team-list', 'aria-live': 'polite'});
    const tokens = tokensSection(s, team);
    const admin = mayManageTeams(s);
    const loadTeams = () => loadInto(teamsEl, async () => {
      const resp = await s.call('TeamService', 'ListTeams', {});
      const rows = (resp.teams || []).map((t) => [
        h('a', {href: `#/teams?team=${encodeURIComponent(t.name)}`}, t.name), t.description || '–', fmt.time(t.createdAt), t.createdBy || '–']);
      if (!rows.length) return h('p', {}, 'No team.');
      return table('Teams', ['Team', 'Description', `Created (${fmt.viewerZone})`, 'Created by'], rows);
    });
    const quotaEdit = admin ? quotaEditor(s, team, () => loadQuotas()) : null;
    const loadQuotas = () => loadInto(quotaEl, async () => {
      const resp = await s.call('QuotaService', 'GetQuotas', team ? {teams: [team]} : {});
      const rows = (resp.quotas || []).map((u) => [
        u.team === '*' ? 'default (every team without its own)' : u.team,
        num(limit(u.maxJobs)), num(usage(u.jobs ?? 0)),
        num(limit(u.maxConcurrentRuns)), num(usage(u.concurrentRuns ?? -1)),
        num(limit(u.maxRunsPerMinute)),
        ...(quotaEdit ? [h('button', {type: 'button', 'data-write': 'true', 'data-quota-team': u.team,
          'aria-label': `Edit the quotas of ${u.team === '*' ? 'the default' : `team ${u.team}`}`, onclick: () => quotaEdit.edit(u)}, 'Edit…')] : []),
      ]);
      if (!rows.length) return h('p', {}, 'No team has a quota of its own, and there is no default: every team is unlimited.');
      return table('Quotas', ['Team', ['Max jobs', 'num'], ['Jobs', 'num'], ['Max concurrent runs', 'num'], ['Running now', 'num'], ['Max runs a minute', 'num'],
        ...(quotaEdit ? [''] : [])], rows);
    });
    root.append(
      h('h1', {}, s.clusterAdmin ? 'Teams' : `Team ${s.team}`),
      h('h2', {}, 'You'), whoEl,
      filterForm(ctx, ['teams'], [
        s.clusterAdmin ? field('Team', 'f-team', textInput('team', team, {placeholder: 'every team with a quota'})) : null,
        field('Job (its audit trail)', 'f-job', textInput('job', job)),
      ]),
      h('h2', {}, 'Quotas'), quotaEl,
      ...(quotaEdit ? quotaEdit.nodes : []),
      ...(s.clusterAdmin ? [h('h2', {}, 'Teams'), ...(admin ? createTeamSection(s, () => loadTeams()) : []), teamsEl] : []),
      ...(admin && team ? [h('h2', {}, `Delete team ${team}`), ...deleteTeamSection(s, team, () => loadTeams())] : []),
      h('h2', {}, team || !s.clusterAdmin ? `Tokens of team ${team || s.team}` : 'Tokens'), ...tokens.nodes,
      h('h2', {}, job ? `Audit trail of job ${job}` : `Audit trail${team ? ` of team ${team}` : ''}`), auditEl);
    whoEl.append(h('dl', {class: 'props'},
      h('dt', {}, 'Subject'), h('dd', {id: 'who-subject'}, s.subject || '–'),
      h('dt', {}, 'Team'), h('dd', {}, s.clusterAdmin ? 'every team (cluster admin)' : s.team),
      h('dt', {}, 'Role'), h('dd', {id: 'who-role'}, s.role),
      h('dt', {}, 'May'), h('dd', {id: 'who-may'}, [...s.permissions].join(', ') || 'nothing')));
    return () => Promise.all([
      s.clusterAdmin ? loadTeams() : null,
      tokens.refresh(),
      loadQuotas(),
      loadInto(auditEl, async () => {
        if (!job && !team) return h('p', {class: 'notice'}, 'Name a team or a job to read its audit trail.');
        const resp = await s.call('AuditService', 'ListAudit', job ? {jobId: job, limit: auditLimit} : {team, limit: auditLimit});
        const rows = (resp.records || []).map((r) => [
          fmt.time(r.at),
          r.actor,
          h('span', {class: 'audit-action'}, r.action),
          // A job's record links to the job; a team's, a token's or a
          // quota's subject is no job.
          String(r.action).startsWith('job.') ? h('a', {href: `#/jobs/${encodeURIComponent(r.subject)}`}, r.subject) : r.subject,
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
