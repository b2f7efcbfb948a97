package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

// TestConsoleManagesTokensInABrowser drives the team page's tokens in a
// real headless Chromium against `sundial dev`: a team's admin creates a
// token, sees its secret once with a copy button, and revokes it with a
// typed confirmation; a viewer and an operator see no write button; the
// cluster admin sees the teams. The page passes the accessibility scan
// with the secret shown.
func TestConsoleManagesTokensInABrowser(t *testing.T) {
	env := newEditEnv(t)
	b := env.b
	ctx := t.Context()
	whoAmI := func(bearer string) (*apiv1.WhoAmIResponse, error) {
		resp, err := apiv1connect.NewIdentityServiceClient(http.DefaultClient, env.p.APIURL(), as(bearer)...).
			WhoAmI(ctx, connect.NewRequest(&apiv1.WhoAmIRequest{}))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}

	tab := b.tab(t, devAdminToken)
	b.open(t, tab, "#/teams", "teams")
	assert.Zero(t, eval[int](t, tab, `document.querySelectorAll('#team-list').length`), "a team's admin is shown the teams")
	waitFor(t, tab, `#token-list > *`)

	// Create: an operator token of team dev.
	eval[bool](t, tab, `(() => {
		document.getElementById('t-role').value = 'operator';
		document.getElementById('t-expires').value = '2592000s';
		document.getElementById('t-description').value = 'console test';
		document.getElementById('token-create').click();
		return true; })()`)
	waitFor(t, tab, `#token-bearer`)
	bearer := eval[string](t, tab, `document.getElementById('token-bearer').textContent`)
	require.True(t, strings.HasPrefix(bearer, "sdl_"), "the secret shown is a bearer: %q", bearer)
	assert.Contains(t, eval[string](t, tab, `document.getElementById('token-secret').textContent`), "only time")
	who, err := whoAmI(bearer)
	require.NoError(t, err, "the token the console made calls the API")
	assert.Equal(t, "dev", who.GetTeam())
	assert.Equal(t, "operator", who.GetRole())
	id := strings.TrimPrefix(who.GetSubject(), "token:")
	secret := bearer[strings.LastIndex(bearer, "_")+1:]
	eventually(t, tab, fmt.Sprintf(`[...document.querySelectorAll('#token-list tbody tr')].some((tr) => tr.textContent.includes(%q) && tr.textContent.includes('console test'))`, id),
		"the new token is not listed")
	assert.NotContains(t, eval[string](t, tab, `document.getElementById('token-list').textContent`), secret, "the list shows the secret")
	assert.NotContains(t, eval[string](t, tab, `location.href + JSON.stringify(sessionStorage) + JSON.stringify(localStorage)`), secret,
		"the secret is kept beyond the page")

	// Copy: to the clipboard, or selected when the browser gives none.
	click(t, tab, "token-copy")
	eventually(t, tab, `document.getElementById('token-copied').textContent !== ''`, "Copy said nothing")

	axe, err := os.ReadFile(filepath.Join("testdata", "axe.min.js"))
	require.NoError(t, err)
	for _, v := range scanAccessibility(t, tab, string(axe)) {
		for _, n := range v.Nodes {
			t.Errorf("#/teams: %s (%s, %s) at %v: %s", v.ID, v.Impact, v.Help, n.Target, n.HTML)
		}
	}
	screenshot(t, tab, "tokens")

	// Revoke: a wrong phrase does nothing, the typed one revokes.
	eval[bool](t, tab, fmt.Sprintf(`(() => { document.querySelector('button[data-token=%q]').click(); return true; })()`, id))
	require.NoError(t, chromedp.Do(tab, chromedp.WaitVisible(chromedp.ID("token-revoke-text"))))
	require.NoError(t, chromedp.Do(tab, chromedp.SendKeys(chromedp.ID("token-revoke-text"), "revoke"), chromedp.Click(chromedp.ID("token-revoke-confirm"))))
	waitFor(t, tab, `#token-status [role="alert"]`)
	_, err = whoAmI(bearer)
	require.NoError(t, err, "a wrong phrase revoked the token")
	require.NoError(t, chromedp.Do(tab, chromedp.SendKeys(chromedp.ID("token-revoke-text"), " "+id), chromedp.Click(chromedp.ID("token-revoke-confirm"))))
	waitFor(t, tab, `#token-revoked`)
	_, err = whoAmI(bearer)
	assert.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "the revoked token still calls the API: %v", err)
	eventually(t, tab, fmt.Sprintf(`[...document.querySelectorAll('#token-list tbody tr')].some((tr) => tr.textContent.includes(%q) && tr.textContent.includes('revoked'))`, id),
		"the revoked token is not shown revoked")
	assert.Zero(t, eval[int](t, tab, fmt.Sprintf(`document.querySelectorAll('button[data-token=%q]').length`, id)), "a revoked token has a Revoke button")

	// A viewer and an operator: no token list, no write button.
	for _, token := range []string{viewerToken, operatorToken} {
		other := b.tab(t, token)
		b.open(t, other, "#/teams", "teams")
		assert.Zero(t, eval[int](t, other, `document.querySelectorAll('[data-write], #token-list, #team-list').length`), "write buttons or tokens shown to a %s", token)
		assert.NotEmpty(t, eval[string](t, other, `document.getElementById('tokens').textContent`))
	}

	// The cluster admin: every team, and every token.
	admin := b.tab(t, adminToken)
	b.open(t, admin, "#/teams", "teams")
	waitFor(t, admin, `#team-list table`)
	assert.Subset(t, texts(t, admin, `#team-list tbody tr td:first-child`), []string{"dev", "examples"})
	waitFor(t, admin, `#token-list table`)
	assert.Contains(t, eval[string](t, admin, `document.getElementById('token-list').textContent`), id)
	screenshot(t, admin, "teams-admin")
}

