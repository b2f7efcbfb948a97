package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
)

// stack is one integration test's namespace on the real Kafka and
// Cassandra: its own topics (with S partitions for sundial.shards) and its
// own migrated keyspace.
type stack struct {
	t      *testing.T
	shards int
	names  topics.Names
	kafka  testenv.Kafka
	// cassandra is the test's keyspace, for dispatcher processes.
	cassandra testenv.Cassandra
	store     *cassandra.Store
	// producer is a client with enqueue's partitioner, for wake-ups.
	producer *kgo.Client
	enqueuer *enqueue.Enqueuer
	runs     *runLog
	latency  *latencies
	// logLevel is the dispatchers' log level (Info unless a test needs
	// the Debug lines of dropped entries).
	logLevel slog.Level
}

// migrateMu makes the package's tests create their keyspaces one at a time.
var migrateMu sync.Mutex

func newStack(t *testing.T, shards int) *stack {
	t.Helper()
	return newStackOn(t, shards, testenv.NeedKafka(t), testenv.NeedCassandra(t), stackReplication{kafka: 1})
}

// stackReplication is how many copies a stack keeps: of its topics (-1: the
// brokers' default) and of its keyspace (0: the store's default, 1); and
// whether the Cassandra nodes share one address (the local cluster).
type stackReplication struct {
	kafka         int16
	cassandra     int
	sharedAddress bool
}

// newStackOn is newStack on the given Kafka and Cassandra.
func newStackOn(t *testing.T, shards int, k testenv.Kafka, c testenv.Cassandra, rep stackReplication) *stack {
	t.Helper()
	s := &stack{t: t, shards: shards, names: topics.Names{Prefix: k.TopicPrefix}, kafka: k, cassandra: c, latency: newLatencies()}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.RecordPartitioner(enqueue.Partitioner(s.names, nil)), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	s.producer = cl

	var g errgroup.Group
	g.Go(func() error {
		specs, err := s.names.Specs(shards)
		if err != nil {
			return err
		}
		adm := kadm.NewClient(cl)
		if _, err := topics.Ensure(ctx, adm, specs, rep.kafka); err != nil {
			return err
		}
		return waitForLeaders(ctx, adm, specs)
	})
	g.Go(func() error {
		// Schema changes wait for the nodes to agree; on a busy shared
		// node several at once can take minutes, so the package's tests
		// make them one at a time, with patience.
		cfg := cassandra.Config{Hosts: c.Hosts, Keyspace: c.Keyspace, ReplicationFactor: rep.cassandra, NodesShareAddress: rep.sharedAddress, SchemaTimeout: 2 * time.Minute, Timeout: 30 * time.Second}
		migrateMu.Lock()
		_, err := cassandra.Migrate(ctx, cfg)
		migrateMu.Unlock()
		if err != nil {
			return err
		}
		cfg.Timeout = 0 // the default, as in production
		st, err := cassandra.Open(ctx, cfg)
		if err != nil {
			return err
		}
		s.store = st
		_, err = st.InitCluster(ctx, shards)
		return err
	})
	require.NoError(t, g.Wait())
	t.Cleanup(func() { _ = s.store.Close() })

	s.enqueuer, err = enqueue.New(enqueue.Config{Store: s.store, Client: cl, Topics: s.names, Shards: shards})
	require.NoError(t, err)
	s.runs = collectRuns(t, k.Brokers, s.names)
	return s
}

