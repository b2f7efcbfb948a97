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
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/console"
	"github.com/sundialhq/sundial/embedded"
	"github.com/sundialhq/sundial/jobspec"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// The fixed tokens of the browser tests, one per role.
const (
	adminToken    = "console-test-cluster-admin"
	operatorToken = "console-test-dev-operator"
	viewerToken   = "console-test-dev-viewer"
)

// updateScreenshots, when "1", makes the browser tests write the pictures
// of docs/console.
const updateScreenshots = "SUNDIAL_UPDATE_SCREENSHOTS"

// chromium returns the system's Chromium. Without one the test fails when
// CI is set (a missing backend fails the run) and is skipped otherwise.
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Chromium; skipped under -short")
	}
	for _, name := range []string{os.Getenv("SUNDIAL_CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "Chromium is not installed (Debian: apt-get install chromium; or set SUNDIAL_CHROMIUM to its path)"
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set, so a missing browser fails the run: %s", msg)
	}
	t.Skip(msg)
	return ""
}

// browser is one headless Chromium; each tab is a fresh session (the
// console keeps its token in the tab's sessionStorage).
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string // the console's URL, under the proxy's sub-path
}

// problems collects what the page must never do: throw, log an error, or
// be refused something by the content security policy.
type problems struct {
	mu   sync.Mutex
	list []string
}

func (p *problems) add(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, s)
}

func (p *problems) get() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.list...)
}

// tab opens a tab and logs in with token; the test fails at its end if
// the page threw, logged an error or broke the policy.
func (b *browser) tab(t *testing.T, token string) context.Context {
	t.Helper()
	ctx, seen := b.login(t, token)
	t.Cleanup(func() {
		for _, p := range seen.get() {
			t.Errorf("the page reported a problem: %s", p)
		}
	})
	return ctx
}

// login opens a tab, logs in with token and returns the tab and what it
// reports.
func (b *browser) login(t *testing.T, token string) (context.Context, *problems) {
	t.Helper()
	ctx, seen := b.newTab(t)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(b.base),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login")),
	))
	// The login ends in the console's header or in the refusal the page
	// shows: waiting for the header alone waits for ever on a refusal.
	outcome := waitLoginOutcome(t, ctx)
	if outcome != "in" {
		t.Fatalf("the console refused the login: %s", outcome)
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("nav"))))
	return ctx, seen
}

// waitLoginOutcome waits for loginOutcome to say something and returns it.
// The tab may be between pages (a sign-in goes to the provider and back):
// an evaluation that fails there is tried again.
func waitLoginOutcome(t *testing.T, ctx context.Context) string {
	t.Helper()
	var outcome string
	require.Eventually(t, func() bool {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](loginOutcome))
		outcome = v
		return err == nil && v != ""
	}, 5*time.Minute, 100*time.Millisecond, "wait for the login's outcome")
	return outcome
}

// newTab opens a tab, in the viewer's zone, with what it reports
// collected; nothing is loaded in it yet.
func (b *browser) newTab(t *testing.T) (context.Context, *problems) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	seen := &problems{}
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			seen.add(fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				seen.add(fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		case *cdplog.EventEntryAdded:
			// Answers the console expects (403 to the role probe) are
			// network entries; what the policy refuses is a security or
			// violation entry.
			e := ev.Entry
			if e.Source == cdplog.EntrySourceSecurity || e.Source == cdplog.EntrySourceViolation || strings.Contains(e.Text, "Content Security Policy") {
				seen.add(fmt.Sprintf("%s: %s", e.Source, e.Text))
			}
		}
	}))
	_, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{})
	require.NoError(t, err)
	_, err = chromedp.Call(ctx, runtime.Enable, cdp.Empty{})
	require.NoError(t, err)
	// A zone other than UTC and the machine's shakes out time-zone bugs.
	_, err = chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "America/Denver"})
	require.NoError(t, err)
	_, err = chromedp.Call(ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 1280, Height: 900, DeviceScaleFactor: 1})
	require.NoError(t, err)
	// The tab in front, and focused, as a user's: the console polls
	// nothing while its tab is hidden.
	_, err = chromedp.Call(ctx, page.BringToFront, cdp.Empty{})
	require.NoError(t, err)
	_, err = chromedp.Call(ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true})
	require.NoError(t, err)
	return ctx, seen
}

