package loadgen

import (
	"cmp"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// setup returns a 4-job interval plan (every 4s, phases 0,1,2,3s) and a
// recorder whose window is [t0, t0+8s): 8 expected runs.
func setup(t *testing.T) (*Plan, *Recorder) {
	t.Helper()
	p, err := NewPlan(Workload{Prefix: "lg", Jobs: 4, Rate: 1, Duration: time.Minute, Mix: Mix{Interval: 1}, Target: Target{Handler: "noop"}})
	require.NoError(t, err)
	require.Equal(t, 4*time.Second, p.Period)
	return p, NewRecorder(p.ParseRunID, t0, t0.Add(8*time.Second))
}

func started(p *Plan, job int, due time.Time, attempt uint32, token int64, runner string, after time.Duration) *sundialv1.RunEvent {
	id := p.JobID(job)
	return &sundialv1.RunEvent{
		RunId: id + "@" + formatMs(due), JobId: id, Attempt: attempt, State: sundialv1.RunState_RUN_STATE_STARTED,
		Time: timestamppb.New(due.Add(after)), DueTime: timestamppb.New(due), AttemptDueTime: timestamppb.New(due),
		RunnerId: runner, FencingToken: token,
	}
}

// outcome is the SUCCEEDED event of an execution that started startAfter
// the due time and ended endAfter it, carrying its start.
func outcome(p *Plan, job int, due time.Time, attempt uint32, token int64, runner string, startAfter, endAfter time.Duration) *sundialv1.RunEvent {
	ev := started(p, job, due, attempt, token, runner, endAfter)
	ev.State = sundialv1.RunState_RUN_STATE_SUCCEEDED
	ev.StartedTime = timestamppb.New(due.Add(startAfter))
	return ev
}

func formatMs(t time.Time) string { return itoa(t.UnixMilli()) }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// due of job j's k-th run in the window.
func due(j, k int) time.Time {
	return t0.Add(time.Duration(j)*time.Second + time.Duration(k)*4*time.Second)
}

func TestRecorderCounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		events func(p *Plan) []*sundialv1.RunEvent
		want   Counts
		// latencies of the window, in ms, sorted
		latencies []int64
	}{
		{
			name: "every run once: nothing lost, nothing duplicated",
			events: func(p *Plan) []*sundialv1.RunEvent {
				var evs []*sundialv1.RunEvent
				for j := range 4 {
					for k := range 2 {
						evs = append(evs, started(p, j, due(j, k), 1, int64(10*j+k+1), "r1", time.Duration(j+1)*time.Millisecond))
					}
				}
				return evs
			},
			want:      Counts{Expected: 8, StartedInWindow: 8, StartedDuringWindow: 8, Events: 8},
			latencies: []int64{1, 1, 2, 2, 3, 3, 4, 4},
		},
		{
			name: "a run never started is lost",
			events: func(p *Plan) []*sundialv1.RunEvent {
				return []*sundialv1.RunEvent{started(p, 0, due(0, 0), 1, 1, "r1", 5*time.Millisecond)}
			},
			want:      Counts{Expected: 8, StartedInWindow: 1, StartedDuringWindow: 1, Lost: 7, Events: 1},
			latencies: []int64{5},
		},
		{
			name: "the same STARTED event read twice is one execution",
			events: func(p *Plan) []*sundialv1.RunEvent {
				e := started(p, 1, due(1, 0), 1, 7, "r1", 3*time.Millisecond)
				return []*sundialv1.RunEvent{e, e}
			},
			want:      Counts{Expected: 8, StartedInWindow: 1, StartedDuringWindow: 1, Lost: 7, Events: 2},
			latencies: []int64{3},
		},
		{
			name: "two leases on one attempt are a duplicate execution; the first start gives the latency",
			events: func(p *Plan) []*sundialv1.RunEvent {
				return []*sundialv1.RunEvent{
					started(p, 1, due(1, 0), 1, 7, "r1", 3*time.Millisecond),
					started(p, 1, due(1, 0), 1, 8, "r2", 9*time.Second),
					started(p, 1, due(1, 0), 1, 9, "r1", 10*time.Second),
				}
			},
			want:      Counts{Expected: 8, StartedInWindow: 1, StartedDuringWindow: 1, Lost: 7, DuplicateExecutions: 1, ExtraExecutions: 2, Events: 3},
			latencies: []int64{3},
		},
		{
			name: "a retry (attempt 2) is not a duplicate",
			events: func(p *Plan) []*sundialv1.RunEvent {
				return []*sundialv1.RunEvent{
					started(p, 2, due(2, 1), 1, 7, "r1", time.Millisecond),
					started(p, 2, due(2, 1), 2, 8, "r1", 2*time.Second),
				}
			},
			want:      Counts{Expected: 8, StartedInWindow: 1, StartedDuringWindow: 1, Lost: 7, Events: 2},
			latencies: []int64{1},
		},
		{
			name: "runs outside the window, at wrong times, of other workloads, and other states",
			events: func(p *Plan) []*sundialv1.RunEvent {
				before := started(p, 0, t0.Add(-4*time.Second), 1, 1, "r1", time.Millisecond)
				wrong := started(p, 0, t0.Add(1500*time.Millisecond), 1, 2, "r1", time.Millisecond)
				foreign := started(p, 0, due(0, 0), 1, 3, "r1", time.Millisecond)
				foreign.RunId = "other-0@" + itoa(due(0, 0).UnixMilli())
				succeeded := started(p, 0, due(0, 0), 1, 4, "r1", time.Millisecond)
				succeeded.State = sundialv1.RunState_RUN_STATE_SUCCEEDED
				return []*sundialv1.RunEvent{before, wrong, foreign, succeeded}
			},
			want:      Counts{Expected: 8, Lost: 8, StartedDuringWindow: 1, Unexpected: 1, Events: 4, Foreign: 1},
			latencies: []int64{1}, // the wrong-time run is in the window
		},
		{
			name: "an outcome that carries the start (STARTED elided) is the start; its own time is not",
			events: func(p *Plan) []*sundialv1.RunEvent {
				e := outcome(p, 2, due(2, 0), 1, 7, "r1", 4*time.Millisecond, 15*time.Millisecond)
				return []*sundialv1.RunEvent{e}
			},
			want:      Counts{Expected: 8, StartedInWindow: 1, StartedDuringWindow: 1, Lost: 7, Events: 1},
			latencies: []int64{4},
		},
		{
			name: "a STARTED and the outcome of the same execution are one execution",
			events: func(p *Plan) []*sundialv1.RunEvent {
				st := started(p, 2, due(2, 0), 1, 7, "r1", 4*time.Millisecond)
				st.StartedTime = timestamppb.New(due(2, 0).Add(3 * time.Millisecond))
				return []*sundialv1.RunEvent{st, outcome(p, 2, due(2, 0), 1, 7, "r1", 3*time.Millisecond, 2*time.Second)}
			},
			want:      Counts{Expected: 8, StartedInWindow: 1, StartedDuringWindow: 1, Lost: 7, Events: 2},
			latencies: []int64{3},
		},
		{
			name: "a run due in the window that starts after it is not lost, but does not count as sustained",
			events: func(p *Plan) []*sundialv1.RunEvent {
				return []*sundialv1.RunEvent{started(p, 3, due(3, 1), 1, 1, "r1", 2*time.Second)}
			},
			want:      Counts{Expected: 8, StartedInWindow: 1, Lost: 7, Events: 1},
			latencies: []int64{2000},
		},
		{
			name: "a start before the due time is counted and recorded as the minimum",
			events: func(p *Plan) []*sundialv1.RunEvent {
				return []*sundialv1.RunEvent{started(p, 3, due(3, 0), 1, 1, "r1", -20*time.Millisecond)}
			},
			want:      Counts{Expected: 8, StartedInWindow: 1, StartedDuringWindow: 1, Lost: 7, EarlyStarts: 1, Events: 1},
			latencies: []int64{0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, r := setup(t)
			for _, ev := range tt.events(p) {
				r.ObserveEvent(ev)
			}
			got := r.Result(p.Expected(t0, t0.Add(8*time.Second)))
			assert.Len(t, got.LostExamples, int(got.Lost))
			assert.Len(t, got.DuplicateExamples, int(got.DuplicateExecutions))
			got.DuplicateExamples = nil
			for _, k := range got.LostExamples {
				assert.Zero(t, r.StartsOf(k), "a lost example never started")
			}
			got.LostExamples = nil
			assert.Equal(t, tt.want, got)
			var lat []int64
			for _, s := range r.Samples() {
				lat = append(lat, s.LatencyUs/1000)
			}
			slices.Sort(lat)
			assert.Equal(t, tt.latencies, lat)
			assert.Equal(t, int64(len(tt.latencies)), r.Trigger().TotalCount())
		})
	}
}

