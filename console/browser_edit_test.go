package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/auth/oidc"
	"github.com/sundialhq/sundial/auth/oidc/oidctest"
	"github.com/sundialhq/sundial/embedded"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// devAdminToken is the admin of team dev: the role that applies and
// deletes its definitions.
const devAdminToken = "console-test-dev-admin"

// editEnv is the console of `sundial dev` behind a proxy's sub-path, with
// a browser, for the tests of the editor, the heat-map and the team pages.
type editEnv struct {
	b *browser
	p *embedded.Pipeline
}

// as is the options of an API client holding token.
func as(token string) []connect.ClientOption {
	return []connect.ClientOption{connect.WithInterceptors(apiserver.BearerToken(token))}
}

// newEditEnv starts the embedded pipeline with its samples, a proxy that
// mounts the API under /sundial/, and Chromium.
func newEditEnv(t *testing.T) *editEnv {
	t.Helper()
	exe := chromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	t.Cleanup(cancel)
	p, err := embedded.New(embedded.Config{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler),
		Handlers: embedded.SampleHandlers(), APIAddr: "127.0.0.1:0",
		APITokens: []string{"*:admin:" + adminToken, "dev:admin:" + devAdminToken, "dev:operator:" + operatorToken, "dev:viewer:" + viewerToken}})
	require.NoError(t, err)
	require.NoError(t, p.Start(ctx))
	t.Cleanup(p.Stop)
	_, err = p.LoadSamples(ctx)
	require.NoError(t, err)

	upstream, err := url.Parse(p.APIURL())
	require.NoError(t, err)
	proxy := httptest.NewServer(http.StripPrefix("/sundial", httputil.NewSingleHostReverseProxy(upstream)))
	t.Cleanup(proxy.Close)

	return &editEnv{b: newBrowser(t, ctx, exe, proxy.URL+"/sundial/console/"), p: p}
}

// newBrowser starts Chromium for the console at base.
func newBrowser(t *testing.T, ctx context.Context, exe, base string) *browser {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true))...)
	t.Cleanup(cancelAlloc)
	root, cancelRoot := chromedp.NewContext(alloc)
	t.Cleanup(cancelRoot)
	require.NoError(t, chromedp.Do(root), "start Chromium at %s", exe)
	return &browser{t: t, ctx: root, base: base}
}

// TestConsoleLogsInWithAnOIDCToken: a JWT of the API's OpenID provider is
// a bearer token like Sundial's own, so the console's login takes it, and
// WhoAmI names the team and role its claims give.
func TestConsoleLogsInWithAnOIDCToken(t *testing.T) {
	exe := chromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	idp := oidctest.New(t)
	verifier, err := oidc.New(ctx, oidc.Config{Issuer: idp.URL(), Audience: "sundial-console", HTTPClient: idp.Client(), Now: time.Now})
	require.NoError(t, err)
	srv, err := apiserver.New(apiserver.Config{Addr: "127.0.0.1:0", Authenticator: verifier,
		Services: []apiserver.Service{apiserver.IdentityService{}.Service()}, Public: assemble.APIPublic()})
	require.NoError(t, err)
	web := httptest.NewServer(srv)
	defer web.Close()
	b := newBrowser(t, ctx, exe, web.URL+"/console/")

	now := time.Now()
	jwt := idp.Sign(t, map[string]any{"iss": idp.URL(), "sub": "alice", "aud": "sundial-console",
		"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix(),
		oidc.DefaultTeamClaim: "blue", oidc.DefaultRoleClaim: "operator"})
	tab := b.tab(t, jwt)
	who, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("whoami")))
	require.NoError(t, err)
	assert.Equal(t, "operator of team blue", who)
	b.open(t, tab, "#/teams", "teams")
	subject := eval[string](t, tab, `document.getElementById('who-subject').textContent`)
	assert.Contains(t, subject, "oidc:")
	assert.Contains(t, subject, "alice")
	assert.Equal(t, "read, operate", eval[string](t, tab, `document.getElementById('who-may').textContent`))
}

// texts is the text of every element matching css that is not hidden.
func texts(t *testing.T, ctx context.Context, css string) []string {
	t.Helper()
	return eval[[]string](t, ctx, `[...document.querySelectorAll(`+"`"+css+"`"+`)].filter((e) => !e.closest('[hidden]')).map((e) => e.textContent.trim())`)
}