// loginOutcome is "in" once the console shows its header, the text of the
// login's error once it shows one, and empty while the login is checked.
const loginOutcome = `(() => {
  if (!document.getElementById('nav').hidden) return 'in';
  const e = document.querySelector('#main .login [role="alert"]');
  return e ? e.textContent : '';
})()`

// open shows a page of the console and waits until it loaded its data.
func (b *browser) open(t *testing.T, ctx context.Context, fragment, page string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(b.base+fragment),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#main[data-page="%s"][data-loaded]`, page))),
	))
}

// eventually evaluates js until it returns true.
func eventually(t *testing.T, ctx context.Context, js, msg string) {
	t.Helper()
	require.Eventually(t, func() bool {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js, chromedp.EvalAwaitPromise))
		return err == nil && ok
	}, 3*time.Minute, 250*time.Millisecond, msg)
}

// eval evaluates js in the tab.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	require.NoError(t, err, "evaluate %s", js)
	return v
}

// screenshot writes docs/console/<name>.png when updateScreenshots is set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv(updateScreenshots) != "1" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("..", "docs", "console", name+".png"), png, 0o644))
}

// TestConsoleInABrowser drives the console in a real headless Chromium
// against the embedded pipeline of `sundial dev` (its sample jobs), served
// through a proxy that mounts the whole API under a sub-path.
func TestConsoleInABrowser(t *testing.T) {
	exe := chromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	p, err := embedded.New(embedded.Config{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler),
		Handlers: embedded.SampleHandlers(), APIAddr: "127.0.0.1:0",
		APITokens: []string{"*:admin:" + adminToken, "dev:operator:" + operatorToken, "dev:viewer:" + viewerToken}})
	require.NoError(t, err)
	require.NoError(t, p.Start(ctx))
	defer p.Stop()
	_, err = p.LoadSamples(ctx)
	require.NoError(t, err)

	// A proxy mounts the API under /sundial/, as an ingress would.
	upstream, err := url.Parse(p.APIURL())
	require.NoError(t, err)
	proxy := httptest.NewServer(http.StripPrefix("/sundial", httputil.NewSingleHostReverseProxy(upstream)))
	defer proxy.Close()

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true))...)
	defer cancelAlloc()
	root, cancelRoot := chromedp.NewContext(alloc)
	defer cancelRoot()
	require.NoError(t, chromedp.Do(root), "start Chromium at %s", exe)
	b := &browser{t: t, ctx: root, base: proxy.URL + "/sundial/console/"}

	as := func(token string) []connect.ClientOption {
		return []connect.ClientOption{connect.WithInterceptors(apiserver.BearerToken(token))}
	}
	jobs := apiv1connect.NewJobServiceClient(http.DefaultClient, p.APIURL(), as(operatorToken)...)

	t.Run("every answer carries the policy, and the root leads to the console", func(t *testing.T) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, proxy.URL+"/sundial/", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, proxy.URL+"/sundial/console/", resp.Request.URL.String(), "the relative redirect stays under the sub-path")
		assert.Equal(t, console.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	})

	t.Run("the browser enforces the policy, and the tests see a breach", func(t *testing.T) {
		tab, seen := b.login(t, viewerToken)
		// An inline script, as an injection would add one: refused.
		ran := eval[bool](t, tab, `(() => { window.injected = false; const s = document.createElement('script');
			s.textContent = 'window.injected = true'; document.body.append(s); return window.injected; })()`)
		assert.False(t, ran, "the inline script ran")
		require.Eventually(t, func() bool {
			for _, p := range seen.get() {
				if strings.Contains(p, "Content Security Policy") {
					return true
				}
			}
			return false
		}, 2*time.Minute, 100*time.Millisecond, "the refusal was not reported; seen: %v", seen.get())
	})

	t.Run("a wrong token is refused at login", func(t *testing.T) {
		tab, cancel := chromedp.NewContext(b.ctx)
		defer cancel()
		require.NoError(t, chromedp.Do(tab,
			chromedp.Navigate(b.base),
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), "not-a-token"),
			chromedp.Click(chromedp.ID("login")),
			chromedp.WaitVisible(chromedp.CSS(`#main [role="alert"]`))))
		alert, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(`#main [role="alert"]`)))
		require.NoError(t, err)
		assert.Contains(t, alert, "unauthenticated")
		assert.True(t, eval[bool](t, tab, `document.getElementById('nav').hidden && sessionStorage.length === 0`), "a refused token is not kept")
	})

	t.Run("schedules and durations are written in words", func(t *testing.T) {
		tab := b.tab(t, viewerToken)
		cases := []struct{ expr, want string }{
			{"*/5 * * * * *", "every 5 seconds"},
			{"* * * * * *", "every second"},
			{"0 */15 * * * *", "every 15 minutes"},
			{"30 * * * * *", "every minute at :30"},
			{"0 0 9 * * *", "at 09:00 every day"},
			{"0 9 * * 1-5", "at 09:00 Mon–Fri"},
			{"0 30 2 1 * *", "at 02:30 on day 1 of every month"},
			{"0 0 12 ? JAN MON", ""},
		}
		for _, c := range cases {
			got := eval[string](t, tab, fmt.Sprintf(`import(new URL('js/format.js', location.href)).then((m) => m.describeCron(%q))`, c.expr))
			assert.Equal(t, c.want, got, "describeCron(%q)", c.expr)
		}
		durations := []struct {
			seconds float64
			want    string
		}{{0.85, "850 ms"}, {10, "10 s"}, {4.25, "4.25 s"}, {185, "3 min 5 s"}, {7260, "2 h 1 min"}}
		for _, c := range durations {
			got := eval[string](t, tab, fmt.Sprintf(`import(new URL('js/format.js', location.href)).then((m) => m.duration(%v))`, c.seconds))
			assert.Equal(t, c.want, got, "duration(%v)", c.seconds)
		}
	})

	t.Run("a viewer sees no write buttons", func(t *testing.T) {
		tab := b.tab(t, viewerToken)
		for _, page := range []struct{ fragment, id string }{
			{"#/jobs/dev.hello-cron", "job"}, {"#/jobs", "jobs"}, {"#/dlq", "dlq"}, {"#/runs?job=dev.flaky", "runs"},
		} {
			b.open(t, tab, page.fragment, page.id)
			writes := eval[int](t, tab, `document.querySelectorAll('[data-write]').length`)
			assert.Zero(t, writes, "write buttons on %s", page.fragment)
			assert.Empty(t, eval[[]string](t, tab, strayNulls), "the page writes null where a write button would be: %s", page.fragment)
		}
		// The search and the filters are in the URL, answered by the
		// server.
		b.open(t, tab, "#/jobs?text=flaky", "jobs")
		assert.Equal(t, []string{"dev.flaky"}, eval[[]string](t, tab, `[...document.querySelectorAll('#results tbody tr td:first-child')].map((td) => td.textContent)`))
		b.open(t, tab, "#/jobs?kind=SCHEDULE_KIND_CRON", "jobs")
		assert.Equal(t, []string{"dev.hello-cron"}, eval[[]string](t, tab, `[...document.querySelectorAll('#results tbody tr td:first-child')].map((td) => td.textContent)`))
		assert.Equal(t, "SCHEDULE_KIND_CRON", eval[string](t, tab, `document.getElementById('f-kind').value`), "the form shows the URL's filter")
		who, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("whoami")))
		require.NoError(t, err)
		assert.Equal(t, "viewer of team dev", who)
	})

	t.Run("runs arrive without a reload while auto-refresh is on", func(t *testing.T) {
		tab := b.tab(t, operatorToken)
		b.open(t, tab, "#/runs?job=dev.hello-cron", "runs")
		eventually(t, tab, `document.querySelectorAll('[data-run-id]').length > 0`, "no run of dev.hello-cron listed")
		require.False(t, eval[bool](t, tab, `document.hidden`), "the tab is hidden: the console would not poll")
		first := eval[string](t, tab, `document.querySelector('[data-run-id]').dataset.runId`)
		// A mark on this document: a reload would lose it.
		eval[bool](t, tab, `window.sameDocument = true`)
		eval[bool](t, tab, `(() => { const s = document.getElementById('refresh-interval'); s.value = '2000';
			return s.dispatchEvent(new Event('change')); })()`)
		require.NoError(t, chromedp.Do(tab, chromedp.Click(chromedp.ID("auto-refresh"))))
		eventually(t, tab, fmt.Sprintf(`window.sameDocument === true && document.querySelector('[data-run-id]').dataset.runId !== %q`, first),
			"no newer run appeared without a reload")
		screenshot(t, tab, "runs")
		newest := eval[string](t, tab, `document.querySelector('[data-run-id]').dataset.runId`)
		// Auto-refresh off stops the polling before the run's page opens.
		require.NoError(t, chromedp.Do(tab, chromedp.Click(chromedp.ID("auto-refresh"))))
		b.open(t, tab, "#/runs/"+url.PathEscape(newest), "run")
		eventually(t, tab, `document.getElementById('late') !== null && document.querySelectorAll('table').length > 0`, "the run's page shows no attempts")
		// Why it was late, step by step: the history's times of the attempt.
		steps := eval[[]string](t, tab, `(() => { const c = [...document.querySelectorAll('caption')].find((c) => c.textContent === 'Each attempt, step by step');
			return c ? [...c.closest('table').querySelectorAll('tbody tr:first-child td')].map((td) => td.textContent) : []; })()`)
		require.Len(t, steps, 8, "the run's page has no step-by-step table")
		assert.NotEqual(t, "–", steps[2], "the attempt's dispatched time")
		// Where it lost the most time, as the server names it
		// (AttemptDetail.cause): the embedded pipeline records every step.
		assert.Regexp(t, `^the (dispatcher|consumer lag|runner) \(`, steps[7], "where the attempt lost the most time")
		screenshot(t, tab, "run")
	})

	t.Run("an operator pauses and resumes a job from its page", func(t *testing.T) {
		tab := b.tab(t, operatorToken)
		b.open(t, tab, "#/jobs/dev.hello-cron", "job")
		screenshot(t, tab, "job")
		state := func() apiv1.DefinitionState {
			resp, err := jobs.GetJob(tab, connect.NewRequest(&apiv1.GetJobRequest{Id: "dev.hello-cron"}))
			require.NoError(t, err)
			return resp.Msg.GetJob().GetState()
		}
		require.NoError(t, chromedp.Do(tab,
			chromedp.Click(chromedp.Search(`//div[@id="actions"]/button[normalize-space()="Pause"]`)),
			chromedp.WaitVisible(chromedp.Search(`//div[@id="actions"]/button[normalize-space()="Resume"]`))))
		assert.Equal(t, apiv1.DefinitionState_DEFINITION_STATE_PAUSED, state())
		require.NoError(t, chromedp.Do(tab,
			chromedp.Click(chromedp.Search(`//div[@id="actions"]/button[normalize-space()="Resume"]`)),
			chromedp.WaitVisible(chromedp.Search(`//div[@id="actions"]/button[normalize-space()="Pause"]`))))
		assert.Equal(t, apiv1.DefinitionState_DEFINITION_STATE_ACTIVE, state())
	})

	t.Run("a dead letter is replayed after a dry run", func(t *testing.T) {
		tab := b.tab(t, operatorToken)
		eventually(t, tab, `(async () => { location.hash = '#/dlq?job=dev.flaky&x=' + Date.now();
			await new Promise((r) => setTimeout(r, 500));
			return document.querySelectorAll('button.replay').length > 0; })()`, "no dead letter of dev.flaky listed")
		screenshot(t, tab, "dlq")
		target := eval[string](t, tab, `document.querySelector('#results table a[href^="#/runs/"]').textContent`)
		require.NoError(t, chromedp.Do(tab,
			chromedp.Click(chromedp.CSS(`#results table button.replay`)),
			chromedp.WaitVisible(chromedp.ID("replay-preview"))))
		preview, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("replay-preview")))
		require.NoError(t, err)
		assert.Contains(t, preview, target, "the dry run names the run")
		require.NoError(t, chromedp.Do(tab,
			chromedp.Click(chromedp.ID("confirm-replay")),
			chromedp.WaitVisible(chromedp.ID("replayed"))))
		replayed, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("replayed")))
		require.NoError(t, err)
		assert.Contains(t, replayed, "Replayed 1: "+target)
	})

	t.Run("the cluster page lists the shards", func(t *testing.T) {
		tab := b.tab(t, adminToken)
		b.open(t, tab, "#/overview", "overview")
		eventually(t, tab, `document.getElementById('shards-owned') !== null && document.querySelectorAll('#runs-by-state .tile').length > 0`, "the overview shows no figures")
		screenshot(t, tab, "overview")
		b.open(t, tab, "#/jobs", "jobs")
		screenshot(t, tab, "jobs")
		b.open(t, tab, "#/cluster", "cluster")
		eventually(t, tab, `document.querySelectorAll('table').length > 0`, "the cluster page shows no table")
		rows := eval[int](t, tab, `document.querySelectorAll('table')[0].querySelectorAll('tbody tr').length`)
		assert.Equal(t, embedded.DefaultShards, rows)
		screenshot(t, tab, "cluster")
	})

	t.Run("the editor writes a definition as YAML that sundial apply reads back the same", func(t *testing.T) {
		tab := b.tab(t, adminToken)
		specs := embedded.SampleJobs(p.EchoURL())
		specs = append(specs, &sundialv1.JobSpec{
			Id: "dev.yaml", OwnerTeam: "dev", Description: "quotes \"here\", a colon: there\nand a second line",
			Labels:   map[string]string{"sundial.io/trigger-lag-objective": "p99 <= 2s over 7d", "on": "yes", "n": "42"},
			Schedule: &sundialv1.Schedule{TimeZone: "Europe/Paris", Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "0 0 9 * * MON-FRI"}}},
			Target:   &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "hello"}}},
			Payload:  []byte(`{"a":1}`), Paused: true, ConcurrencyLimit: 2, OverlapPolicy: sundialv1.OverlapPolicy_OVERLAP_POLICY_QUEUE,
			Retry: &sundialv1.RetryPolicy{MaxAttempts: 4, InitialBackoff: durationpb.New(1500 * time.Millisecond), Multiplier: 1.5,
				NonRetryableErrors: []string{"http_400", "a: b"}},
		})
		for _, spec := range specs {
			js, err := protojson.Marshal(spec)
			require.NoError(t, err)
			yaml := eval[string](t, tab, fmt.Sprintf(`import(new URL('js/yaml.js', location.href)).then((m) => m.toYAML(JSON.parse(%q)))`, js))
			var got []*sundialv1.JobSpec
			for s, err := range jobspec.DecodeFile(strings.NewReader(yaml)) {
				require.NoError(t, err, "decode the YAML of %s:\n%s", spec.GetId(), yaml)
				got = append(got, s)
			}
			require.Len(t, got, 1, "the YAML of %s:\n%s", spec.GetId(), yaml)
			assert.True(t, proto.Equal(spec, got[0]), "%s read back differs:\n%s\nwant %v\ngot  %v", spec.GetId(), yaml, spec, got[0])
		}
		b.open(t, tab, "#/edit/dev.hello-cron", "editor")
		waitFor(t, tab, "#e-yaml")
		shown := eval[string](t, tab, `document.getElementById('e-yaml').value`)
		assert.Contains(t, shown, "id: dev.hello-cron\n", "the editor's YAML")
	})

	t.Run("an operator backfills a job's past minute after a dry run", func(t *testing.T) {
		tab := b.tab(t, operatorToken)
		b.open(t, tab, "#/jobs/dev.hello-cron", "job")
		waitFor(t, tab, "#backfill-box summary")
		eval[bool](t, tab, `(() => { document.querySelector('#backfill-box summary').click(); return document.getElementById('backfill-box').open; })()`)
		// A minute of a cron job every five seconds, long ago (in the
		// viewer's zone: any zone has twelve such fires in a minute).
		setValue(t, tab, "bf-from", "2026-01-01T10:00:00")
		setValue(t, tab, "bf-to", "2026-01-01T10:01:00")
		click(t, tab, "backfill-preview")
		waitFor(t, tab, "#backfill-count")
		count, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("backfill-count")))
		require.NoError(t, err)
		assert.Contains(t, count, "12 occurrences to run")
		assert.Equal(t, 12, eval[int](t, tab, `document.querySelectorAll('#backfill-result tbody tr').length`), "the occurrences listed")
		click(t, tab, "backfill-run")
		waitFor(t, tab, "#backfill-done")
		done, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("backfill-done")))
		require.NoError(t, err)
		assert.Contains(t, done, "Backfilled: 12 enqueued, 0 had already run; ended: 12 succeeded.")
	})

	t.Run("a job's trigger-lag objective: its budget and where late attempts lost their time", func(t *testing.T) {
		tab := b.tab(t, viewerToken)
		// On the job's page: a job with an objective is measured against
		// it; one without says how to set one.
		admin := apiv1connect.NewJobServiceClient(http.DefaultClient, p.APIURL(), as(adminToken)...)
		resp, err := admin.GetJob(tab, connect.NewRequest(&apiv1.GetJobRequest{Id: "dev.hello-cron"}))
		require.NoError(t, err)
		spec := resp.Msg.GetJob().GetSpec()
		spec.Id = "dev.objective"
		spec.Labels = map[string]string{"sundial.io/trigger-lag-objective": "p99 <= 1h over 1h"}
		applied, err := admin.ApplyJob(tab, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: spec}))
		require.NoError(t, err)
		require.True(t, applied.Msg.GetAccepted(), "apply dev.objective: %v", applied.Msg)
		eventually(t, tab, `(async () => { location.hash = '#/jobs/dev.objective?x=' + Date.now();
			await new Promise((r) => setTimeout(r, 1000));
			const n = document.querySelector('#objective-tiles .tile:nth-child(2) .n');
			return n !== null && Number(n.textContent) > 0; })()`, "dev.objective's objective counts no attempt")
		state, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(`#objective-state .n`)))
		require.NoError(t, err)
		assert.Equal(t, "met", state, "no attempt of a five-second job starts an hour late")
		b.open(t, tab, "#/jobs/dev.flaky", "job")
		assert.True(t, eval[bool](t, tab, `document.getElementById('no-objective') !== null`), "a job without an objective says how to set one")

		// A label that does not parse is shown as the server's error.
		spec.Id = "dev.objective-typo"
		spec.Labels = map[string]string{"sundial.io/trigger-lag-objective": "p100 <= 2s over 7d"}
		applied, err = admin.ApplyJob(tab, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: spec}))
		require.NoError(t, err)
		require.True(t, applied.Msg.GetAccepted(), "apply dev.objective-typo: %v", applied.Msg)
		b.open(t, tab, "#/jobs/dev.objective-typo", "job")
		eventually(t, tab, `(document.querySelector('#objective .error') || {}).textContent?.includes('the percentile 100 must be above 0 and below 100') === true`,
			"the job's page does not show the label's mistake")

		// A job whose every attempt starts later than 1 ms breaches: the
		// overview, ranked by the server, lists it first, with where its
		// worst attempt lost its time; dev.objective, met, comes after it.
		spec.Id = "dev.breach"
		spec.Labels = map[string]string{"sundial.io/trigger-lag-objective": "p50 <= 1ms over 1h"}
		applied, err = admin.ApplyJob(tab, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: spec}))
		require.NoError(t, err)
		require.True(t, applied.Msg.GetAccepted(), "apply dev.breach: %v", applied.Msg)
		eventually(t, tab, `(async () => { location.hash = '#/overview?x=' + Date.now();
			await new Promise((r) => setTimeout(r, 1000));
			const first = document.querySelector('#overview-objectives tbody tr');
			return first !== null && first.cells[0].textContent === 'dev.breach' && first.textContent.includes('(breached)'); })()`,
			"the overview does not list dev.breach first, breached")
		first, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(`#overview-objectives tbody tr`)))
		require.NoError(t, err)
		assert.Regexp(t, `the (dispatcher|consumer lag|runner)`, first, "the worst breach names its step")
		ranked := eval[[]string](t, tab, `[...document.querySelectorAll('#overview-objectives tbody tr')].map((r) => r.cells[0].textContent)`)
		assert.Contains(t, ranked, "dev.objective", "the met job is ranked too")
		assert.NotContains(t, ranked, "dev.objective-typo", "a label that does not parse is not ranked")
	})
}
