package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/embedded"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// gate is an in-process handler that holds its runs until the test opens
// it, so that a page can be shown while a DAG's nodes are still running.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

func (g *gate) handler() target.Handler {
	return target.HandlerFunc(func(ctx context.Context, _ *sundialv1.Run) error {
		select {
		case <-g.ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// opsConsole is `sundial dev`'s pipeline with the console behind a proxy
// that mounts it under /sundial/, and one Chromium, as in
// TestConsoleInABrowser.
type opsConsole struct {
	b    *browser
	p    *embedded.Pipeline
	gate *gate
	// chatty logs a line every tick until its own gate opens.
	chatty *chatty
}

const gatedDag = "dev.gated-dag"

func startOpsConsole(t *testing.T, ctx context.Context) *opsConsole {
	t.Helper()
	exe := chromium(t)
	g := &gate{ch: make(chan struct{})}
	handlers := embedded.SampleHandlers()
	handlers["test.gate"] = g.handler()
	talk := newChatty()
	handlers[chattyHandler] = talk
	handlers[failOnceHandler] = &failOnce{}
	p, err := embedded.New(embedded.Config{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler),
		Handlers: handlers, APIAddr: "127.0.0.1:0",
		APITokens: []string{"*:admin:" + adminToken, "dev:admin:" + devAdminToken, "dev:operator:" + operatorToken, "dev:viewer:" + viewerToken}})
	require.NoError(t, err)
	require.NoError(t, p.Start(ctx))
	t.Cleanup(p.Stop)
	t.Cleanup(g.open) // a held run must not hold the pipeline's stop
	t.Cleanup(talk.gate.open)
	_, err = p.LoadSamples(ctx)
	require.NoError(t, err)

	upstream, err := url.Parse(p.APIURL())
	require.NoError(t, err)
	proxy := httptest.NewServer(http.StripPrefix("/sundial", httputil.NewSingleHostReverseProxy(upstream)))
	t.Cleanup(proxy.Close)

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true))...)
	t.Cleanup(cancelAlloc)
	root, cancelRoot := chromedp.NewContext(alloc)
	t.Cleanup(cancelRoot)
	require.NoError(t, chromedp.Do(root), "start Chromium at %s", exe)
	return &opsConsole{b: &browser{t: t, ctx: root, base: proxy.URL + "/sundial/console/"}, p: p, gate: g, chatty: talk}
}

func (c *opsConsole) runs(token string) apiv1connect.RunServiceClient {
	return apiv1connect.NewRunServiceClient(http.DefaultClient, c.p.APIURL(), connect.WithInterceptors(apiserver.BearerToken(token)))
}

func (c *opsConsole) dags(token string) apiv1connect.DagServiceClient {
	return apiv1connect.NewDagServiceClient(http.DefaultClient, c.p.APIURL(), connect.WithInterceptors(apiserver.BearerToken(token)))
}