// waitForLeaders waits until every partition of the new topics has a leader.
func waitForLeaders(ctx context.Context, adm *kadm.Client, specs []topics.Spec) error {
	var names []string
	for _, sp := range specs {
		names = append(names, sp.Name)
	}
	for {
		md, err := adm.Metadata(ctx, names...)
		ready := err == nil
		for _, sp := range specs {
			d, ok := md.Topics[sp.Name]
			if !ok || d.Err != nil || len(d.Partitions) != int(sp.Partitions) {
				ready = false
				continue
			}
			for _, p := range d.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics have no leaders: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dispatcher starts a dispatcher on the stack; Cleanup stops it.
func (s *stack) dispatcher(name string, mutate ...func(*Config)) *Dispatcher {
	s.t.Helper()
	d := s.newDispatcher(name, mutate...)
	require.NoError(s.t, d.Start(s.t.Context()))
	return d
}

// newDispatcher returns a dispatcher on the stack, not started; Cleanup
// stops it.
func (s *stack) newDispatcher(name string, mutate ...func(*Config)) *Dispatcher {
	s.t.Helper()
	cfg := Config{
		Kafka:             []kgo.Opt{kgo.SeedBrokers(s.kafka.Brokers...)},
		Store:             s.store,
		Topics:            s.names,
		GroupID:           s.names.Prefix + "dispatchers", // groups are not namespaced by topic
		InstanceID:        name,
		SessionTimeout:    6 * time.Second,
		HeartbeatInterval: 500 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(s.t.Output(), &slog.HandlerOptions{Level: s.logLevel})).With("test", s.t.Name()),
		Registerer:        prometheus.NewRegistry(),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	d, err := New(cfg)
	require.NoError(s.t, err)
	d.observe = s.latency.observe
	s.t.Cleanup(d.Stop)
	return d
}

// waitOwned waits until the dispatchers together own every shard, each
// once, shared out evenly (the group's rebalancing has settled).
func (s *stack) waitOwned(ds ...*Dispatcher) {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		var all []int
		for _, d := range ds {
			owned := d.Owned()
			if len(owned) < s.shards/len(ds) {
				return false
			}
			all = append(all, owned...)
		}
		slices.Sort(all)
		return len(all) == s.shards && len(slices.Compact(all)) == s.shards
	}, 60*time.Second, 50*time.Millisecond, "shards not shared out")
}

// register stores job definitions the way the registry does (first due time
// from the acceptance instant, entry written with the job) and wakes their
// shard owners. It returns the first due time of each job.
func (s *stack) register(ctx context.Context, specs []*sundialv1.JobSpec, accepted func() time.Time) map[string]time.Time {
	s.t.Helper()
	var (
		mu    sync.Mutex
		first = map[string]time.Time{}
		g     errgroup.Group
	)
	g.SetLimit(128)
	for _, spec := range specs {
		g.Go(func() error {
			at := store.Truncate(accepted())
			sched, errs := jobspec.CompileSchedule(spec.GetSchedule(), at)
			if len(errs) > 0 {
				return fmt.Errorf("job %s: %v", spec.GetId(), errs)
			}
			next, ok := jobspec.FirstDue(sched, jobspec.MisfirePolicy(spec.GetSchedule()), jobspec.CatchUpWindow(spec.GetSchedule()), at, at)
			if !ok {
				return fmt.Errorf("job %s schedules nothing", spec.GetId())
			}
			value, err := proto.Marshal(spec)
			if err != nil {
				return err
			}
			job := store.Job{ID: spec.GetId(), Spec: value, Revision: 1, UpdatedAt: at, NextDue: next}
			// A loaded machine times writes out; both are safe to repeat
			// (the same definition again is unchanged, a wake-up again is
			// absorbed by the owner), so they are tried until ctx ends.
			if err := s.retry(ctx, "store job "+job.ID, func() error { _, err := s.store.UpsertJob(ctx, job); return err }); err != nil {
				return err
			}
			if err := s.retry(ctx, "wake job "+job.ID, func() error { return s.enqueuer.Wake(ctx, job.ScheduledEntry()) }); err != nil {
				return err
			}
			mu.Lock()
			first[spec.GetId()] = store.Truncate(next)
			mu.Unlock()
			return nil
		})
	}
	require.NoError(s.t, g.Wait())
	return first
}

// runLog collects every run record produced to sundial.runs.*.
type runLog struct {
	mu    sync.Mutex
	byJob map[string][]*sundialv1.Run
	count int
	topic map[string]string // run id -> topic
	// records counts the records read of each run id.
	records map[string]int
}

func collectRuns(t *testing.T, brokers []string, names topics.Names) *runLog {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(names.AllRuns()...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond))
	require.NoError(t, err)
	l := &runLog{byJob: map[string][]*sundialv1.Run{}, topic: map[string]string{}, records: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				run := &sundialv1.Run{}
				if err := proto.Unmarshal(r.Value, run); err != nil {
					t.Errorf("run record at %s/%d@%d does not decode: %v", r.Topic, r.Partition, r.Offset, err)
					return
				}
				if string(r.Key) != run.GetJobId() {
					t.Errorf("run %s keyed %q", run.GetRunId(), r.Key)
				}
				l.mu.Lock()
				l.byJob[run.GetJobId()] = append(l.byJob[run.GetJobId()], run)
				l.topic[run.GetRunId()] = r.Topic
				l.records[run.GetRunId()]++
				l.count++
				l.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.Close()
	})
	return l
}

