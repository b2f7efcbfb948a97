package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/testenv"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
)

// scaleJobs names the environment variable that says how many jobs the
// scale test loads (1000000 for the figure). Unset, the test runs
// with smallScale jobs, so that its server and its page stay in step with
// the console between the measures (a test skipped by default rots: its
// server lacked WhoAmI for a whole session, and the 1,000,000-job measure
// then waited at the login for ever).
const scaleJobs = "SUNDIAL_CONSOLE_SCALE"

// smallScale is the scale test's number of jobs when scaleJobs is unset:
// more than a page, few enough for every run of the package.
const smallScale = 300

// readOnlyWriter is the JobWriter of a server that only lists: the scale
// test changes nothing through the API.
type readOnlyWriter struct{}

func (readOnlyWriter) Apply(context.Context, *sundialv1.JobSpec) (client.Receipt, error) {
	return client.Receipt{}, fmt.Errorf("the scale test's API is read-only")
}

func (readOnlyWriter) Delete(context.Context, string) (client.Receipt, error) {
	return client.Receipt{}, fmt.Errorf("the scale test's API is read-only")
}

func (readOnlyWriter) WaitStatus(context.Context, ...client.Receipt) ([]*sundialv1.JobStatus, error) {
	return nil, fmt.Errorf("the scale test's API is read-only")
}

// deadlines records, per call, whether the call's context on the server
// had a deadline: every call the console makes must be bounded.
type deadlines struct {
	mu   sync.Mutex
	seen map[string]time.Duration // method -> time left when it was called; 0 without a deadline
}

func (d *deadlines) record(ctx context.Context, method string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = map[string]time.Duration{}
	}
	left := time.Duration(0)
	if at, ok := ctx.Deadline(); ok {
		left = time.Until(at)
	}
	d.seen[method] = left
}

func (d *deadlines) get(method string) (time.Duration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	left, ok := d.seen[method]
	return left, ok
}

// clusterAdminProbe answers the overview's cluster tiles (GetCluster) for
// the cluster admin with an empty cluster: the scale test's server has no
// dispatchers to report, only the jobs.
type clusterAdminProbe struct {
	apiv1connect.UnimplementedClusterServiceHandler
	calls *deadlines
}

func (p clusterAdminProbe) GetCluster(ctx context.Context, _ *connect.Request[apiv1.GetClusterRequest]) (*connect.Response[apiv1.GetClusterResponse], error) {
	p.calls.record(ctx, "GetCluster")
	return connect.NewResponse(&apiv1.GetClusterResponse{}), nil
}

// emptyDeadLetters answers the overview's dead-letter count with none.
type emptyDeadLetters struct {
	apiv1connect.UnimplementedDlqServiceHandler
	calls *deadlines
}

func (p emptyDeadLetters) ListDeadLetters(ctx context.Context, _ *connect.Request[apiv1.ListDeadLettersRequest]) (*connect.Response[apiv1.ListDeadLettersResponse], error) {
	p.calls.record(ctx, "ListDeadLetters")
	return connect.NewResponse(&apiv1.ListDeadLettersResponse{}), nil
}