func TestRecorderDispatch(t *testing.T) {
	t.Parallel()
	p, r := setup(t)
	run := func(job int, d time.Time, attempt uint32) *sundialv1.Run {
		return &sundialv1.Run{RunId: p.JobID(job) + "@" + itoa(d.UnixMilli()), JobId: p.JobID(job), Attempt: attempt,
			DueTime: timestamppb.New(d), AttemptDueTime: timestamppb.New(d)}
	}
	r.ObserveDispatch(run(0, due(0, 0), 1), due(0, 0).Add(7*time.Millisecond))
	r.ObserveDispatch(run(0, due(0, 0), 1), due(0, 0).Add(900*time.Millisecond)) // written again
	r.ObserveDispatch(run(0, due(0, 0), 2), due(0, 0).Add(5*time.Second))        // a retry
	r.ObserveDispatch(run(1, t0.Add(-3*time.Second), 1), t0)                     // before the window
	h := r.Dispatch()
	require.Equal(t, int64(1), h.TotalCount())
	assert.InDelta(t, 7000, h.Max(), 10)
	c := r.Result(p.Expected(t0, t0.Add(8*time.Second)))
	assert.Equal(t, int64(8), c.Lost)
	assert.Equal(t, int64(1), c.LostDispatched, "job 0's first run reached Kafka, the others did not")
	assert.Equal(t, int64(1), c.DuplicateDispatches)
	assert.Zero(t, c.DuplicateExecutions, "a run written twice but started never is no duplicate execution")
}