// jobRuns returns the runs of a job so far, by due time.
func (l *runLog) jobRuns(job string) []*sundialv1.Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.byJob[job])
	sort.SliceStable(out, func(i, j int) bool { return out[i].GetDueTime().AsTime().Before(out[j].GetDueTime().AsTime()) })
	return out
}

func (l *runLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

// unread returns how many of the acknowledged records (a count per run id)
// have not been read yet, judged by the records read of each run id, and
// one run id short of its records.
func (l *runLog) unread(acked map[string]int) (n int, example string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, want := range acked {
		if short := want - l.records[id]; short > 0 {
			n += short
			example = cmp.Or(example, id)
		}
	}
	return n, example
}

// waitRead waits until the run log has read every run record the
// dispatchers had acknowledged when it is called (the dispatchers are
// stopped, or nothing fires meanwhile): as many records of each run id as
// were acknowledged. A count of all records would not do: a firing that
// fails while waiting for its acknowledgement (a take-over, a drain) leaves
// its records to the client, which delivers them, so the topics hold records
// nobody counted as acknowledged, and the total reaches the acknowledged
// count while acknowledged runs are still unread.
func (s *stack) waitRead(within time.Duration) {
	s.t.Helper()
	acked, count := s.latency.acked(), s.latency.count()
	start, told := time.Now(), false
	require.EventuallyWithT(s.t, func(c *assert.CollectT) {
		n, example := s.runs.unread(acked)
		if total := s.runs.total(); n > 0 && total >= count && !told {
			told = true
			s.t.Logf("%d run records read, as many as the %d acknowledged, yet %d acknowledged ones unread (run %s among them)", total, count, n, example)
		}
		assert.Zero(c, n, "acknowledged run records not read from the runs topics yet (run %s among them)", example)
	}, within, 50*time.Millisecond)
	s.t.Logf("every acknowledged run record read %s after the wait began", time.Since(start).Round(time.Millisecond))
}

// latencies records dispatch latency (acknowledgement minus due time) of
// runs fired on time, in an HDR histogram.
type latencies struct {
	mu    sync.Mutex
	h     map[sundialv1.RunOrigin]*hdrhistogram.Histogram
	n     int
	byRun map[string]time.Duration
	// acks counts the acknowledged records of each run id.
	acks   map[string]int
	epochs map[shardEpoch]time.Time // first acknowledgement per shard and epoch
}

type shardEpoch struct {
	shard int
	epoch int64
}

func newLatencies() *latencies {
	return &latencies{h: map[sundialv1.RunOrigin]*hdrhistogram.Histogram{}, byRun: map[string]time.Duration{}, acks: map[string]int{}, epochs: map[shardEpoch]time.Time{}}
}

func (l *latencies) observe(runs []*sundialv1.Run, acked time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range runs {
		h := l.h[r.GetOrigin()]
		if h == nil {
			h = hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
			l.h[r.GetOrigin()] = h
		}
		lat := acked.Sub(r.GetAttemptDueTime().AsTime())
		_ = h.RecordValue(max(lat.Microseconds(), 1))
		l.n++
		l.acks[r.GetRunId()]++
		if _, ok := l.byRun[r.GetRunId()]; !ok {
			l.byRun[r.GetRunId()] = lat
		}
		k := shardEpoch{int(r.GetShard()), r.GetEpoch()}
		if _, ok := l.epochs[k]; !ok {
			l.epochs[k] = acked
		}
	}
}

func (l *latencies) report(t *testing.T, origin sundialv1.RunOrigin) *hdrhistogram.Histogram {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.h[origin]
	if h == nil {
		t.Logf("dispatch latency %s: no runs", originLabel(origin))
		return hdrhistogram.New(1, 2, 1)
	}
	ms := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
	t.Logf("dispatch latency %s (ack - due) over %d runs: p50 %.1fms p95 %.1fms p99 %.1fms p99.9 %.1fms max %.1fms",
		originLabel(origin), h.TotalCount(), ms(50), ms(95), ms(99), ms(99.9), float64(h.Max())/1000)
	return h
}

// Job definitions for the tests.

func jobSpec(id string, sched *sundialv1.Schedule) *sundialv1.JobSpec {
	return &sundialv1.JobSpec{
		Id:        id,
		OwnerTeam: "test",
		Schedule:  sched,
		Priority:  sundialv1.Priority_PRIORITY_DEFAULT,
		Target:    &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}},
		Payload:   []byte("p"),
	}
}

