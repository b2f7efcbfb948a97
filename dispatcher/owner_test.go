package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

// The owner goroutine under testing/synctest: the in-memory store, a fake
// producer, and the bubble's fake clock. Time advances only while every
// goroutine waits, so a run acknowledged "at" its due time proves the owner
// fired it from its timer at exactly that instant, and an owner that polled
// would show up as a test that never ends.

// fakeProducer records what the owner produces; fail makes the next n
// produce calls fail.
type fakeProducer struct {
	mu     sync.Mutex
	runs   []producedRun
	events []*sundialv1.RunEvent
	fail   int
}

type producedRun struct {
	run   *sundialv1.Run
	topic string
	at    time.Time
}

var errBrokerDown = errors.New("broker down")

func (p *fakeProducer) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(kgo.ProduceResults, 0, len(rs))
	if len(rs) > 0 && strings.HasSuffix(rs[0].Topic, "sundial.events") {
		// The ENQUEUED events of acknowledged runs, kept apart from the
		// runs; failNext fails the runs' writes only.
		for _, r := range rs {
			ev := &sundialv1.RunEvent{}
			if err := proto.Unmarshal(r.Value, ev); err != nil {
				panic(err)
			}
			p.events = append(p.events, ev)
			out = append(out, kgo.ProduceResult{Record: r})
		}
		return out
	}
	if p.fail > 0 {
		p.fail--
		for _, r := range rs {
			out = append(out, kgo.ProduceResult{Record: r, Err: errBrokerDown})
		}
		return out
	}
	for _, r := range rs {
		run := &sundialv1.Run{}
		if err := proto.Unmarshal(r.Value, run); err != nil {
			panic(err)
		}
		p.runs = append(p.runs, producedRun{run: run, topic: r.Topic, at: time.Now()})
		out = append(out, kgo.ProduceResult{Record: r})
	}
	return out
}

func (p *fakeProducer) of(job string) []producedRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []producedRun
	for _, r := range p.runs {
		if r.run.GetJobId() == job {
			out = append(out, r)
		}
	}
	return out
}

func (p *fakeProducer) allEvents() []*sundialv1.RunEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

func (p *fakeProducer) all() []producedRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.runs)
}

func (p *fakeProducer) failNext(n int) {
	p.mu.Lock()
	p.fail = n
	p.mu.Unlock()
}

// ownerEnv is one shard's owner over the memory store.
type ownerEnv struct {
	t  *testing.T
	st *memory.Store
	// store, if set, is what the owner uses in place of st.
	store Store
	prod  *fakeProducer
	o     *owner
	marks []int64
	mu    sync.Mutex
}

// newOwnerEnv creates a one-shard cluster at the bubble's current time.
func newOwnerEnv(t *testing.T) *ownerEnv {
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	_, err = st.InitCluster(t.Context(), 1)
	require.NoError(t, err)
	return &ownerEnv{t: t, st: st, prod: &fakeProducer{}}
}

// start starts an owner of shard 0.
func (e *ownerEnv) start(mutate ...func(*Config)) {
	e.startWith(e.prod, nil, mutate...)
}