// TestConsoleEditsInABrowser drives the console's role-aware pages, the
// job editor, the heat-map and the team pages in a real headless Chromium
// against the embedded pipeline of `sundial dev`.
func TestConsoleEditsInABrowser(t *testing.T) {
	env := newEditEnv(t)
	b := env.b

	t.Run("each role sees the buttons its role may use, as WhoAmI says", func(t *testing.T) {
		cases := []struct {
			token, who string
			buttons    []string
		}{
			{viewerToken, "viewer of team dev", nil},
			{operatorToken, "operator of team dev", []string{"Trigger now", "Pause"}},
			{devAdminToken, "admin of team dev", []string{"Trigger now", "Pause", "Edit", "Delete…"}},
			{adminToken, "cluster admin", []string{"Trigger now", "Pause", "Edit", "Delete…"}},
		}
		for _, c := range cases {
			tab := b.tab(t, c.token)
			who, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("whoami")))
			require.NoError(t, err)
			assert.Equal(t, c.who, who)
			b.open(t, tab, "#/jobs/dev.hello-cron", "job")
			got := texts(t, tab, `#actions [data-write]`)
			assert.ElementsMatch(t, c.buttons, got, "write buttons of %s", c.who)
		}
		// A viewer's editor is read only: it offers neither Plan nor Apply.
		tab := b.tab(t, viewerToken)
		b.open(t, tab, "#/edit/dev.hello-cron", "editor")
		assert.Zero(t, eval[int](t, tab, `document.querySelectorAll('[data-write]').length`), "write buttons in a viewer's editor")
		assert.Contains(t, eval[string](t, tab, `document.getElementById('results').textContent`), "Read only")
	})

	jobs := apiv1connect.NewJobServiceClient(http.DefaultClient, env.p.APIURL(), as(devAdminToken)...)
	const created = "dev.console-made"

	t.Run("create, see the diff, fire times and load, then apply", func(t *testing.T) {
		tab := b.tab(t, devAdminToken)
		b.open(t, tab, "#/jobs", "jobs")
		click(t, tab, "new-job")
		waitFor(t, tab, `#main[data-page="editor"][data-loaded] #e-id`)
		setValue(t, tab, "e-id", created)
		setValue(t, tab, "e-description", "made in the console")
		setValue(t, tab, "e-cron", "0 */2 * * * *")
		setValue(t, tab, "e-zone", "America/New_York")
		setValue(t, tab, "e-target", "handler")
		setValue(t, tab, "e-handler", "dev.hello")
		setValue(t, tab, "e-max-attempts", "3")
		setValue(t, tab, "e-timeout", "30s")
		setValue(t, tab, "e-overlap", "OVERLAP_POLICY_FORBID")
		setValue(t, tab, "e-concurrency", "1")
		// The JSON follows the form.
		spec := eval[map[string]any](t, tab, `JSON.parse(document.getElementById('e-json').value)`)
		assert.Equal(t, created, spec["id"])
		assert.Equal(t, map[string]any{"cron": map[string]any{"expression": "0 */2 * * * *"}, "timeZone": "America/New_York"}, spec["schedule"])
		assert.True(t, eval[bool](t, tab, `document.getElementById('apply').disabled`), "Apply before a plan")

		click(t, tab, "plan-button")
		waitFor(t, tab, "#plan-summary")
		summary, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("plan-summary")))
		require.NoError(t, err)
		assert.Contains(t, summary, "Creates the job")
		assert.Contains(t, summary, "adds 30 runs", "every two minutes over the next hour")
		diff := texts(t, tab, `#plan-diff tbody tr td:first-child`)
		assert.Subset(t, diff, []string{"id", "owner_team", "schedule", "target", "retry", "timeout", "concurrency_limit", "overlap_policy"},
			"a create lists every field it sets")
		fires := texts(t, tab, `#plan-fires tbody tr td:nth-child(3)`)
		require.Len(t, fires, 10, "ten fire times after")
		assert.Contains(t, fires[0], "E", "in the job's zone (EST or EDT)")
		assert.Equal(t, 30, eval[int](t, tab, `document.querySelectorAll('#plan-load .bar').length`), "a bar per minute with a run")
		assert.Positive(t, eval[int](t, tab, `document.querySelectorAll('#heatmap td.heat-draft').length`), "the draft on the heat-map")
		assert.False(t, eval[bool](t, tab, `document.getElementById('apply').disabled`), "Apply after a clean plan")
		screenshot(t, tab, "editor")

		click(t, tab, "apply")
		waitFor(t, tab, "#apply-result")
		result, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("apply-result")))
		require.NoError(t, err)
		assert.Contains(t, result, "Applied: created")
		got, err := jobs.GetJob(tab, connect.NewRequest(&apiv1.GetJobRequest{Id: created}))
		require.NoError(t, err)
		assert.Equal(t, "made in the console", got.Msg.GetJob().GetSpec().GetDescription())
		assert.Equal(t, sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID, got.Msg.GetJob().GetSpec().GetOverlapPolicy())
		assert.Equal(t, uint32(3), got.Msg.GetJob().GetSpec().GetRetry().GetMaxAttempts())
	})

	t.Run("an edit of a definition that changed meanwhile is refused", func(t *testing.T) {
		tab := b.tab(t, devAdminToken)
		b.open(t, tab, "#/jobs/"+created, "job")
		click(t, tab, "edit")
		waitFor(t, tab, `#main[data-page="editor"][data-loaded] #e-id`)
		assert.Equal(t, created, eval[string](t, tab, `document.getElementById('e-id').value`))
		setValue(t, tab, "e-description", "the console's edit")

		// Someone else changes the job after the editor read it.
		got, err := jobs.GetJob(tab, connect.NewRequest(&apiv1.GetJobRequest{Id: created}))
		require.NoError(t, err)
		behind := got.Msg.GetJob().GetSpec()
		behind.Description = "changed behind the editor's back"
		resp, err := jobs.ApplyJob(tab, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: behind}))
		require.NoError(t, err)
		require.True(t, resp.Msg.GetAccepted())

		click(t, tab, "plan-button")
		waitFor(t, tab, "#plan-summary")
		diff := texts(t, tab, `#plan-diff tbody tr td:first-child`)
		assert.Equal(t, []string{"description"}, diff, "the diff against the definition in force")
		assert.True(t, eval[bool](t, tab, `document.getElementById('plan-stale') !== null`), "the plan says the definition changed")
		click(t, tab, "apply")
		waitFor(t, tab, "#apply-result")
		result, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("apply-result")))
		require.NoError(t, err)
		assert.Contains(t, result, "failed_precondition")
		got, err = jobs.GetJob(tab, connect.NewRequest(&apiv1.GetJobRequest{Id: created}))
		require.NoError(t, err)
		assert.Equal(t, "changed behind the editor's back", got.Msg.GetJob().GetSpec().GetDescription(), "the refused edit changed nothing")
	})

	t.Run("the heat-map counts the next hour, and overlays a draft", func(t *testing.T) {
		tab := b.tab(t, adminToken)
		b.open(t, tab, "#/heatmap", "heatmap")
		// dev.hello-cron fires every five seconds: twelve runs a minute.
		eventually(t, tab, `[...document.querySelectorAll('#heatmap td.heat')].some((td) => Number(td.dataset.count) >= 12)`,
			"no minute with dev.hello-cron's twelve runs")
		setValue(t, tab, "draft", `{"id": "dev.what-if", "ownerTeam": "dev", "schedule": {"cron": {"expression": "0 * * * * *"}},
			"target": {"handler": {"name": "dev.hello"}}, "routing": {"strategy": "ROUTING_STRATEGY_SHARDED", "shards": 4}}`)
		click(t, tab, "overlay")
		waitFor(t, tab, "#draft-summary")
		summary := eval[string](t, tab, `document.getElementById('draft-summary').textContent`)
		assert.Contains(t, summary, "+240 runs", "four shards every minute for an hour")
		eventually(t, tab, `document.querySelectorAll('#heatmap td.heat-draft').length >= 59`, "the draft's minutes are not outlined")
		screenshot(t, tab, "heatmap")
		// The rows come with the forecast, after the page is open: wait
		// for them before reading them.
		rows := `document.querySelectorAll('#heatmap tbody th').length > 0`
		b.open(t, tab, "#/heatmap?group=team", "heatmap")
		eventually(t, tab, rows, "the heat-map by team shows no row")
		assert.Contains(t, texts(t, tab, `#heatmap tbody th`), "dev")
		// A team sees its own team's runs only.
		viewer := b.tab(t, viewerToken)
		b.open(t, viewer, "#/heatmap?group=team", "heatmap")
		eventually(t, viewer, rows, "the viewer's heat-map shows no row")
		assert.Equal(t, []string{"dev"}, texts(t, viewer, `#heatmap tbody th`))
		assert.Zero(t, eval[int](t, viewer, `document.querySelectorAll('#overlay').length`), "a viewer cannot plan a draft")
	})

	t.Run("the team page shows the caller, the quotas and the audit trail its role may read", func(t *testing.T) {
		testTeamsPage(t, b, created)
	})
}

