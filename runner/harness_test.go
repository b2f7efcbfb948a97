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
	"github.com/sundialhq/sundial/store"
)

// backends is where a test's Kafka and Redis are.
type backends struct {
	brokers   []string
	names     topics.Names
	redisAddr string
	prefix    string
	real      bool
}

// fakeBackends are in-process: kfake and miniredis, for fast tests.
func fakeBackends(t *testing.T) backends {
	t.Helper()
	names := topics.Names{}
	all := append(names.AllRuns(), names.Events(), names.DLQ(), "out")
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
	for _, name := range append(names.AllRuns(), names.Events(), names.DLQ()) {
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
	redis   *redis.Client
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
	rc := redis.NewClient(&redis.Options{Addr: b.redisAddr})
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
	}
	if mod != nil {
		mod(&cfg)
	}
	r, err := New(cfg)
	require.NoError(h.t, err)
	require.NoError(h.t, r.Start(context.Background()))
	h.runners = append(h.runners, r)
	h.t.Cleanup(r.Stop)
	return r
}

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

// downstream is an HTTP server that counts requests per idempotency key and
// applies each key's effect once, as an idempotent downstream does.
type downstream struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests map[string]int // idempotency key -> requests
	applied  map[string]int // Sundial-Run-Id -> effects applied
	tokens   map[string]int64
	behave   func(r *http.Request, n int) (status int, header http.Header)
	gate     chan struct{} // when set, requests wait on it
	arrived  chan string
}

func newDownstream(t *testing.T) *downstream {
	d := &downstream{requests: map[string]int{}, applied: map[string]int{}, tokens: map[string]int64{}}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *downstream) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	d.mu.Lock()
	d.requests[key]++
	n := d.requests[key]
	behave, gate, arrived := d.behave, d.gate, d.arrived
	d.mu.Unlock()
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
	for k, v := range header {
		w.Header()[k] = v
	}
	if status/100 == 2 {
		d.mu.Lock()
		// The effect is applied once per idempotency key; it is counted
		// per run id, so a wrong key shows up as a duplicate effect.
		if !d.seenApplied(key) {
			d.applied[r.Header.Get("Sundial-Run-Id")]++
			tok, _ := strconv.ParseInt(r.Header.Get("Sundial-Fencing-Token"), 10, 64)
			d.tokens[key] = tok
		}
		d.mu.Unlock()
	}
	w.WriteHeader(status)
}

// seenApplied is called with mu held.
func (d *downstream) seenApplied(key string) bool {
	_, ok := d.tokens[key]
	return ok
}

func (d *downstream) set(behave func(r *http.Request, n int) (int, http.Header)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.behave = behave
}

// counts returns how many run ids had an effect, how many had more than one
// effect, and how many keys were requested more than once.
func (d *downstream) counts() (effects, dupEffects, dupRequests int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range d.applied {
		effects++
		if n > 1 {
			dupEffects++
		}
	}
	for _, n := range d.requests {
		if n > 1 {
			dupRequests++
		}
	}
	return
}

func (d *downstream) requestsOf(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.requests[key]
}

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

// terminal reports how many distinct runs reached a terminal state.
func (l *eventLog) terminal() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, evs := range l.byRun {
		for _, ev := range evs {
			switch ev.GetState() {
			case sundialv1.RunState_RUN_STATE_SUCCEEDED, sundialv1.RunState_RUN_STATE_DEAD,
				sundialv1.RunState_RUN_STATE_SKIPPED, sundialv1.RunState_RUN_STATE_CANCELLED:
				n++
			default:
				continue
			}
			break
		}
	}
	return n
}