func TestRecorderProgressResets(t *testing.T) {
	t.Parallel()
	p, r := setup(t)
	r.ObserveEvent(started(p, 0, due(0, 0), 1, 1, "r1", 40*time.Millisecond))
	r.ObserveEvent(started(p, 1, due(1, 0), 1, 2, "r1", 40*time.Millisecond))
	pr := r.Progress()
	assert.Equal(t, int64(2), pr.Started)
	assert.Equal(t, int64(2), pr.RecentStarted)
	assert.InDelta(t, 40*time.Millisecond, pr.RecentP95, float64(100*time.Microsecond))
	pr = r.Progress()
	assert.Equal(t, int64(2), pr.Started)
	assert.Zero(t, pr.RecentStarted)
}

func TestRecorderConcurrent(t *testing.T) {
	t.Parallel()
	p, r := setup(t)
	var wg sync.WaitGroup
	for j := range 4 {
		wg.Go(func() {
			for k := range 2 {
				ev := started(p, j, due(j, k), 1, int64(j*2+k+1), "r", time.Millisecond)
				r.ObserveEvent(ev)
				r.ObserveEvent(ev)
				_ = r.Progress()
			}
		})
	}
	wg.Wait()
	c := r.Result(p.Expected(t0, t0.Add(8*time.Second)))
	assert.Equal(t, int64(8), c.StartedInWindow)
	assert.Zero(t, c.Lost)
	assert.Zero(t, c.DuplicateExecutions)
}

// request is one call of a runner to the downstream.
type request struct {
	key, job, token, attempt string
}

func (r request) do(t *testing.T, h http.Handler) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/effect", nil)
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	req.Header.Set("Sundial-Job-Id", r.job)
	req.Header.Set("Sundial-Fencing-Token", r.token)
	req.Header.Set("Sundial-Attempt", cmp.Or(r.attempt, "1"))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// TestDownstream sends requests one after the other: a key already applied
// is answered as a replay and counted as a redelivery, never applied again.
func TestDownstream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		requests []request
		codes    []int
		want     Effects
	}{
		{
			name:     "distinct keys are applied once each",
			requests: []request{{key: "j1@1", job: "j1", token: "1"}, {key: "j1@2", job: "j1", token: "2"}, {key: "j2@1", job: "j2", token: "1"}},
			codes:    []int{http.StatusNoContent, http.StatusNoContent, http.StatusNoContent},
			want:     Effects{Requests: 3, Keys: 3},
		},
		{
			name: "a key sent again after its effect is a redelivery, answered as a replay",
			requests: []request{
				{key: "j1@1", job: "j1", token: "1"},
				{key: "j1@1", job: "j1", token: "2"},               // a later lease ran it again (runner killed before its commit)
				{key: "j1@1", job: "j1", token: "3", attempt: "2"}, // a retry after a lost answer
			},
			codes: []int{http.StatusNoContent, http.StatusOK, http.StatusOK},
			want:  Effects{Requests: 3, Keys: 1, Redeliveries: 2, RedeliveredKeys: 1},
		},
		{
			name: "an older fencing token after a newer one is stale",
			requests: []request{
				{key: "j1@1", job: "j1", token: "3"},
				{key: "j1@2", job: "j1", token: "2"},
				{key: "j2@1", job: "j2", token: "1"},
			},
			codes: []int{http.StatusNoContent, http.StatusNoContent, http.StatusNoContent},
			want:  Effects{Requests: 3, Keys: 3, StaleFencing: 1},
		},
		{
			name:     "a request without a key is refused",
			requests: []request{{job: "j1", token: "1"}},
			codes:    []int{http.StatusBadRequest},
			want:     Effects{MissingKey: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := NewDownstream(DownstreamConfig{EffectDuration: -1})
			var codes []int
			for _, r := range tt.requests {
				w := r.do(t, d)
				codes = append(codes, w.Code)
				assert.Equal(t, w.Code == http.StatusOK, w.Header().Get("Idempotent-Replayed") == "true")
			}
			assert.Equal(t, tt.codes, codes)
			assert.Equal(t, tt.want, d.Effects())
		})
	}
}