// TestConsoleOpsInABrowser drives the console's operations pages in a
// real headless Chromium against `sundial dev`'s pipeline: the runs
// explorer and its live stream, the DAG pages, bulk actions, and an
// accessibility scan of each main page.
func TestConsoleOpsInABrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	c := startOpsConsole(t, ctx)
	b := c.b

	t.Run("live runs arrive without a reload, and pause stops them", func(t *testing.T) {
		tab := b.tab(t, operatorToken)
		// The list is read once per view (auto-refresh is off): open it
		// again until the new pipeline has recorded runs.
		eventually(t, tab, `(async () => { location.hash = '#/runs?team=dev&x=' + Date.now();
			await new Promise((r) => setTimeout(r, 500));
			return document.querySelectorAll('#results [data-run-id]').length > 0; })()`, "the team's runs are not listed")
		eval[bool](t, tab, `window.sameDocument = true`)
		eventually(t, tab, `document.querySelector('section.live').dataset.live === 'on'`, "the live stream did not open")
		// The sample cron job runs every five seconds: its changes stream
		// in while the page stays as it is.
		eventually(t, tab, `window.sameDocument === true && document.querySelectorAll('#live tr[data-live-run^="dev.hello-cron@"]').length >= 2`,
			"no live run change arrived without a reload")
		screenshot(t, tab, "explorer")

		require.NoError(t, chromedp.Do(tab, chromedp.Click(chromedp.ID("live-toggle"))))
		eventually(t, tab, `document.querySelector('section.live').dataset.live === 'paused'`, "the stream did not pause")
		assert.Equal(t, "true", eval[string](t, tab, `document.getElementById('live-toggle').getAttribute('aria-pressed')`))
		shown := eval[int](t, tab, `document.querySelectorAll('#live tr').length`)
		paused := time.Now()
		// Wait, on the API, for two runs of the cron job that succeeded
		// after the pause: a live stream would have shown them.
		runs := c.runs(operatorToken)
		require.Eventually(t, func() bool {
			resp, err := runs.ListRuns(ctx, connect.NewRequest(&apiv1.ListRunsRequest{JobId: "dev.hello-cron",
				States: []apiv1.RunAttemptState{apiv1.RunAttemptState_RUN_ATTEMPT_STATE_SUCCEEDED}, PageSize: 10}))
			if err != nil {
				return false
			}
			n := 0
			for _, a := range resp.Msg.GetAttempts() {
				if a.GetStartTime().AsTime().After(paused.Add(time.Second)) {
					n++
				}
			}
			return n >= 2
		}, 3*time.Minute, 500*time.Millisecond, "the cron job ran no more after the pause")
		assert.Equal(t, shown, eval[int](t, tab, `document.querySelectorAll('#live tr').length`), "changes arrived while paused")
		assert.True(t, eval[bool](t, tab, `window.sameDocument === true`))

		// Resume: the stream opens again and the list is read again.
		require.NoError(t, chromedp.Do(tab, chromedp.Click(chromedp.ID("live-toggle"))))
		eventually(t, tab, fmt.Sprintf(`document.querySelectorAll('#live tr').length > %d`, shown), "no change after resuming")

		// The filters live in the URL and are answered by the server.
		eventuallyShowing(t, tab, `(async () => { location.hash = '#/runs?team=dev&error=on%20purpose&x=' + Date.now();
			await new Promise((r) => setTimeout(r, 500));
			return document.querySelectorAll('#results [data-run-id]').length > 0; })()`, `document.getElementById('results').textContent`,
			"no run failed with the flaky job's error")
		jobs := eval[[]string](t, tab, `[...document.querySelectorAll('#results tbody tr td:nth-child(2)')].map((td) => td.textContent)`)
		for _, j := range jobs {
			assert.Equal(t, "dev.flaky", j, "the error filter keeps only the flaky job's attempts")
		}
		assert.Equal(t, "on purpose", eval[string](t, tab, `document.getElementById('f-error').value`))
	})

	t.Run("DAG nodes turn green live", func(t *testing.T) {
		inline := func(handler string) *sundialv1.DagNode_Inline {
			return &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{Timeout: durationpb.New(10 * time.Minute),
				Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: handler}}}}}
		}
		require.NoError(t, c.p.ApplyDag(ctx, &sundialv1.DagSpec{Id: gatedDag, OwnerTeam: "dev", Description: "held by the test's gate",
			Schedule: &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: durationpb.New(15 * time.Second)}}},
			Nodes: []*sundialv1.DagNode{
				{Id: "wait", Job: inline("test.gate")},
				{Id: "after", Parents: []string{"wait"}, Job: inline(embedded.HandlerHello)},
				{Id: "last", Parents: []string{"after"}, Job: inline(embedded.HandlerHello)},
			}}))
		// A run of the DAG whose first node is held.
		dags := c.dags(viewerToken)
		var held string
		require.Eventually(t, func() bool {
			resp, err := dags.ListDagRuns(ctx, connect.NewRequest(&apiv1.ListDagRunsRequest{DagId: gatedDag, Limit: 5}))
			if err != nil || len(resp.Msg.GetDagRuns()) == 0 {
				return false
			}
			id := resp.Msg.GetDagRuns()[len(resp.Msg.GetDagRuns())-1].GetDagRunId()
			run, err := dags.GetDagRun(ctx, connect.NewRequest(&apiv1.GetDagRunRequest{DagRunId: id}))
			if err != nil || run.Msg.GetDagRun().GetNodes()[0].GetPhase() != "running" {
				return false
			}
			held = id
			return true
		}, 3*time.Minute, 250*time.Millisecond, "no run of %s started its first node", gatedDag)

		tab := b.tab(t, viewerToken)
		b.open(t, tab, "#/dagrun/"+url.PathEscape(held), "dagrun")
		eventually(t, tab, `document.querySelectorAll('#dag-graph g.node').length === 3`, "the DAG run's graph is not drawn")
		assert.Equal(t, "running", eval[string](t, tab, `document.querySelector('#dag-graph g[data-node="wait"]').dataset.phase`))
		assert.Equal(t, "waiting", eval[string](t, tab, `document.querySelector('#dag-graph g[data-node="last"]').dataset.phase`))
		eventually(t, tab, `document.getElementById('dag-live-status').textContent.startsWith('Live since')`, "the DAG run page is not live")
		eval[bool](t, tab, `window.sameDocument = true`)
		c.gate.open()
		eventually(t, tab, `window.sameDocument === true && [...document.querySelectorAll('#dag-graph g.node')].every((g) => g.dataset.phase === 'succeeded')`,
			"the DAG run's nodes did not all turn green without a reload")
		// Then the DAG engine's own state, read again without a reload.
		eventually(t, tab, `window.sameDocument === true && document.getElementById('dag-run-status').textContent === 'succeeded'`,
			"the DAG run did not end as succeeded on the page")
		screenshot(t, tab, "dag-run")

		b.open(t, tab, "#/dags", "dags")
		eventually(t, tab, fmt.Sprintf(`[...document.querySelectorAll('#results a')].some((a) => a.textContent === %q)`, gatedDag), "the DAG is not listed")
		b.open(t, tab, "#/dags/"+gatedDag, "dag")
		eventually(t, tab, `document.querySelectorAll('#dag-grid tbody tr').length > 0 && document.querySelectorAll('#dag-grid td.phase-succeeded').length > 0`,
			"the runs × nodes grid shows no succeeded node")
		assert.Equal(t, []string{"Due", "Status", "wait", "after", "last"}, eval[[]string](t, tab, `[...document.querySelectorAll('#dag-grid th')].map((th) => th.textContent)`))
		screenshot(t, tab, "dag")
	})

	t.Run("the DAG editor draws the graph as the definition is typed", func(t *testing.T) {
		tab := b.tab(t, adminToken)
		b.open(t, tab, "#/dagedit", "dagedit")
		eventually(t, tab, `document.querySelectorAll('#dag-graph g.node').length === 4`, "the example's graph is not drawn")
		// Typing a fifth node that follows "publish" draws it at once.
		eval[bool](t, tab, `(() => { const a = document.getElementById('dag-spec'); const s = JSON.parse(a.value);
			s.nodes.push({id: 'notify', jobId: 'team.notify', parents: ['publish']}); a.value = JSON.stringify(s, null, 2);
			return a.dispatchEvent(new Event('input')); })()`)
		assert.Equal(t, 5, eval[int](t, tab, `document.querySelectorAll('#dag-graph g.node').length`))
		screenshot(t, tab, "dag-editor")
		// A cycle is named before anything is sent.
		eval[bool](t, tab, `(() => { const a = document.getElementById('dag-spec'); const s = JSON.parse(a.value);
			s.nodes[0].parents = ['notify']; a.value = JSON.stringify(s); return a.dispatchEvent(new Event('input')); })()`)
		assert.Contains(t, eval[string](t, tab, `document.getElementById('dag-problems').textContent`), "a cycle runs through")
		// Text that is not JSON yet keeps the last graph and says so.
		eval[bool](t, tab, `(() => { const a = document.getElementById('dag-spec'); a.value = '{"nodes": [';
			return a.dispatchEvent(new Event('input')); })()`)
		assert.Contains(t, eval[string](t, tab, `document.getElementById('dag-problems').textContent`), "Not JSON yet")
	})

	t.Run("a bulk pause previews its count, and pauses exactly those jobs", func(t *testing.T) {
		jobs := apiv1connect.NewJobServiceClient(http.DefaultClient, c.p.APIURL(), connect.WithInterceptors(apiserver.BearerToken(operatorToken)))
		found, err := jobs.SearchJobs(ctx, connect.NewRequest(&apiv1.SearchJobsRequest{Text: "dev.", Page: &apiv1.PageRequest{Size: 100}}))
		require.NoError(t, err)
		var want []string
		for _, j := range found.Msg.GetJobs() {
			want = append(want, j.GetSpec().GetId())
		}
		require.NotEmpty(t, want)
		tab := b.tab(t, operatorToken)
		b.open(t, tab, "#/jobs?text=dev.", "jobs")
		require.NoError(t, chromedp.Do(tab, chromedp.Click(chromedp.ID("bulk-link"))))
		eventually(t, tab, `document.getElementById('bulk-count') !== null`, "the bulk page shows no preview")
		assert.Equal(t, fmt.Sprint(len(want)), eval[string](t, tab, `document.getElementById('bulk-count').dataset.count`), "the preview's count")
		assert.ElementsMatch(t, want, eval[[]string](t, tab, `[...document.querySelectorAll('#bulk-preview tbody tr td:first-child')].map((td) => td.textContent)`))
		screenshot(t, tab, "bulk")
		phrase := fmt.Sprintf("pause %d jobs", len(want))
		// A wrong phrase does nothing.
		require.NoError(t, chromedp.Do(tab,
			chromedp.SendKeys(chromedp.ID("bulk-confirm-text"), "pause them all"),
			chromedp.Click(chromedp.ID("bulk-confirm")),
			chromedp.WaitVisible(chromedp.CSS(`#action-status [role="alert"]`))))
		paused := func() int {
			n := 0
			for _, id := range want {
				resp, err := jobs.GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: id}))
				require.NoError(t, err)
				if resp.Msg.GetJob().GetState() == apiv1.DefinitionState_DEFINITION_STATE_PAUSED {
					n++
				}
			}
			return n
		}
		assert.Zero(t, paused(), "a wrong phrase paused jobs")
		eval[string](t, tab, `document.getElementById('bulk-confirm-text').value = ''`)
		require.NoError(t, chromedp.Do(tab,
			chromedp.SendKeys(chromedp.ID("bulk-confirm-text"), phrase),
			chromedp.Click(chromedp.ID("bulk-confirm")),
			chromedp.WaitVisible(chromedp.ID("bulk-done"))))
		assert.Equal(t, len(want), paused())
		// One call on the server (the dry run, then the action), not one per job.
		calls := eval[[]string](t, tab, `performance.getEntriesByType('resource').map((e) => e.name.split('/').pop())
			.filter((n) => ['BulkJobs', 'PauseJob'].includes(n))`)
		assert.Equal(t, []string{"BulkJobs", "BulkJobs"}, calls, "the bulk pause's calls")
		// And back: a bulk resume of the same search.
		b.open(t, tab, "#/bulk?action=resume&text=dev.", "bulk")
		eventually(t, tab, fmt.Sprintf(`document.getElementById('bulk-count') !== null && document.getElementById('bulk-count').dataset.count === '%d'`, len(want)),
			"the resume preview does not count the paused jobs")
		require.NoError(t, chromedp.Do(tab,
			chromedp.SendKeys(chromedp.ID("bulk-confirm-text"), fmt.Sprintf("resume %d jobs", len(want))),
			chromedp.Click(chromedp.ID("bulk-confirm")),
			chromedp.WaitVisible(chromedp.ID("bulk-done"))))
		assert.Zero(t, paused())
	})

	t.Run("every main page passes an accessibility scan", func(t *testing.T) {
		axe, err := os.ReadFile(filepath.Join("testdata", "axe.min.js"))
		require.NoError(t, err)
		check := func(tab context.Context, name string) {
			for _, v := range scanAccessibility(t, tab, string(axe)) {
				for _, n := range v.Nodes {
					t.Errorf("%s: %s (%s, %s) at %v: %s", name, v.ID, v.Impact, v.Help, n.Target, n.HTML)
				}
			}
		}
		// The login page, before any token.
		login, cancel := chromedp.NewContext(b.ctx)
		defer cancel()
		require.NoError(t, chromedp.Do(login, chromedp.Navigate(b.base), chromedp.WaitVisible(chromedp.ID("token"))))
		check(login, "login")

		tab := b.tab(t, adminToken)
		var runID string
		runs := c.runs(adminToken)
		require.Eventually(t, func() bool {
			resp, err := runs.ListRuns(ctx, connect.NewRequest(&apiv1.ListRunsRequest{JobId: "dev.flaky", PageSize: 1}))
			if err != nil || len(resp.Msg.GetAttempts()) == 0 {
				return false
			}
			runID = resp.Msg.GetAttempts()[0].GetRunId()
			return true
		}, 3*time.Minute, 250*time.Millisecond, "no run of dev.flaky")
		dagRuns, err := c.dags(adminToken).ListDagRuns(ctx, connect.NewRequest(&apiv1.ListDagRunsRequest{DagId: "dev.hello-dag", Limit: 1}))
		require.NoError(t, err)
		pages := []struct{ fragment, id string }{
			{"#/overview", "overview"}, {"#/jobs", "jobs"}, {"#/jobs/dev.hello-cron", "job"},
			{"#/runs?team=dev", "runs"}, {"#/runs/" + url.PathEscape(runID), "run"},
			{"#/dags", "dags"}, {"#/dags/dev.hello-dag", "dag"}, {"#/dagedit", "dagedit"},
			{"#/bulk?text=dev.", "bulk"}, {"#/dlq", "dlq"}, {"#/cluster", "cluster"}, {"#/edit/dev.hello-cron", "editor"},
			{"#/teams", "teams"},
		}
		if len(dagRuns.Msg.GetDagRuns()) > 0 {
			pages = append(pages, struct{ fragment, id string }{"#/dagrun/" + url.PathEscape(dagRuns.Msg.GetDagRuns()[0].GetDagRunId()), "dagrun"})
		}
		for _, p := range pages {
			b.open(t, tab, p.fragment, p.id)
			switch p.id {
			case "job": // the backfill's form, open
				eval[bool](t, tab, `(() => { document.querySelector('#backfill-box summary').click(); return true; })()`)
			case "editor": // the definition's YAML, open
				eval[bool](t, tab, `(() => { document.querySelector('#e-yaml-box summary').click(); return true; })()`)
			}
			check(tab, p.fragment)
		}

		// The keyboard alone pauses and resumes the live stream: the
		// toggle is a real button, reached with Tab.
		b.open(t, tab, "#/runs?team=dev", "runs")
		eventually(t, tab, `document.querySelector('section.live').dataset.live === 'on'`, "the live stream did not open")
		reached := false
		for range 60 {
			require.NoError(t, chromedp.Do(tab, chromedp.KeyEvent(kb.Tab)))
			if eval[string](t, tab, `document.activeElement.id`) == "live-toggle" {
				reached = true
				break
			}
		}
		require.True(t, reached, "Tab never reached the live stream's toggle")
		require.NoError(t, chromedp.Do(tab, chromedp.KeyEvent(kb.Enter)))
		eventually(t, tab, `document.querySelector('section.live').dataset.live === 'paused'`, "Enter did not pause the stream")
		require.NoError(t, chromedp.Do(tab, chromedp.KeyEvent(" ")))
		eventually(t, tab, `document.querySelector('section.live').dataset.live === 'on'`, "Space did not resume the stream")
	})
}