func atSchedule(t time.Time) *sundialv1.Schedule {
	return &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_At{At: &sundialv1.At{Time: timestamppb.New(store.Truncate(t))}}}
}

func delaySchedule(d time.Duration) *sundialv1.Schedule {
	return &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_Delay{Delay: &sundialv1.Delay{Duration: durationpb.New(d)}}}
}

func immediateSchedule() *sundialv1.Schedule {
	return &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_Immediate{Immediate: &sundialv1.Immediate{}}}
}

func cronSchedule(expr, zone string) *sundialv1.Schedule {
	return &sundialv1.Schedule{
		TimeZone: zone,
		Kind:     &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: expr}},
		Dst: &sundialv1.DstPolicy{
			Nonexistent: sundialv1.NonexistentTimePolicy_NONEXISTENT_TIME_POLICY_SHIFT_FORWARD,
			Ambiguous:   sundialv1.AmbiguousTimePolicy_AMBIGUOUS_TIME_POLICY_FIRST,
		},
	}
}

func intervalSchedule(every, offset time.Duration) *sundialv1.Schedule {
	return &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{
		Every:  durationpb.New(every),
		Anchor: &sundialv1.Interval_Offset{Offset: durationpb.New(offset)},
	}}}
}

// Bookkeeping on acknowledged runs, fed by the dispatchers' observe hook.

func (l *latencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// acked returns how many records of each run id were acknowledged so far.
func (l *latencies) acked() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.acks)
}

// of returns the dispatch latency of a run (its first acknowledgement).
func (l *latencies) of(runID string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok := l.byRun[runID]
	return d, ok
}

// shardsFired returns the shards that have emitted a run.
func (l *latencies) shardsFired() map[int]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int]bool{}
	for k := range l.epochs {
		out[k.shard] = true
	}
	return out
}

// firstAfterEpoch returns when the shard first emitted a run under an epoch
// newer than epoch.
func (l *latencies) firstAfterEpoch(shard int, epoch int64) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for k, at := range l.epochs {
		if k.shard == shard && k.epoch > epoch && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first, !first.IsZero()
}

func (l *runLog) topicOf(runID string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.topic[runID]
}

// network lets a test cut a dispatcher off Kafka as a crash would: every
// connection of its client goes through dial, and cut closes them all and
// refuses new ones, so not even a LeaveGroup request reaches the broker.
type network struct {
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func (n *network) dial(ctx context.Context, network, host string) (net.Conn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		return nil, errors.New("network cut by the test")
	}
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, host)
	if err == nil {
		n.conns = append(n.conns, c)
	}
	return c, err
}

func (n *network) cut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = true
	for _, c := range n.conns {
		_ = c.Close()
	}
}