// startWith starts an owner of shard 0 producing to prod; setup, if set,
// sees the owner before it starts.
func (e *ownerEnv) startWith(prod producer, setup func(*owner), mutate ...func(*Config)) {
	cfg := Config{Kafka: []kgo.Opt{kgo.SeedBrokers("unused:9092")}, Store: e.st, InstanceID: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, m := range mutate {
		m(&cfg)
	}
	require.NoError(e.t, cfg.Validate())
	cfg = cfg.withDefaults()
	m, err := newMetrics(prometheus.NewRegistry())
	require.NoError(e.t, err)
	cc, err := e.st.GetClusterConfig(e.t.Context())
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var st Store = e.st
	if e.store != nil {
		st = e.store
	}
	e.o = &owner{
		shard: 0, cfg: cfg, store: st, prod: prod, topics: cfg.Topics, m: m, log: cfg.Logger, created: cc.CreatedAt,
		mark: func(offset int64, _ int32) {
			e.mu.Lock()
			e.marks = append(e.marks, offset)
			e.mu.Unlock()
		},
		wake: make(chan *kgo.Record, 16), cancel: cancel, quit: ctx.Done(), done: make(chan struct{}),
	}
	if setup != nil {
		setup(e.o)
	}
	go e.o.run(ctx)
}

func (e *ownerEnv) register(specs ...*sundialv1.JobSpec) map[string]time.Time {
	first := map[string]time.Time{}
	for _, spec := range specs {
		at := store.Truncate(time.Now())
		sched, errs := jobspec.CompileSchedule(spec.GetSchedule(), at)
		require.Empty(e.t, errs)
		next, ok := jobspec.FirstDue(sched, jobspec.MisfirePolicy(spec.GetSchedule()), jobspec.CatchUpWindow(spec.GetSchedule()), at, at)
		require.True(e.t, ok)
		value, err := proto.Marshal(spec)
		require.NoError(e.t, err)
		_, err = e.st.UpsertJob(e.t.Context(), store.Job{ID: spec.GetId(), Spec: value, Revision: 1, UpdatedAt: at, NextDue: next})
		require.NoError(e.t, err)
		first[spec.GetId()] = store.Truncate(next)
	}
	return first
}

func (e *ownerEnv) wake(offset int64, entry store.DueEntry) {
	value, err := enqueue.Encode(entry)
	require.NoError(e.t, err)
	e.o.wake <- &kgo.Record{Key: []byte(entry.JobID), Value: value, Offset: offset}
}

func (e *ownerEnv) lastMark() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.marks) == 0 {
		return -1
	}
	return e.marks[len(e.marks)-1]
}

func dues(runs []producedRun) []time.Time {
	var out []time.Time
	for _, r := range runs {
		out = append(out, r.run.GetDueTime().AsTime())
	}
	return out
}

func TestOwnerFiresAtDueTimeFromMemory(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newOwnerEnv(t)
		start := time.Now()
		first := e.register(
			jobSpec("every2s", intervalSchedule(2*time.Second, 0)),
			jobSpec("cron5s", cronSchedule("*/5 * * * * *", "Europe/Berlin")),
			jobSpec("at", atSchedule(start.Add(90*time.Second+250*time.Millisecond))),
		)
		e.start()
		time.Sleep(3 * time.Minute)
		e.o.stop(false)

		every := e.prod.of("every2s")
		require.Len(t, dues(every), 91, "every 2s from 00:00:00 to 00:03:00")
		for i, r := range every {
			due := first["every2s"].Add(time.Duration(i) * 2 * time.Second)
			assert.Equal(t, store.RunID("every2s", due), r.run.GetRunId())
			assert.True(t, r.at.Equal(due), "run %s acknowledged at %s, due %s", r.run.GetRunId(), r.at, due)
			assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_SCHEDULE, r.run.GetOrigin())
			assert.Equal(t, int64(1), r.run.GetEpoch())
		}
		assert.Len(t, dues(e.prod.of("cron5s")), 37, "every 5 s from 00:00:00 to 00:03:00")
		at := e.prod.of("at")
		require.Len(t, at, 1)
		assert.True(t, at[0].at.Equal(start.Add(90*time.Second+250*time.Millisecond)))
		assert.Equal(t, "sundial.runs.default", at[0].topic)

		// The watermark followed; the buckets behind it are deleted.
		sh, err := e.st.GetShard(t.Context(), 0)
		require.NoError(t, err)
		assert.True(t, sh.Watermark.After(start.Add(3*time.Minute-2*time.Second)), "watermark %s", sh.Watermark)
		n := 0
		for _, err := range e.st.ListBucket(t.Context(), store.BucketOf(start), 0) {
			require.NoError(t, err)
			n++
		}
		assert.Zero(t, n, "the first bucket is behind the watermark and deleted")
	})
}

func TestOwnerWakeupsFireOnTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newOwnerEnv(t)
		e.start()
		time.Sleep(5 * time.Second) // the bucket of now is read
		now := time.Now()
		retry := &sundialv1.Run{RunId: "r@946684800000", JobId: "r", Attempt: 2, Origin: sundialv1.RunOrigin_RUN_ORIGIN_RETRY}
		payload, err := proto.Marshal(retry)
		require.NoError(t, err)
		soon := store.DueEntry{Due: now.Add(1500 * time.Millisecond), JobID: "r", Kind: store.KindRetry, RunID: retry.RunId, Attempt: 2, Payload: payload}
		past := store.DueEntry{Due: now.Add(-time.Hour), JobID: "p", Kind: store.KindRetry, RunID: "p@1", Attempt: 4, Payload: payload}
		later := store.DueEntry{Due: now.Add(5 * time.Minute), JobID: "l", Kind: store.KindRetry, RunID: "l@1", Attempt: 2, Payload: payload}
		e.wake(10, soon)
		e.wake(11, past)
		e.wake(12, later)
		synctest.Wait()
		require.Len(t, e.prod.all(), 1, "the overdue entry fires at once")
		assert.True(t, e.prod.all()[0].at.Equal(now))
		assert.Equal(t, int64(10), e.lastMark(), "offset 10 waits for its entry; 11 fired, 12 lies beyond the window")

		time.Sleep(time.Until(soon.Due))
		synctest.Wait()
		require.Len(t, e.prod.all(), 2)
		assert.True(t, e.prod.all()[1].at.Equal(soon.Due), "acknowledged at %s, due %s", e.prod.all()[1].at, soon.Due)
		assert.Equal(t, uint32(2), e.prod.all()[1].run.GetAttempt())
		assert.Equal(t, int64(13), e.lastMark())

		e.o.wake <- &kgo.Record{Value: []byte{0xff}, Offset: 13} // does not decode
		synctest.Wait()
		assert.Equal(t, int64(14), e.lastMark())
		assert.Equal(t, 1.0, testutil.ToFloat64(e.o.m.wakeups.WithLabelValues("invalid")), "the bad wake-up is counted")
		// The wake-up behind the bad one still fires.
		overdue := store.DueEntry{Due: time.Now().Add(-time.Minute), JobID: "o", Kind: store.KindRetry, RunID: "o@1", Attempt: 2, Payload: payload}
		e.wake(14, overdue)
		synctest.Wait()
		require.Len(t, e.prod.all(), 3)
		assert.Equal(t, int64(15), e.lastMark())
		e.o.stop(false)
	})
}

func TestOwnerRetriesFailedFiringAndHoldsWatermark(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newOwnerEnv(t)
		start := time.Now()
		due := start.Add(20 * time.Second)
		e.register(jobSpec("once", atSchedule(due)))
		e.start()
		time.Sleep(time.Until(due) - time.Millisecond)
		e.prod.failNext(3)
		// The retries end 700ms after the due time; the next advance of
		// the watermark follows within an interval.
		time.Sleep(time.Second + DefaultWatermarkInterval)
		runs := e.prod.of("once")
		require.Len(t, runs, 1)
		// Backoff 100ms, 200ms, 400ms after the first failure at the due time.
		assert.Equal(t, 700*time.Millisecond, runs[0].at.Sub(due))
		sh, err := e.st.GetShard(t.Context(), 0)
		require.NoError(t, err)
		assert.True(t, sh.Watermark.After(due), "watermark %s passes the fired entry", sh.Watermark)
		e.o.stop(false)
	})
}

// unwritableStore fails every PutDue until until.
type unwritableStore struct {
	Store
	mu    sync.Mutex
	until time.Time
}

func (s *unwritableStore) downUntil(t time.Time) {
	s.mu.Lock()
	s.until = t
	s.mu.Unlock()
}

var errStoreDown = errors.New("store unavailable")

func (s *unwritableStore) PutDue(ctx context.Context, entries ...store.DueEntry) error {
	s.mu.Lock()
	down := time.Now().Before(s.until)
	s.mu.Unlock()
	if down {
		return errStoreDown
	}
	return s.Store.PutDue(ctx, entries...)
}