// TestConsoleManagesTeamsAndQuotasInABrowser drives the cluster admin's
// team management in a real headless Chromium against `sundial dev`: a
// team name the server refuses is shown with the server's reason and
// creates nothing; a team is created, its quotas are set (a value the
// server refuses is shown naming its field, and stores nothing), and it
// is deleted with the typed phrase, a wrong one deleting nothing. A team's
// admin, an operator and a viewer are offered none of it.
func TestConsoleManagesTeamsAndQuotasInABrowser(t *testing.T) {
	env := newEditEnv(t)
	b := env.b
	ctx := t.Context()
	teamsAPI := apiv1connect.NewTeamServiceClient(http.DefaultClient, env.p.APIURL(), as(adminToken)...)
	quotasAPI := apiv1connect.NewQuotaServiceClient(http.DefaultClient, env.p.APIURL(), as(adminToken)...)
	teamNames := func() []string {
		resp, err := teamsAPI.ListTeams(ctx, connect.NewRequest(&apiv1.ListTeamsRequest{}))
		require.NoError(t, err)
		var names []string
		for _, tm := range resp.Msg.GetTeams() {
			names = append(names, tm.GetName())
		}
		return names
	}
	quotaOf := func(team string) *apiv1.TeamQuota {
		resp, err := quotasAPI.GetQuotas(ctx, connect.NewRequest(&apiv1.GetQuotasRequest{Teams: []string{team}}))
		require.NoError(t, err)
		require.Len(t, resp.Msg.GetQuotas(), 1)
		return resp.Msg.GetQuotas()[0]
	}
	textOf := func(tab context.Context, id string) string {
		return eval[string](t, tab, fmt.Sprintf(`document.getElementById(%q).textContent`, id))
	}

	admin := b.tab(t, adminToken)
	b.open(t, admin, "#/teams", "teams")
	waitFor(t, admin, `#team-list table`)

	// A name the server refuses: its reason, naming the field, is shown.
	setValue(t, admin, "tc-name", "no/slash")
	click(t, admin, "team-create")
	waitFor(t, admin, `#team-create-status [role="alert"]`)
	refusal := textOf(admin, "team-create-status")
	assert.Contains(t, refusal, "invalid_argument")
	assert.Contains(t, refusal, "name: ")
	assert.NotContains(t, teamNames(), "no/slash")

	setValue(t, admin, "tc-name", "qa")
	setValue(t, admin, "tc-description", "made by the console test")
	click(t, admin, "team-create")
	waitFor(t, admin, `#team-created`)
	assert.Contains(t, textOf(admin, "team-created"), "qa")
	assert.Contains(t, teamNames(), "qa", "the API does not list the team the console created")
	eventually(t, admin, `[...document.querySelectorAll('#team-list tbody tr td:first-child')].some((td) => td.textContent === 'qa')`,
		"the new team is not listed")

	// Its quotas: the row's Edit fills the form with the limits in force
	// and the usage.
	b.open(t, admin, "#/teams?team=qa", "teams")
	waitFor(t, admin, `#quotas button[data-quota-team="qa"]`)
	eval[bool](t, admin, `(() => { document.querySelector('#quotas button[data-quota-team="qa"]').click(); return true; })()`)
	assert.Equal(t, "qa", eval[string](t, admin, `document.getElementById('q-team').value`))
	assert.Contains(t, textOf(admin, "quota-usage"), "owns 0 jobs")
	before := quotaOf("qa")
	setValue(t, admin, "q-max-jobs", "3000000000")
	click(t, admin, "quota-set")
	waitFor(t, admin, `#quota-status [role="alert"]`)
	assert.Contains(t, textOf(admin, "quota-status"), "max_jobs 3000000000: at most 2147483647")
	assert.Equal(t, before.GetMaxJobs(), quotaOf("qa").GetMaxJobs(), "a refused value was stored")

	setValue(t, admin, "q-max-jobs", "7")
	setValue(t, admin, "q-max-runs-per-minute", "600")
	click(t, admin, "quota-set")
	waitFor(t, admin, `#quota-saved`)
	after := quotaOf("qa")
	assert.Equal(t, uint32(7), after.GetMaxJobs())
	assert.Equal(t, uint32(600), after.GetMaxRunsPerMinute())
	assert.Equal(t, before.GetMaxConcurrentRuns(), after.GetMaxConcurrentRuns(), "a limit not edited changed")
	eventually(t, admin, `(() => { const td = document.querySelector('#quotas tbody tr td:nth-child(2)'); return td !== null && td.textContent === '7'; })()`,
		"the quota table does not show the new limit")
	eventually(t, admin, `(async () => { location.hash = '#/teams?team=qa&x=' + Date.now(); await new Promise((r) => setTimeout(r, 500));
		return [...document.querySelectorAll('#audit .audit-action')].some((el) => el.textContent === 'quota.set'); })()`,
		"the team's audit trail has no record of the quota set")

	axe, err := os.ReadFile(filepath.Join("testdata", "axe.min.js"))
	require.NoError(t, err)
	for _, v := range scanAccessibility(t, admin, string(axe)) {
		for _, n := range v.Nodes {
			t.Errorf("#/teams?team=qa: %s (%s, %s) at %v: %s", v.ID, v.Impact, v.Help, n.Target, n.HTML)
		}
	}
	screenshot(t, admin, "teams-manage")

	// Delete: the page says what goes and what stays; a wrong phrase
	// deletes nothing, the typed one deletes the team.
	waitFor(t, admin, `#team-delete`)
	what := textOf(admin, "team-delete-what")
	assert.Contains(t, what, "removes the team")
	assert.Contains(t, what, "keeps the team's job topic")
	click(t, admin, "team-delete")
	require.NoError(t, chromedp.Do(admin, chromedp.WaitVisible(chromedp.ID("confirm-text"))))
	assert.Contains(t, eval[string](t, admin, `document.querySelector('#team-delete-confirm label').textContent`), "delete team qa")
	setValue(t, admin, "confirm-text", "delete team q")
	eval[bool](t, admin, `(() => { document.querySelector('#team-delete-confirm button.danger').click(); return true; })()`)
	waitFor(t, admin, `#team-delete-status [role="alert"]`)
	assert.Contains(t, teamNames(), "qa", "a wrong phrase deleted the team")
	setValue(t, admin, "confirm-text", "delete team qa")
	eval[bool](t, admin, `(() => { document.querySelector('#team-delete-confirm button.danger').click(); return true; })()`)
	waitFor(t, admin, `#team-deleted`)
	assert.NotContains(t, teamNames(), "qa", "the typed phrase did not delete the team")
	eventually(t, admin, `![...document.querySelectorAll('#team-list tbody tr td:first-child')].some((td) => td.textContent === 'qa')`,
		"the deleted team is still listed")

	// A team's admin, an operator and a viewer: none of it.
	for _, token := range []string{devAdminToken, operatorToken, viewerToken} {
		other := b.tab(t, token)
		b.open(t, other, "#/teams?team=dev", "teams")
		waitFor(t, other, `#quotas table`)
		assert.Zero(t, eval[int](t, other, `document.querySelectorAll('#team-create, #team-delete, #quota-form, [data-quota-team]').length`),
			"team or quota management shown to %s", token)
	}
}
