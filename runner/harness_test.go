package runner

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/egress"
	"github.com/sundialhq/sundial/store"
)

// backends is where a test's Kafka and Redis are.
type backends struct {
	brokers   []string
	names     topics.Names
	redisAddr string
	// redisCluster, when set, are the nodes of a Redis Cluster; redisAddr
	// is unused.
	redisCluster []string
	prefix       string
	real         bool
}

// fakeBackends are in-process: kfake and miniredis, for fast tests.
func fakeBackends(t *testing.T) backends {
	t.Helper()
	names := topics.Names{}
	all := append(names.AllRuns(), names.Events(), names.DLQ(), names.Executors(), "out")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, all...))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	mr := miniredis.RunT(t)
	mr.ClockTTL(true)
	return backends{brokers: c.ListenAddrs(), names: names, redisAddr: mr.Addr(), prefix: "t:"}
}

// realBackends are the local stack's Kafka and Redis, with topics of the
// test's own prefix.
func realBackends(t *testing.T, partitions int32) backends {
	t.Helper()
	k := testenv.NeedKafka(t)
	rd := testenv.NeedRedis(t)
	names := topics.Names{Prefix: k.TopicPrefix}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var specs []topics.Spec
	for _, name := range append(names.AllRuns(), names.Events(), names.DLQ(), names.Executors()) {
		specs = append(specs, topics.Spec{Name: name, Partitions: partitions})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = topics.Ensure(ctx, adm, specs, 1)
	require.NoError(t, err)
	return backends{brokers: k.Brokers, names: names, redisAddr: rd.Addr, prefix: rd.KeyPrefix, real: true}
}

// harness is a set of runners over one pair of backends.
type harness struct {
	t       *testing.T
	b       backends
	redis   redis.UniversalClient
	leases  *leasing.Store
	enq     *fakeEnqueuer
	down    *downstream
	client  *kgo.Client
	events  *eventLog
	group   string
	runners []*Runner
}

// steadyTTL is the lease TTL of tests that never wait for a lease to expire:
// the default, as in production. A loaded machine can hold a renewal back
// by hundreds of milliseconds, and with a TTL of a second that loses the
// lease, which the runner rightly turns into a retry these tests do not
// expect.
const steadyTTL = leasing.DefaultTTL

func newHarness(t *testing.T, b backends, leaseTTL time.Duration) *harness {
	t.Helper()
	var rc redis.UniversalClient
	if len(b.redisCluster) > 0 {
		rc = redis.NewClusterClient(&redis.ClusterOptions{Addrs: b.redisCluster})
	} else {
		rc = redis.NewClient(&redis.Options{Addr: b.redisAddr})
	}
	t.Cleanup(func() { _ = rc.Close() })
	ls, err := leasing.New(leasing.Config{Client: rc, KeyPrefix: b.prefix + "lease:", TTL: leaseTTL})
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.ProducerLinger(time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	h := &harness{t: t, b: b, redis: rc, leases: ls, client: cl, group: "runners-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	h.enq = newFakeEnqueuer(cl, b.names)
	t.Cleanup(h.enq.Close)
	h.down = newDownstream(t)
	h.events = newEventLog(t, b)
	return h
}

// start starts a runner with cfg changed by mod.
func (h *harness) start(mod func(*Config)) *Runner {
	h.t.Helper()
	r := h.newRunner(mod)
	require.NoError(h.t, r.Start(context.Background()))
	return r
}

// newRunner returns a runner with cfg changed by mod, not started; Cleanup
// stops it.
func (h *harness) newRunner(mod func(*Config)) *Runner {
	h.t.Helper()
	cfg := Config{
		ID:             "runner-" + strconv.Itoa(len(h.runners)),
		Kafka:          []kgo.Opt{kgo.SeedBrokers(h.b.brokers...)},
		Topics:         h.b.names,
		Group:          h.group,
		Leases:         h.leases,
		Redis:          h.redis,
		KeyPrefix:      h.b.prefix + "runner:",
		Enqueuer:       h.enq,
		Concurrency:    16,
		CommitInterval: 100 * time.Millisecond,
		HeldRetry:      50 * time.Millisecond,
		Registerer:     prometheus.NewRegistry(),
		Jitter:         func(string, uint32) float64 { return 0.5 },
		Egress:         loopbackEgress(),
		// The tests tell executions by their STARTED events: each is
		// produced as its attempt starts (events_test.go covers the
		// default, which holds it back).
		StartedDelay: -1,
	}
	if mod != nil {
		mod(&cfg)
	}
	r, err := New(cfg)
	require.NoError(h.t, err)
	h.runners = append(h.runners, r)
	h.t.Cleanup(r.Stop)
	return r
}

// loopbackEgress lets every team reach the loopback addresses the tests'
// downstreams listen on.
func loopbackEgress() egress.Config { return egress.LoopbackForEveryTeam() }

// run returns a run of job due at due with an HTTP target on the harness's
// downstream.
func (h *harness) run(job string, due time.Time, mod func(*sundialv1.Run)) *sundialv1.Run {
	due = store.Truncate(due)
	r := &sundialv1.Run{
		RunId: store.RunID(job, due), JobId: job, DueTime: timestamppb.New(due), AttemptDueTime: timestamppb.New(due),
		Attempt: 1, Priority: sundialv1.Priority_PRIORITY_DEFAULT, Origin: sundialv1.RunOrigin_RUN_ORIGIN_SCHEDULE,
		Target:  &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{Url: h.down.srv.URL + "/" + job}}},
		Timeout: durationpb.New(10 * time.Second),
		Retry:   &sundialv1.RetryPolicy{MaxAttempts: 3, InitialBackoff: durationpb.New(20 * time.Millisecond), MaxBackoff: durationpb.New(100 * time.Millisecond)},
	}
	if mod != nil {
		mod(r)
	}
	return r
}

// produce writes runs to their priority topics.
func (h *harness) produce(runs ...*sundialv1.Run) {
	h.t.Helper()
	produceRuns(h.t, h.client, h.b.names, runs...)
}

func produceRuns(t testing.TB, cl *kgo.Client, names topics.Names, runs ...*sundialv1.Run) {
	t.Helper()
	recs := make([]*kgo.Record, 0, len(runs))
	for _, r := range runs {
		val, err := proto.Marshal(r)
		require.NoError(t, err)
		recs = append(recs, &kgo.Record{Topic: names.Runs(topicPriority(r.GetPriority())), Key: []byte(r.GetJobId()), Value: val})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

func topicPriority(p sundialv1.Priority) topics.Priority {
	switch p {
	case sundialv1.Priority_PRIORITY_HIGH:
		return topics.PriorityHigh
	case sundialv1.Priority_PRIORITY_LOW:
		return topics.PriorityLow
	}
	return topics.PriorityDefault
}

// fakeEnqueuer stands in for package enqueue and the dispatcher: it records
// every entry and, at its due time, produces the Run in its payload to the
// runs topic, as the dispatcher would.
type fakeEnqueuer struct {
	cl    *kgo.Client
	names topics.Names
	// ctx ends at Close; until then a due run is produced however long it
	// takes, as the dispatcher keeps a due entry until its run is out.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	entries []store.DueEntry
	timers  []*time.Timer
	closed  bool
	wg      sync.WaitGroup
	fail    int // fail the next n calls
}

func newFakeEnqueuer(cl *kgo.Client, names topics.Names) *fakeEnqueuer {
	ctx, cancel := context.WithCancel(context.Background())
	return &fakeEnqueuer{cl: cl, names: names, ctx: ctx, cancel: cancel}
}

func (f *fakeEnqueuer) Enqueue(_ context.Context, entries ...store.DueEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return io.ErrUnexpectedEOF
	}
	for _, e := range entries {
		if err := e.Validate(); err != nil {
			return err
		}
		f.entries = append(f.entries, e)
		if f.closed {
			continue
		}
		payload := e.Payload
		f.wg.Add(1)
		f.timers = append(f.timers, time.AfterFunc(time.Until(e.Due), func() {
			defer f.wg.Done()
			run := &sundialv1.Run{}
			if proto.Unmarshal(payload, run) != nil {
				return
			}
			val, _ := proto.Marshal(run)
			rec := &kgo.Record{Topic: f.names.Runs(topicPriority(run.GetPriority())), Key: []byte(run.GetJobId()), Value: val}
			for f.ctx.Err() == nil {
				if f.cl.ProduceSync(f.ctx, rec).FirstErr() == nil {
					return
				}
				select {
				case <-f.ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}))
	}
	return nil
}

func (f *fakeEnqueuer) Entries() []store.DueEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]store.DueEntry(nil), f.entries...)
}

func (f *fakeEnqueuer) Close() {
	f.cancel()
	f.mu.Lock()
	f.closed = true
	for _, t := range f.timers {
		if t.Stop() {
			f.wg.Done()
		}
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// downstream is an HTTP server that models a downstream which honours the
// Idempotency-Key header, as DESIGN asks of Sundial's downstreams, and
// counts what it sees.
//
// Applying an effect takes applyFor. A request whose key was already applied
// is answered as a replay (2xx) without applying the effect again, and
// counted as a redelivery. A request whose key is being applied by another
// request at that moment (two executions of one run at the same time, what
// leases and fencing must prevent) is not protected by the key: it applies
// the effect again, and the run counts as a duplicate effect. Effects are
// counted per Sundial-Run-Id, so a key other than the run id shows up as a
// duplicate effect too. A request whose fencing token is smaller than one
// already seen for its key (an older holder acting after a newer one) is
// counted as stale.
type downstream struct {
	srv *httptest.Server
	// applyFor is how long applying an effect takes; set before the first
	// request.
	applyFor time.Duration
	// applyGate, when set before the first request, holds every effect
	// being applied until it is closed, instead of applyFor.
	applyGate chan struct{}

	mu         sync.Mutex
	requests   map[string]int   // idempotency key -> requests
	applied    map[string]int   // Sundial-Run-Id -> effects applied
	applying   map[string]int   // idempotency key -> effects being applied now
	done       map[string]bool  // idempotency key -> an effect completed
	maxToken   map[string]int64 // idempotency key -> largest fencing token seen
	replays    int              // requests answered as replays of an applied key
	stale      int              // requests with a fencing token smaller than one seen before for the key
	inflight   map[string]int   // X-Test-Runner header -> requests being served
	behave     func(r *http.Request, n int) (status int, header http.Header)
	gate       chan struct{} // when set, requests wait on it
	arrived    chan string
	onResponse func(key string, status int) // when set, called after each response is decided
}

// downstreamApply is the default time an effect takes to apply: long enough
// that two executions of one run at the same time overlap in it.
const downstreamApply = 5 * time.Millisecond

func newDownstream(t *testing.T) *downstream {
	d := &downstream{
		applyFor: downstreamApply,
		requests: map[string]int{}, applied: map[string]int{}, applying: map[string]int{},
		done: map[string]bool{}, maxToken: map[string]int64{}, inflight: map[string]int{},
	}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *downstream) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	tok, _ := strconv.ParseInt(r.Header.Get("Sundial-Fencing-Token"), 10, 64)
	who := r.Header.Get(testRunnerHeader)
	d.mu.Lock()
	d.requests[key]++
	n := d.requests[key]
	if tok < d.maxToken[key] {
		d.stale++
	}
	d.maxToken[key] = max(d.maxToken[key], tok)
	d.inflight[who]++
	behave, gate, arrived, onResponse, applyFor := d.behave, d.gate, d.arrived, d.onResponse, d.applyFor
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.inflight[who]--
		d.mu.Unlock()
	}()
	if arrived != nil {
		select {
		case arrived <- key:
		default:
		}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
		}
	}
	status, header := http.StatusOK, http.Header(nil)
	if behave != nil {
		status, header = behave(r, n)
	}
	if status/100 == 2 {
		d.apply(key, r.Header.Get("Sundial-Run-Id"), applyFor)
	}
	if onResponse != nil {
		onResponse(key, status)
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
}

// apply applies the effect of key unless it was applied before. Once begun,
// an effect completes even if the caller goes away, as a downstream's does.
func (d *downstream) apply(key, runID string, applyFor time.Duration) {
	d.mu.Lock()
	if d.done[key] {
		d.replays++
		d.mu.Unlock()
		return
	}
	// Not applied yet; if another request is applying it right now, the
	// key cannot help and this one applies it again.
	d.applying[key]++
	d.applied[runID]++
	d.mu.Unlock()
	switch {
	case d.applyGate != nil:
		<-d.applyGate
	case applyFor > 0:
		time.Sleep(applyFor) // the simulated work of the effect
	}
	d.mu.Lock()
	d.applying[key]--
	d.done[key] = true
	d.mu.Unlock()
}

func (d *downstream) set(behave func(r *http.Request, n int) (int, http.Header)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.behave = behave
}

// counts returns how many run ids had an effect, how many had more than one
// effect, and how many keys were requested more than once.
func (d *downstream) counts() (effects, dupEffects, dupRequests int) {
	f := d.figures()
	return f.effects, f.dupEffects, f.dupRequests
}

// downstreamFigures is what the downstream counted.
type downstreamFigures struct {
	requests    int // requests received
	effects     int // run ids whose effect was applied
	dupEffects  int // run ids whose effect was applied more than once
	dupRequests int // keys requested more than once
	redelivered int // requests answered as replays of an applied key
	stale       int // requests with a stale fencing token
}

func (d *downstream) figures() downstreamFigures {
	d.mu.Lock()
	defer d.mu.Unlock()
	var f downstreamFigures
	for _, n := range d.applied {
		f.effects++
		if n > 1 {
			f.dupEffects++
		}
	}
	for _, n := range d.requests {
		f.requests += n
		if n > 1 {
			f.dupRequests++
		}
	}
	f.redelivered, f.stale = d.replays, d.stale
	return f
}

func (f downstreamFigures) String() string {
	return fmt.Sprintf("requests %d, effects %d, duplicate effects %d, redeliveries answered as replays %d, keys requested more than once %d, stale fencing tokens %d",
		f.requests, f.effects, f.dupEffects, f.redelivered, f.dupRequests, f.stale)
}

func (d *downstream) requestsOf(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.requests[key]
}

// inFlightOf is how many requests carrying X-Test-Runner: who are being
// served.
func (d *downstream) inFlightOf(who string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inflight[who]
}

// testRunnerHeader names the runner process that sent a request; the runner
// processes of TestRunnerProcessKilled add it.
const testRunnerHeader = "X-Test-Runner"

// eventLog reads the events topic from the start, in the background.
type eventLog struct {
	mu     sync.Mutex
	events []*sundialv1.RunEvent
	byRun  map[string][]*sundialv1.RunEvent
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func newEventLog(t *testing.T, b backends) *eventLog {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.ConsumeTopics(b.names.Events()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	l := &eventLog{byRun: map[string][]*sundialv1.RunEvent{}, cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				ev := &sundialv1.RunEvent{}
				if proto.Unmarshal(r.Value, ev) != nil {
					return
				}
				l.mu.Lock()
				l.events = append(l.events, ev)
				l.byRun[ev.GetRunId()] = append(l.byRun[ev.GetRunId()], ev)
				l.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-l.done
		cl.Close()
	})
	return l
}

// states returns the states of run's events in the order they arrived.
func (l *eventLog) states(runID string) []sundialv1.RunState {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sundialv1.RunState
	for _, ev := range l.byRun[runID] {
		out = append(out, ev.GetState())
	}
	return out
}

// describe lists run's events with their error codes and reasons, for
// failure messages.
func (l *eventLog) describe(runID string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, ev := range l.byRun[runID] {
		fmt.Fprintf(&b, "[attempt %d %s", ev.GetAttempt(), ev.GetState())
		if c := ev.GetError().GetCode(); c != "" {
			fmt.Fprintf(&b, " %s: %s", c, ev.GetError().GetMessage())
		}
		if ev.GetReason() != "" {
			fmt.Fprintf(&b, " reason %s", ev.GetReason())
		}
		b.WriteString("] ")
	}
	return b.String()
}

// count returns how many events are in state.
func (l *eventLog) count(state sundialv1.RunState) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ev := range l.events {
		if ev.GetState() == state {
			n++
		}
	}
	return n
}

// all returns a copy of every event so far.
func (l *eventLog) all() []*sundialv1.RunEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*sundialv1.RunEvent(nil), l.events...)
}

// timeline is an ordered log of what a test's downstream and runner did.
type timeline struct {
	mu      sync.Mutex
	start   time.Time
	entries []timelineEntry
}

type timelineEntry struct {
	at   time.Duration
	kind string // "call" or "breaker"
	what string
}

func newTimeline() *timeline { return &timeline{start: time.Now()} }

func (tl *timeline) add(kind, what string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.entries = append(tl.entries, timelineEntry{at: time.Since(tl.start), kind: kind, what: what})
}

func (tl *timeline) all() []timelineEntry {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]timelineEntry(nil), tl.entries...)
}

func (tl *timeline) String() string {
	var b strings.Builder
	for _, e := range tl.all() {
		fmt.Fprintf(&b, "\n  %8s  %-7s %s", e.at.Round(time.Millisecond), e.kind, e.what)
	}
	return b.String()
}