// TestDownstreamOverlap holds effects in flight: a request whose key is
// still being applied by another is applied again, a duplicate effect; one
// arriving after the first finished is a replay.
func TestDownstreamOverlap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		second request
		want   Effects
	}{
		{
			name:   "two executions of one attempt at the same time",
			second: request{key: "j1@1", job: "j1", token: "2"},
			want:   Effects{Requests: 3, Keys: 1, DuplicateEffects: 1, DuplicateSameAttempt: 1, Redeliveries: 1, RedeliveredKeys: 1},
		},
		{
			name:   "a retry while the first attempt is still being applied",
			second: request{key: "j1@1", job: "j1", token: "2", attempt: "2"},
			want:   Effects{Requests: 3, Keys: 1, DuplicateEffects: 1, Redeliveries: 1, RedeliveredKeys: 1},
		},
		{
			name:   "another key at the same time is no duplicate",
			second: request{key: "j1@2", job: "j1", token: "2"},
			want:   Effects{Requests: 3, Keys: 2, Redeliveries: 1, RedeliveredKeys: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			entered := make(chan string, 2)
			release := make(chan struct{})
			d := NewDownstream(DownstreamConfig{Effect: func(_ context.Context, key string) {
				entered <- key
				<-release
			}})
			first := request{key: "j1@1", job: "j1", token: "1"}
			var wg sync.WaitGroup
			codes := make([]int, 2)
			wg.Go(func() { codes[0] = first.do(t, d).Code })
			require.Equal(t, "j1@1", <-entered, "the first effect is in flight")
			wg.Go(func() { codes[1] = tt.second.do(t, d).Code })
			require.Equal(t, tt.second.key, <-entered, "the second request applies its effect too")
			close(release)
			wg.Wait()
			assert.Equal(t, []int{http.StatusNoContent, http.StatusNoContent}, codes)
			// Once applied, the key is answered as a replay (a later lease
			// delivering the run again).
			assert.Equal(t, http.StatusOK, request{key: "j1@1", job: "j1", token: "3"}.do(t, d).Code)
			assert.Equal(t, tt.want, d.Effects())
		})
	}
}

func TestRecorderWindowSetAfterTheEvents(t *testing.T) {
	t.Parallel()
	p, err := NewPlan(Workload{Prefix: "lg", Jobs: 4, Rate: 1, Duration: time.Minute, Mix: Mix{Interval: 1}, Target: Target{Handler: "noop"}})
	require.NoError(t, err)
	// The window is not known yet while the warm-up runs arrive.
	r := NewRecorder(p.ParseRunID, t0.Add(-time.Hour), t0.Add(time.Hour))
	r.ObserveEvent(started(p, 0, t0.Add(-4*time.Second), 1, 1, "r1", 20*time.Second)) // warm-up, late
	r.ObserveEvent(started(p, 0, due(0, 0), 1, 2, "r1", 2*time.Millisecond))
	r.SetWindow(t0, t0.Add(8*time.Second))
	h := r.Trigger()
	require.Equal(t, int64(1), h.TotalCount(), "the warm-up run is not in the window set later")
	assert.InDelta(t, 2000, h.Max(), 5)
	c := r.Result(p.Expected(t0, t0.Add(8*time.Second)))
	assert.Equal(t, int64(1), c.StartedDuringWindow)
	assert.Equal(t, int64(7), c.Lost)
	assert.Len(t, c.LostExamples, 7)
}

func TestDownstreamServes(t *testing.T) {
	t.Parallel()
	d := NewDownstream(DownstreamConfig{EffectDuration: time.Millisecond})
	require.NoError(t, d.Start(t.Context(), "127.0.0.1:0"))
	defer d.Stop()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	var codes []int
	for range 2 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.URL(), nil)
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "lg-1@5")
		req.Header.Set("Sundial-Attempt", "1")
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	assert.Equal(t, []int{http.StatusNoContent, http.StatusOK}, codes, "applied, then replayed")
	assert.Equal(t, Effects{Requests: 2, Keys: 1, EffectDurationMs: 1, Redeliveries: 1, RedeliveredKeys: 1}, d.Effects())
	NewDownstream(DownstreamConfig{}).Stop() // safe before Start

	// Stopped twice and started again, it serves again and remembers the
	// keys it applied.
	d.Stop()
	d.Stop()
	require.NoError(t, d.Start(t.Context(), "127.0.0.1:0"))
	require.Error(t, d.Start(t.Context(), "127.0.0.1:0"), "a second Start while serving")
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.URL(), nil)
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "lg-1@5")
	req.Header.Set("Sundial-Attempt", "1")
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "replayed")
	tr.CloseIdleConnections()
	d.Stop()
	d.Stop()
}