// TestOwnerKeepsStoringNextAfterTheRunIsOut: a run is out, and its next
// occurrence cannot be stored for longer than FireTimeout. The firing keeps
// trying to store it rather than failing and producing the run again on
// every retry: no run is emitted twice, and the chain goes on once the
// store is back.
func TestOwnerKeepsStoringNextAfterTheRunIsOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newOwnerEnv(t)
		start := time.Now()
		down := &unwritableStore{Store: e.st}
		e.store = down
		first := e.register(jobSpec("every2s", intervalSchedule(2*time.Second, 0)))
		var logs bytes.Buffer // the handler serializes its writes
		e.start(func(c *Config) {
			c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		})
		// The store goes away just before an occurrence, for three fire
		// timeouts.
		outage := first["every2s"].Add(10 * time.Second)
		time.Sleep(time.Until(outage.Add(-time.Millisecond)))
		back := outage.Add(3 * DefaultFireTimeout)
		down.downUntil(back)
		time.Sleep(time.Until(start.Add(time.Minute)))
		e.o.stop(false)

		seen := map[string]int{}
		for _, r := range e.prod.of("every2s") {
			seen[r.run.GetRunId()]++
		}
		for id, n := range seen {
			assert.Equal(t, 1, n, "run %s emitted %d times", id, n)
		}
		require.Contains(t, seen, store.RunID("every2s", outage), "the run due as the store went away")
		last := first["every2s"]
		for _, r := range e.prod.of("every2s") {
			last = maxTime(last, r.run.GetDueTime().AsTime())
		}
		assert.True(t, last.After(back), "the chain goes on after the outage (last run due %s, store back at %s)", last, back)

		// One warning for the firing, however many tries: with thousands
		// of firings in flight, a warning per try flooded the logs.
		var warned, tries int
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "cannot store next occurrence") {
				tries++
				if strings.Contains(line, "level=WARN") {
					warned++
				}
			}
		}
		assert.Greater(t, tries, 1, "the write is tried again while the store is down")
		assert.Equal(t, 1, warned, "warnings of the one firing that could not store its next occurrence")
	})
}

func TestOwnerStopsOnStaleEpoch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newOwnerEnv(t)
		e.register(jobSpec("tick", intervalSchedule(time.Second, 0)))
		e.start()
		time.Sleep(5 * time.Second)
		fired := len(e.prod.of("tick"))
		require.NotZero(t, fired)
		// Another dispatcher claims the shard.
		sh, err := e.st.GetShard(t.Context(), 0)
		require.NoError(t, err)
		_, err = e.st.ClaimShard(t.Context(), 0, "usurper", sh.Epoch)
		require.NoError(t, err)
		select {
		case <-e.o.done:
		case <-time.After(DefaultWatermarkInterval + 2*time.Second):
			t.Fatal("owner kept dispatching a shard claimed by a newer epoch")
		}
		stoppedAt := len(e.prod.of("tick"))
		// The job fires every second; the owner notices the claim at its
		// next advance.
		assert.LessOrEqual(t, stoppedAt-fired, int(DefaultWatermarkInterval/time.Second)+1, "at most one watermark interval of firings after the claim")
		time.Sleep(10 * time.Second)
		assert.Len(t, e.prod.of("tick"), stoppedAt)
		e.o.stop(false)
	})
}