// loadJobs writes n job definitions to st in batches, several at once, as
// the registry would have stored them (no next due time: nothing fires).
func loadJobs(t *testing.T, ctx context.Context, st *cassandra.Store, n int) {
	t.Helper()
	const batch, workers = 500, 8
	spec := func(i int) []byte {
		b, err := proto.Marshal(&sundialv1.JobSpec{
			Id: fmt.Sprintf("scale.job-%07d", i), OwnerTeam: fmt.Sprintf("scale-%02d", i%50),
			Description: "a job of the console's scale test",
			Schedule: &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_Interval{
				Interval: &sundialv1.Interval{Every: durationpb.New(time.Duration(1+i%60) * time.Minute)}}},
			Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}},
		})
		require.NoError(t, err)
		return b
	}
	start := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for from := range next {
				jobs := make([]store.Job, 0, batch)
				for i := from; i < min(from+batch, n); i++ {
					jobs = append(jobs, store.Job{ID: fmt.Sprintf("scale.job-%07d", i), Spec: spec(i), Revision: 1, UpdatedAt: start})
				}
				var err error
				for try := 0; try < 5; try++ { // a transient failure: the whole call again
					if _, err = st.UpsertJobs(ctx, jobs); err == nil {
						break
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for from := 0; from < n; from += batch {
		select {
		case next <- from:
		case err := <-errs:
			close(next)
			wg.Wait()
			t.Fatalf("load jobs: %v", err)
		}
		if from%100000 == 0 && from > 0 {
			t.Logf("loaded %d jobs in %v", from, time.Since(start).Round(time.Second))
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("load jobs: %v", err)
	default:
	}
	t.Logf("loaded %d jobs in %v", n, time.Since(start).Round(time.Second))
}

// pageTimeline is the page's own account of a load (the Performance
// API): when the document arrived and was parsed, then every file and call
// it fetched, with its start and duration in ms since the navigation and
// "cache" for a file the browser did not fetch again. It shows what the
// first call waited for.
const pageTimeline = `(() => {
	const nav = performance.getEntriesByType('navigation')[0];
	const out = nav ? ['document ' + Math.round(nav.responseEnd) + ' ms, parsed ' + Math.round(nav.domInteractive) +
		' ms, scripts run ' + Math.round(nav.domContentLoadedEventEnd) + ' ms'] : [];
	for (const e of performance.getEntriesByType('resource')) {
		const name = new URL(e.name).pathname.split('/').slice(-2).join('/');
		out.push(name + ' ' + Math.round(e.startTime) + '+' + Math.round(e.duration) + (e.transferSize === 0 ? ' cache' : ''));
	}
	return out;
})()`

// TestConsoleJobsFirstPageAtScale measures, on the real stack, the time
// from navigating to the jobs page to its first page rendered (25 jobs,
// each with its next fire and figures), with SUNDIAL_CONSOLE_SCALE jobs in
// the keyspace (smallScale when unset):
//
//	SUNDIAL_CONSOLE_SCALE=1000000 go test -count=1 -timeout 60m -run TestConsoleJobsFirstPageAtScale -v ./console/
func TestConsoleJobsFirstPageAtScale(t *testing.T) {
	n := smallScale
	if v := os.Getenv(scaleJobs); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "%s=%q: a number of jobs", scaleJobs, v)
		require.Positive(t, n, "%s=%q: a number of jobs", scaleJobs, v)
	}
	exe := chromium(t)
	c := testenv.NeedCassandra(t)
	ctx, cancel := context.WithTimeout(t.Context(), 55*time.Minute)
	defer cancel()
	cfg := cassandra.Config{Hosts: c.Hosts, Keyspace: c.Keyspace}
	_, err := cassandra.Migrate(ctx, cfg)
	require.NoError(t, err)
	st, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, err = st.InitCluster(ctx, 16)
	require.NoError(t, err)
	loadJobs(t, ctx, st, n)

	jobs, err := apiserver.NewJobService(apiserver.JobServiceConfig{Store: st, Writer: readOnlyWriter{}})
	require.NoError(t, err)
	const teamViewer = "console-scale-team-viewer"
	authn, err := apiserver.ParseStaticTokens([]string{"*:admin:" + adminToken, "scale-07:viewer:" + teamViewer})
	require.NoError(t, err)
	// The services the overview, the login and the jobs list call.
	calls := &deadlines{}
	srv, err := apiserver.New(apiserver.Config{Addr: "127.0.0.1:0", Authenticator: authn, Public: assemble.APIPublic(),
		Services: []apiserver.Service{jobs.Service(), apiserver.IdentityService{}.Service(),
			apiserver.ConnectService(apiv1connect.NewClusterServiceHandler, apiv1connect.ClusterServiceHandler(clusterAdminProbe{calls: calls})),
			apiserver.ConnectService(apiv1connect.NewDlqServiceHandler, apiv1connect.DlqServiceHandler(emptyDeadLetters{calls: calls}))},
		Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop)

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true))...)
	defer cancelAlloc()
	root, cancelRoot := chromedp.NewContext(alloc)
	defer cancelRoot()
	require.NoError(t, chromedp.Do(root), "start Chromium at %s", exe)
	b := &browser{t: t, ctx: root, base: fmt.Sprintf("http://%s/console/", srv.Addr())}
	tab := b.tab(t, adminToken)
	// The page after the login is the overview; each of its calls carries
	// the console's deadline, which the server enforces.
	require.NoError(t, chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`#main[data-page="overview"][data-loaded] #dead-count`))))
	for _, method := range []string{"GetCluster", "ListDeadLetters"} {
		left, called := calls.get(method)
		require.True(t, called, "the overview calls %s", method)
		require.Positive(t, left, "%s: the call has a deadline on the server", method)
		require.LessOrEqual(t, left, 30*time.Second, "%s: the console's deadline", method)
	}

	// Each measure is a full load of the page (the token stays in the
	// tab's session), from navigation to the table of the first page.
	var times, completes []time.Duration
	for i := range 3 {
		require.NoError(t, chromedp.Do(tab, chromedp.Navigate("about:blank")))
		start := time.Now()
		// The first page is rendered when its table of jobs is shown; the
		// rows' next fires and figures (one GetJobViews for the page)
		// follow.
		require.NoError(t, chromedp.Do(tab,
			chromedp.Navigate(b.base+"#/jobs"),
			chromedp.WaitVisible(chromedp.CSS(`#main[data-page="jobs"] #results table tbody tr`))))
		took := time.Since(start)
		require.NoError(t, chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`#main[data-page="jobs"][data-loaded] #results[data-figures="done"]`))))
		complete := time.Since(start)
		rows := eval[int](t, tab, `document.querySelectorAll('#results tbody tr').length`)
		inPage := eval[float64](t, tab, `performance.now()`)
		require.Equal(t, 25, rows, "the first page's rows")
		calls := eval[[]string](t, tab, `performance.getEntriesByType('resource').filter((e) => e.name.includes('sundial.api.v1'))
			.map((e) => e.name.split('/').pop() + ' ' + Math.round(e.startTime) + '+' + Math.round(e.duration) + ' ms')`)
		t.Logf("calls (start+duration): %v", calls)
		t.Logf("timeline: %v", eval[[]string](t, tab, pageTimeline))
		times = append(times, took)
		completes = append(completes, complete)
		t.Logf("load %d: first page of %d jobs rendered %v after navigation, with every row's figures %v (%.0f ms by the page's clock)",
			i+1, n, took.Round(time.Millisecond), complete.Round(time.Millisecond), inPage)
	}
	t.Logf("console scale: %d jobs: jobs list first page rendered in %v, %v, %v; with every row's figures in %v, %v, %v", n,
		times[0].Round(time.Millisecond), times[1].Round(time.Millisecond), times[2].Round(time.Millisecond),
		completes[0].Round(time.Millisecond), completes[1].Round(time.Millisecond), completes[2].Round(time.Millisecond))
	// The figure: the first page in under 1 s, in the median of
	// the loads. Asserted at the scale a measure configures, which runs
	// alone on the machine; the default small scale runs beside every other
	// test of the package and only shows the figure and the timeline.
	if os.Getenv(scaleJobs) != "" {
		sorted := slices.Clone(times)
		slices.Sort(sorted)
		require.Less(t, sorted[len(sorted)/2], time.Second,
			"the median of the loads' first page at %d jobs (%v): the issue wants it under 1 s", n, times)
	}
	if os.Getenv(scaleJobs) != "" {
		// Only a picture at the scale asked for: 300 jobs show nothing
		// the jobs page's own picture does not.
		screenshot(t, tab, "jobs-at-scale")
	}

	// Tenancy: a team's viewer lists its own team's jobs only, and another
	// team's job is not found, as if it did not exist.
	viewer := b.tab(t, teamViewer)
	b.open(t, viewer, "#/jobs", "jobs")
	// The page may be marked loaded before its rows are drawn (under make
	// test's load the rows were read empty once): wait for them.
	eventually(t, viewer, `document.querySelectorAll('#results tbody tr td:nth-child(2)').length > 0`,
		"the team's first page lists none of its jobs")
	teams := eval[[]string](t, viewer, `[...document.querySelectorAll('#results tbody tr td:nth-child(2)')].map((td) => td.textContent)`)
	require.NotEmpty(t, teams, "the team's first page lists none of its jobs")
	for _, team := range teams {
		assert.Equal(t, "scale-07", team, "another team's job is listed")
	}
	b.open(t, viewer, "#/jobs/scale.job-0000000", "job")
	alert, err := chromedp.Run(viewer, chromedp.Text(chromedp.CSS(`#results [role="alert"]`)))
	require.NoError(t, err)
	assert.Contains(t, alert, "not_found", "another team's job")
}
