// The cluster admin's part of the team page: create a team
// (TeamService.CreateTeam), delete one with a typed confirmation
// (DeleteTeam), and set a team's quotas or the default's
// (QuotaService.SetQuotas). The page offers them to the cluster admin
// alone, as the server allows them; the server still decides every call
// and names the field of a bad value, which is shown as it says it.

import {h, replace, errorBox} from '../dom.js';
import {field, textInput, confirmTyped} from './common.js';

// mayManageTeams mirrors the server's rule: teams and quotas are the
// cluster admin's.
export function mayManageTeams(s) {
  return s.clusterAdmin && s.permissions.has('cluster');
}

// deletePhrase is what the user types to delete a team.
export function deletePhrase(team) {
  return `delete team ${team}`;
}

// createTeamSection is the form that creates a team; onCreated(name) runs
// after the server made it.
export function createTeamSection(s, onCreated) {
  const status = h('div', {id: 'team-create-status', 'aria-live': 'polite'});
  const name = textInput('name', '', {required: true, autocomplete: 'off', spellcheck: 'false', maxlength: '249'});
  const desc = textInput('description', '', {maxlength: '1024'});
  const form = h('form', {class: 'filters', id: 'team-create-form'},
    field('New team', 'tc-name', name),
    field('Description', 'tc-description', desc),
    h('button', {type: 'submit', class: 'primary', id: 'team-create', 'data-write': 'true'}, 'Create team'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const team = name.value.trim();
    replace(status, `Creating team ${team}…`);
    try {
      const resp = await s.call('TeamService', 'CreateTeam', {name: team, description: desc.value.trim()});
      const topic = resp.topic ? ` Its job topic ${resp.topic} was ${resp.topicCreated ? 'made' : 'found'}.` : '';
      replace(status, h('p', {role: 'status', id: 'team-created'}, `Created team ${team}.${topic} `,
        h('a', {href: `#/teams?team=${encodeURIComponent(team)}`}, `Open team ${team}`)));
      name.value = '';
      desc.value = '';
      await onCreated(team);
    } catch (e) {
      replace(status, errorBox(e));
      name.focus();
    }
  });
  return [form, status];
}

// deleteTeamSection says what deleting team removes and what it keeps,
// and asks for the typed phrase before DeleteTeam; onDeleted runs after.
export function deleteTeamSection(s, team, onDeleted) {
  const status = h('div', {id: 'team-delete-status', 'aria-live': 'polite'});
  const [open, box] = confirmTyped(`Delete team ${team}`, deletePhrase(team), status, async () => {
    await s.call('TeamService', 'DeleteTeam', {name: team});
    await onDeleted(team);
    return h('p', {role: 'status', id: 'team-deleted'}, `Deleted team ${team}.`);
  });
  open.id = 'team-delete';
  box.id = 'team-delete-confirm';
  return [
    h('p', {id: 'team-delete-what'},
      `Deleting team ${team} removes the team: its name and description, and with them the right of its tokens and `
      + 'OpenID users to act. The server refuses it while the team owns a job or has a live token: delete its jobs '
      + 'and revoke its tokens first. It keeps the team\'s job topic (a team created again with the name goes on '
      + 'with it), its quota row and its audit trail.'),
    open, box, status];
}

// quotaFields are the limits of a quota, as SetQuotas names them.
const quotaFields = [
  ['maxJobs', 'q-max-jobs', 'Max jobs'],
  ['maxConcurrentRuns', 'q-max-concurrent-runs', 'Max concurrent runs'],
  ['maxRunsPerMinute', 'q-max-runs-per-minute', 'Max runs a minute'],
];

// quotaRequest is the SetQuotas request of the form's values: an empty
// field keeps the team's current limit; what the server refuses, it names.
export function quotaRequest(team, values) {
  const req = {team: team.trim()};
  for (const [key] of quotaFields) {
    const v = String(values[key] ?? '').trim();
    if (v !== '') req[key] = Number(v);
  }
  return req;
}

// quotaEditor is the form that sets a team's quotas: edit(u) fills it with
// a row of GetQuotas (its limits and usage); onSaved(quota) runs after the
// server stored them.
export function quotaEditor(s, team, onSaved) {
  const status = h('div', {id: 'quota-status', 'aria-live': 'polite'});
  const usage = h('p', {class: 'muted', id: 'quota-usage'});
  const teamIn = textInput('team', team, {required: true, autocomplete: 'off', spellcheck: 'false'});
  const inputs = Object.fromEntries(quotaFields.map(([key]) => [key, h('input', {type: 'number', min: '0', step: '1', name: key})]));
  const form = h('form', {class: 'filters', id: 'quota-form'},
    field('Team (* for the default)', 'q-team', teamIn),
    quotaFields.map(([key, id, label]) => field(`${label} (0 unlimited)`, id, inputs[key])),
    h('button', {type: 'submit', class: 'primary', id: 'quota-set', 'data-write': 'true'}, 'Set quotas'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const values = Object.fromEntries(quotaFields.map(([key]) => [key, inputs[key].value]));
    const req = quotaRequest(teamIn.value, values);
    replace(status, `Setting the quotas of ${req.team}…`);
    try {
      const resp = await s.call('QuotaService', 'SetQuotas', req);
      replace(status, h('p', {role: 'status', id: 'quota-saved'},
        `Set the quotas of ${req.team === '*' ? 'the default' : `team ${req.team}`}. Registries and runners apply them within 10 s.`));
      await onSaved(resp.quota || {});
    } catch (e) {
      replace(status, errorBox(e));
    }
  });
  const edit = (u) => {
    teamIn.value = u.team;
    for (const [key] of quotaFields) inputs[key].value = String(Number(u[key] || 0));
    // The API's JSON leaves out a zero, so an absent count is 0.
    const jobs = Number(u.jobs ?? 0);
    const running = Number(u.concurrentRuns ?? 0);
    replace(usage, u.team === '*' ? 'The default applies to every team without a row of its own.'
      : `Team ${u.team} owns ${jobs} jobs; runs executing now: ${running < 0 ? 'not counted (no limit, or the API reaches no Redis)' : running}.`);
    replace(status);
    inputs.maxJobs.focus();
  };
  return {nodes: [h('h3', {}, 'Set quotas'), usage, form, status], edit};
}