// TestOwnerCatchUp leaves a shard without owner for ten minutes and checks
// each misfire policy when a new owner takes it over.
func TestOwnerCatchUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newOwnerEnv(t)
		specs := map[string]sundialv1.MisfirePolicy{
			"once": sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ONCE,
			"all":  sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ALL,
			"skip": sundialv1.MisfirePolicy_MISFIRE_POLICY_SKIP,
		}
		for name, p := range specs {
			sched := intervalSchedule(time.Minute, 0)
			sched.MisfirePolicy = p
			e.register(jobSpec(name, sched))
			// A job whose catch-up window (3m15s before the restart at
			// 00:12:30) holds only the last 3 of the missed occurrences.
			narrow := intervalSchedule(time.Minute, 0)
			narrow.MisfirePolicy = p
			narrow.CatchUpWindow = durationpb.New(3*time.Minute + 15*time.Second)
			e.register(jobSpec(name+"-narrow", narrow))
		}
		start := time.Now().UTC()
		e.start()
		time.Sleep(2*time.Minute + 30*time.Second)
		e.o.stop(false) // a clean stop: the watermark is saved
		before := map[string]int{}
		for name := range specs {
			before[name] = len(e.prod.of(name))
			require.Equal(t, 3, before[name], "%s fired at 00:00, 00:01 and 00:02", name)
		}

		time.Sleep(10 * time.Minute) // nobody owns the shard
		restart := time.Now()
		e.start()
		synctest.Wait()
		minute := func(m int) time.Time { return start.Add(time.Duration(m) * time.Minute) }
		// Missed: 00:03 ... 00:12 (the restart is at 00:12:30).
		for name := range specs {
			for _, job := range []string{name, name + "-narrow"} {
				got := dues(e.prod.of(job))[min(before[name], len(e.prod.of(job))):]
				for _, r := range e.prod.of(job)[before[name]:] {
					assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_CATCH_UP, r.run.GetOrigin(), "%s %s", job, r.run.GetRunId())
					assert.True(t, r.at.Equal(restart), "catch-up of %s fires at once", job)
				}
				var want []time.Time
				switch {
				case name == "once":
					want = []time.Time{minute(12)}
				case name == "all" && job == "all":
					for m := 3; m <= 12; m++ {
						want = append(want, minute(m))
					}
				case name == "all":
					want = []time.Time{minute(10), minute(11), minute(12)} // after 00:09:15
				}
				if want == nil {
					assert.Empty(t, got, "%s", job)
				} else {
					assert.Equal(t, want, got, "%s", job)
				}
			}
		}
		// Back on schedule: 00:13 fires on time for every job.
		time.Sleep(time.Until(minute(13)) + time.Millisecond)
		for name := range specs {
			runs := e.prod.of(name)
			last := runs[len(runs)-1]
			assert.True(t, last.run.GetDueTime().AsTime().Equal(minute(13)), "%s resumes at 00:13: %v", name, dues(runs))
			assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_SCHEDULE, last.run.GetOrigin())
			assert.Equal(t, int64(2), last.run.GetEpoch(), "the second claim")
		}
		e.o.stop(false)
	})
}

// TestOwnerCatchUpCapped: a FIRE_ALL job missing ten occurrences with
// MaxMissedRuns 3 fires them all in rounds of three, each once, all as
// catch-up, and then continues on schedule.
func TestOwnerCatchUpCapped(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newOwnerEnv(t)
		sched := intervalSchedule(time.Minute, 0)
		sched.MisfirePolicy = sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ALL
		e.register(jobSpec("all", sched))
		start := time.Now().UTC()
		capped := func(c *Config) { c.MaxMissedRuns = 3 }
		e.start(capped)
		time.Sleep(30 * time.Second)
		e.o.stop(false)
		require.Len(t, e.prod.of("all"), 1, "00:00 fired")

		time.Sleep(10 * time.Minute) // 00:01 ... 00:10 missed
		restart := time.Now()
		e.start(capped)
		synctest.Wait()
		var got []time.Time
		for _, r := range e.prod.of("all")[1:] {
			got = append(got, r.run.GetDueTime().AsTime())
			assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_CATCH_UP, r.run.GetOrigin())
			assert.True(t, r.at.Equal(restart))
		}
		var want []time.Time
		for m := 1; m <= 10; m++ {
			want = append(want, start.Add(time.Duration(m)*time.Minute))
		}
		assert.Equal(t, want, got)
		time.Sleep(time.Until(start.Add(11*time.Minute)) + time.Millisecond)
		last := e.prod.of("all")[len(e.prod.of("all"))-1]
		assert.True(t, last.run.GetDueTime().AsTime().Equal(start.Add(11*time.Minute)))
		assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_SCHEDULE, last.run.GetOrigin())
		e.o.stop(false)
	})
}

