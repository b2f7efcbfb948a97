package console_test

import (
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