// reportBy prints the latency percentiles of the runs grouped by group(run id).
func (l *latencies) reportBy(t *testing.T, group func(runID string) string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	hs := map[string]*hdrhistogram.Histogram{}
	for id, d := range l.byRun {
		g := group(id)
		if hs[g] == nil {
			hs[g] = hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
		}
		_ = hs[g].RecordValue(max(d.Microseconds(), 1))
	}
	names := make([]string, 0, len(hs))
	for g := range hs {
		names = append(names, g)
	}
	slices.Sort(names)
	for _, g := range names {
		h := hs[g]
		ms := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
		t.Logf("  %-10s %6d runs: p50 %7.1fms p95 %7.1fms p99 %7.1fms max %7.1fms", g, h.TotalCount(), ms(50), ms(95), ms(99), float64(h.Max())/1000)
	}
}

// produceBaseline measures raw Kafka produce latency on the stack in the
// shape of a dispatcher's firings (bursts of concurrent ProduceSync calls of
// one small record each, to sundial.events, which has as many partitions as
// a runs topic and no reader here), so the dispatch latency can be
// read against what Kafka itself gives on this machine at this moment.
func (s *stack) produceBaseline(rounds, burst int) *hdrhistogram.Histogram {
	s.t.Helper()
	h := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	var mu sync.Mutex
	value := make([]byte, 300)
	for range rounds {
		var wg sync.WaitGroup
		for i := range burst {
			wg.Go(func() {
				start := time.Now()
				err := s.producer.ProduceSync(s.t.Context(), &kgo.Record{Topic: s.names.Events(), Key: []byte(strconv.Itoa(i)), Value: value}).FirstErr()
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					_ = h.RecordValue(max(time.Since(start).Microseconds(), 1))
				}
			})
		}
		wg.Wait()
	}
	return h
}

// waitDispatched waits until the dispatchers have dispatched every entry due
// before cutoff: every shard's stored watermark has reached cutoff, and the
// group has committed every wake-up appended to sundial.shards up to now (a
// wake-up is committed only once its entry fired or was found beyond the
// loaded window, and it is the only trace of an entry written behind the
// watermark). It returns how long after cutoff that was: how far behind the
// dispatchers were. The bound only turns a hang into a failure; a slow
// machine is waited for.
func (s *stack) waitDispatched(cutoff time.Time) time.Duration {
	s.t.Helper()
	adm := kadm.NewClient(s.producer)
	ctx, cancel := context.WithTimeout(s.t.Context(), time.Minute)
	ends, err := adm.ListEndOffsets(ctx, s.names.Shards())
	cancel()
	require.NoError(s.t, err)
	require.NoError(s.t, ends.Error())
	group := s.names.Prefix + "dispatchers"
	var progress string
	require.Eventually(s.t, func() bool {
		ctx, cancel := context.WithTimeout(s.t.Context(), 10*time.Second)
		defer cancel()
		behind := 0
		var oldest time.Time
		for shard := range s.shards {
			st, err := s.store.GetShard(ctx, shard)
			if err != nil {
				progress = fmt.Sprintf("shard %d: %v", shard, err)
				return false
			}
			if st.Watermark.Before(cutoff) {
				behind++
				if oldest.IsZero() || st.Watermark.Before(oldest) {
					oldest = st.Watermark
				}
			}
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			progress = fmt.Sprintf("committed offsets of %s: %v", group, err)
			return false
		}
		uncommitted := int64(0)
		ends.Each(func(o kadm.ListedOffset) {
			c, _ := committed.Lookup(o.Topic, o.Partition)
			uncommitted += max(o.Offset-max(c.At, 0), 0)
		})
		progress = fmt.Sprintf("%d shards have a watermark before the cut-off (the oldest %s before it); %d wake-ups not committed",
			behind, cutoff.Sub(oldest).Round(time.Millisecond), uncommitted)
		return behind == 0 && uncommitted == 0
	}, 10*time.Minute, 100*time.Millisecond, "the dispatchers did not dispatch what was due before the cut-off: %s", func() string { return progress }())
	return time.Since(cutoff)
}

// retry calls fn until it succeeds or ctx ends, logging each failure.
func (s *stack) retry(ctx context.Context, what string, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		s.t.Logf("%s: %v; trying again", what, err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (gave up: %w)", what, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