// testTeamsPage checks that the team page shows each role what it may
// read: a viewer their own team, the cluster admin the team or job named.
func testTeamsPage(t *testing.T, b *browser, created string) {
	// A viewer reads their own team: who they are, its quota, its trail.
	tab := b.tab(t, viewerToken)
	b.open(t, tab, "#/teams", "teams")
	assert.Equal(t, "viewer", eval[string](t, tab, `document.getElementById('who-role').textContent`))
	assert.Equal(t, "read", eval[string](t, tab, `document.getElementById('who-may').textContent`))
	assert.Equal(t, []string{"dev"}, texts(t, tab, `#quotas tbody tr td:first-child`))
	assert.Positive(t, eval[int](t, tab, `Number(document.querySelector('#quotas tbody tr td:nth-child(3)').textContent)`), "dev's jobs counted")
	eventually(t, tab, fmt.Sprintf(`(async () => { location.hash = '#/teams?x=' + Date.now(); await new Promise((r) => setTimeout(r, 500));
		return [...document.querySelectorAll('#audit tbody tr')].some((tr) => tr.textContent.includes('job.created') && tr.textContent.includes(%q)); })()`, created),
		"the audit trail has no record of the job the editor created")
	assert.Zero(t, eval[int](t, tab, `document.querySelectorAll('[data-write]').length`), "write buttons on a viewer's team page")
	screenshot(t, tab, "teams")

	// The cluster admin names a team, or a job.
	admin := b.tab(t, adminToken)
	b.open(t, admin, "#/teams?team=dev", "teams")
	assert.Equal(t, []string{"dev"}, texts(t, admin, `#quotas tbody tr td:first-child`))
	assert.Contains(t, texts(t, admin, `#audit .audit-action`), "job.created")
	b.open(t, admin, "#/teams?job="+created, "teams")
	actions := texts(t, admin, `#audit .audit-action`)
	assert.Equal(t, []string{"job.updated", "job.created"}, actions, "the job's trail, newest first")
}

// click clicks the element with id.
func click(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	require.True(t, eval[bool](t, ctx, fmt.Sprintf(`(() => { const el = document.getElementById(%q); if (!el) return false; el.click(); return true; })()`, id)),
		"no element #%s to click; the page says: %s", id, eval[string](t, ctx, `document.getElementById('main').textContent`))
}

// waitFor waits until an element matches css, and fails with what the
// page says when none does.
func waitFor(t *testing.T, ctx context.Context, css string) {
	t.Helper()
	js := fmt.Sprintf(`document.querySelector(%q) !== null`, css)
	ok := assert.Eventually(t, func() bool {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		return err == nil && v
	}, 3*time.Minute, 100*time.Millisecond)
	if !ok {
		t.Fatalf("nothing matches %s; the page says: %s", css, eval[string](t, ctx, `document.getElementById('main').textContent`))
	}
}

// setValue sets a form control's value and tells the page, as typing or
// choosing would.
func setValue(t *testing.T, ctx context.Context, id, value string) {
	t.Helper()
	ok := eval[bool](t, ctx, fmt.Sprintf(`(() => { const el = document.getElementById(%q); if (!el) return false;
		el.value = %q; el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`, id, value))
	require.True(t, ok, "no control #%s", id)
}