// TestOwnerEmitsEnqueuedForEveryRun: each run the dispatcher writes is
// followed by its ENQUEUED event (event.proto: "emitted by the process that
// writes the run"), carrying the run's due time and, as its time, the
// instant the run was dispatched, so a run's history explains its timing
// from the dispatcher on.
func TestOwnerEmitsEnqueuedForEveryRun(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newOwnerEnv(t)
		e.register(jobSpec("every2s", intervalSchedule(2*time.Second, 0)))
		e.start()
		time.Sleep(20 * time.Second)
		e.o.stop(false)

		runs := e.prod.of("every2s")
		require.NotEmpty(t, runs)
		byRun := map[string]*sundialv1.RunEvent{}
		for _, ev := range e.prod.allEvents() {
			require.Equal(t, sundialv1.RunState_RUN_STATE_ENQUEUED, ev.GetState())
			require.NotContains(t, byRun, ev.GetRunId(), "one ENQUEUED per run")
			byRun[ev.GetRunId()] = ev
		}
		require.Len(t, byRun, len(runs))
		for _, r := range runs {
			ev := byRun[r.run.GetRunId()]
			require.NotNil(t, ev, "run %s has no ENQUEUED event", r.run.GetRunId())
			assert.Equal(t, r.run.GetAttempt(), ev.GetAttempt())
			assert.True(t, proto.Equal(r.run.GetDueTime(), ev.GetDueTime()))
			assert.True(t, proto.Equal(r.run.GetAttemptDueTime(), ev.GetAttemptDueTime()))
			assert.True(t, proto.Equal(r.run.GetDispatchedAt(), ev.GetTime()), "the event's time is the run's dispatched_at")
			assert.Equal(t, "dispatcher/test", ev.GetRunnerId())
		}
	})
}

// TestOwnerSplaysScheduledRuns: a job with a splay fires each run at its
// due time plus jobspec.Splay of its run id, keeping the schedule's due
// time (and run id); the attempt is due at the splayed instant. A second
// owner of the shard (a take-over) fires the same runs at the same instants.
func TestOwnerSplaysScheduledRuns(t *testing.T) {
	t.Parallel()
	const window = 50 * time.Second
	fire := func(t *testing.T) map[string]time.Time {
		e := newOwnerEnv(t)
		spec := jobSpec("herd", intervalSchedule(time.Minute, 0))
		spec.Splay = durationpb.New(window)
		first := e.register(spec, jobSpec("plain", intervalSchedule(time.Minute, 0)))
		e.start()
		time.Sleep(5*time.Minute + 55*time.Second)
		e.o.stop(false)

		runs := e.prod.of("herd")
		require.Len(t, runs, 6)
		at := map[string]time.Time{}
		splayed := 0
		for i, r := range runs {
			due := first["herd"].Add(time.Duration(i) * time.Minute)
			id := store.RunID("herd", due)
			offset := jobspec.Splay(id, window)
			if offset > 0 {
				splayed++
			}
			assert.Equal(t, id, r.run.GetRunId())
			assert.True(t, r.run.GetDueTime().AsTime().Equal(due), "the run keeps the schedule's due time")
			assert.True(t, r.at.Equal(due.Add(offset)), "run %s fired at %s, want due %s + %s", id, r.at, due, offset)
			assert.True(t, r.run.GetAttemptDueTime().AsTime().Equal(due.Add(offset)), "its attempt is due at the splayed instant")
			at[id] = r.at
		}
		assert.Positive(t, splayed, "some run of six is splayed")
		for i, r := range e.prod.of("plain") {
			assert.True(t, r.at.Equal(first["plain"].Add(time.Duration(i)*time.Minute)), "a job without splay fires at its due time")
		}
		return at
	}
	var a, b map[string]time.Time
	synctest.Test(t, func(t *testing.T) { a = fire(t) })
	synctest.Test(t, func(t *testing.T) { b = fire(t) })
	assert.Equal(t, a, b, "another owner fires each run at the same instant")
}