// axeViolation is one rule axe-core found broken, with the nodes that
// break it.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// scanAccessibility runs the vendored axe-core on the tab's page and
// returns the serious and critical violations.
func scanAccessibility(t *testing.T, ctx context.Context, axe string) []axeViolation {
	t.Helper()
	if !eval[bool](t, ctx, `typeof window.axe !== 'undefined'`) {
		// Evaluated through the debugging protocol, as a test tool, not
		// as a script of the page: the page's policy is unchanged.
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](axe+";true"))
		require.NoError(t, err, "load axe-core")
	}
	all := eval[[]axeViolation](t, ctx, `axe.run(document, {resultTypes: ['violations']}).then((r) => r.violations)`)
	var bad []axeViolation
	for _, v := range all {
		if v.Impact == "serious" || v.Impact == "critical" {
			bad = append(bad, v)
		}
	}
	return bad
}

// eventuallyShowing is eventually, and on failure says what show (a
// JavaScript expression) last evaluated to.
func eventuallyShowing(t *testing.T, ctx context.Context, js, show, msg string) {
	t.Helper()
	var last string
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js, chromedp.EvalAwaitPromise))
		if err == nil && ok {
			return
		}
		last, _ = chromedp.Run(ctx, chromedp.Evaluate[string](show, chromedp.EvalAwaitPromise))
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s; the page shows: %s", msg, last)
}
