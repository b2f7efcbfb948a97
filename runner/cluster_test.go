//go:build cluster

package runner

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// The failure tests of the local clusters (deploy/local/cluster.sh, make
// test-cluster): runs fire while a Kafka broker or a Redis master is killed
// with SIGKILL, and no run is lost, no two executions of one job overlap
// (each job's concurrency limit is 1) and each job's fencing tokens only
// grow. They print what the failure cost: the longest pause in the
// downstream's requests and the trigger latency of the runs due around it.

// clusterPartitions is the partition count of the run and event topics.
const clusterPartitions = 6

// clusterBackends are the local Kafka cluster, with topics of the test's own
// created at the brokers' default replication, and the local Redis Cluster.
// It checks that the topics really have three replicas and a minimum of two
// in sync: the brokers' defaults are what `sundial migrate` relies on.
func clusterBackends(t *testing.T) backends {
	t.Helper()
	k := testenv.NeedKafkaCluster(t)
	rc := testenv.NeedRedisCluster(t)
	names := topics.Names{Prefix: k.TopicPrefix}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var specs []topics.Spec
	var all []string
	for _, name := range append(names.AllRuns(), names.Events(), names.DLQ()) {
		specs = append(specs, topics.Spec{Name: name, Partitions: clusterPartitions})
		all = append(all, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = topics.Ensure(ctx, adm, specs, -1)
	require.NoError(t, err)
	details, err := adm.ListTopics(ctx, all...)
	require.NoError(t, err)
	for _, d := range details {
		for _, p := range d.Partitions {
			require.Len(t, p.Replicas, 3, "topic %s partition %d replicas", d.Topic, p.Partition)
		}
	}
	configs, err := adm.DescribeTopicConfigs(ctx, all...)
	require.NoError(t, err)
	require.Len(t, configs, len(all))
	for _, rc := range configs {
		require.NoError(t, rc.Err, "topic %s configs", rc.Name)
		i := slices.IndexFunc(rc.Configs, func(c kadm.Config) bool { return c.Key == "min.insync.replicas" })
		require.GreaterOrEqual(t, i, 0, "topic %s has min.insync.replicas", rc.Name)
		require.Equal(t, "2", rc.Configs[i].MaybeValue(), "topic %s min.insync.replicas", rc.Name)
	}
	return backends{brokers: k.Brokers, names: names, redisCluster: rc.Addrs, prefix: rc.KeyPrefix, real: true}
}

// TestKafkaBrokerKilledWhileRunsFire kills the broker that coordinates the
// runners' consumer group (it also leads a third of the partitions) while
// runs fire, and starts it again later.
func TestKafkaBrokerKilledWhileRunsFire(t *testing.T) {
	cluster := testenv.NeedCluster(t)
	b := clusterBackends(t)
	h := newHarness(t, b, steadyTTL)
	var victim string
	fireThroughFailure(t, h, func() (string, func()) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...))
		require.NoError(t, err)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		groups, err := kadm.NewClient(cl).DescribeGroups(ctx, h.group)
		require.NoError(t, err)
		g, ok := groups[h.group]
		require.True(t, ok && g.Err == nil, "describe group %s: %v", h.group, g.Err)
		victim = "kafka-" + strconv.Itoa(int(g.Coordinator.NodeID))
		cluster.Kill(t, victim)
		return victim + " (the runners' group coordinator)", func() { cluster.Start(t, victim) }
	})
}

// TestRedisMasterKilledWhileRunsFire kills the Redis master that holds the
// lease keys of the first job (and of about a third of the others) while
// runs fire. Its replica takes over after cluster-node-timeout; the killed
// node is started again later and rejoins as a replica.
func TestRedisMasterKilledWhileRunsFire(t *testing.T) {
	cluster := testenv.NeedCluster(t)
	b := clusterBackends(t)
	h := newHarness(t, b, steadyTTL)
	fireThroughFailure(t, h, func() (string, func()) {
		cc, ok := h.redis.(*redis.ClusterClient)
		require.True(t, ok, "a cluster client, got %T", h.redis)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		master, err := cc.MasterForKey(ctx, "{"+clusterJob(0)+"}")
		require.NoError(t, err)
		i := slices.Index(b.redisCluster, master.Options().Addr)
		require.GreaterOrEqual(t, i, 0, "master %s is one of %v", master.Options().Addr, b.redisCluster)
		victim := "redis-" + strconv.Itoa(i+1)
		cluster.Kill(t, victim)
		return fmt.Sprintf("%s (master at %s)", victim, master.Options().Addr), func() { cluster.Start(t, victim) }
	})
}

func clusterJob(i int) string { return "cj-" + strconv.Itoa(i) }

// jobWatch is what the downstream saw of the jobs' executions: a job's
// requests must not overlap (its limit is 1) and its fencing tokens must
// grow from one run to the next.
type jobWatch struct {
	mu        sync.Mutex
	inflight  map[string]int   // job -> requests being served
	lastToken map[string]int64 // job -> token of its latest request
	lastRun   map[string]string
	first     map[string]time.Time // run id -> its first request
	requests  []time.Time          // every request's arrival
	overlaps  []string
	backwards []string
}

func newJobWatch() *jobWatch {
	return &jobWatch{inflight: map[string]int{}, lastToken: map[string]int64{}, lastRun: map[string]string{}, first: map[string]time.Time{}}
}

// arrive records a request of run (of job) with token and reports what it
// breaks; leave ends it.
func (w *jobWatch) arrive(job, run string, token int64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inflight[job] > 0 {
		w.overlaps = append(w.overlaps, fmt.Sprintf("%s token %d while another execution of %s ran", run, token, job))
	}
	w.inflight[job]++
	// A request of the run seen last with its token again is the same
	// execution's; anything else must carry a larger token.
	if last, ok := w.lastToken[job]; ok && token <= last && (token != last || run != w.lastRun[job]) {
		w.backwards = append(w.backwards, fmt.Sprintf("%s token %d after %s token %d", run, token, w.lastRun[job], last))
	}
	w.lastToken[job], w.lastRun[job] = max(token, w.lastToken[job]), run
	if _, ok := w.first[run]; !ok {
		w.first[run] = now
	}
	w.requests = append(w.requests, now)
}

func (w *jobWatch) leave(job string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inflight[job]--
}

// fireThroughFailure fires runs of 8 jobs (one every 500 ms each) for 15 s
// through two runners, calls fail once a fifth of them succeeded, calls the
// restore it returns 5 s later, and checks every run's outcome.
func fireThroughFailure(t *testing.T, h *harness, fail func() (what string, restore func())) {
	const (
		// 16 runs/s: a rate the two runners keep up with on a busy
		// two-core machine under -race, so that lateness measures the
		// failure rather than a backlog.
		jobs   = 8
		every  = 500 * time.Millisecond
		window = 15 * time.Second
		effect = 20 * time.Millisecond
	)
	watch := newJobWatch()
	h.down.set(func(r *http.Request, _ int) (int, http.Header) {
		job := strings.TrimPrefix(r.URL.Path, "/")
		tok, _ := strconv.ParseInt(r.Header.Get("Sundial-Fencing-Token"), 10, 64)
		watch.arrive(job, r.Header.Get("Sundial-Run-Id"), tok, time.Now())
		defer watch.leave(job)
		select {
		case <-time.After(effect): // the downstream's work, so that overlaps would show
		case <-r.Context().Done():
		}
		return http.StatusOK, nil
	})
	queue := func(c *Config) { c.QueueDelay = 100 * time.Millisecond }
	r1, r2 := h.start(queue), h.start(queue)
	waitAssigned(t, 3*clusterPartitions, r1, r2)

	begin := time.Now().Add(500 * time.Millisecond)
	var runs []*sundialv1.Run
	for tick := time.Duration(0); tick < window; tick += every {
		for j := range jobs {
			// The jobs' phases spread over the period.
			due := begin.Add(tick + time.Duration(j)*every/jobs)
			runs = append(runs, h.run(clusterJob(j), due, func(r *sundialv1.Run) {
				r.ConcurrencyLimit = 1
				r.OverlapPolicy = sundialv1.OverlapPolicy_OVERLAP_POLICY_QUEUE
				r.QueueDelay = durationpb.New(100 * time.Millisecond)
			}))
		}
	}
	slices.SortFunc(runs, func(a, b *sundialv1.Run) int { return a.GetDueTime().AsTime().Compare(b.GetDueTime().AsTime()) })

	// The producer stands in for the dispatcher: each run goes out at its
	// due time, and one that cannot be written yet is written again until
	// it is (a dispatcher keeps its due entry until the run is out).
	ctx, cancel := context.WithCancel(context.Background())
	produced := make(chan struct{})
	var produceFailures int
	go func() {
		defer close(produced)
		for i := 0; i < len(runs); {
			due := runs[i].GetDueTime().AsTime()
			j := i
			for j < len(runs) && runs[j].GetDueTime().AsTime().Equal(due) {
				j++
			}
			if d := time.Until(due); d > 0 {
				time.Sleep(d) // open-loop pacing, not a wait for a condition
			}
			for ctx.Err() == nil {
				err := produceBatch(ctx, h.client, h.b.names, runs[i:j])
				if err == nil {
					break
				}
				produceFailures++
				t.Logf("producing %d runs due %s: %v (again)", j-i, due.Format("15:04:05.000"), err)
			}
			i = j
		}
	}()
	t.Cleanup(func() { cancel(); <-produced })

	require.Eventually(t, func() bool { return h.events.count(succeeded) >= len(runs)/5 }, wait, 10*time.Millisecond)
	what, restore := fail()
	killedAt := time.Now()
	restored := false
	t.Cleanup(func() {
		if !restored {
			restore()
		}
	})
	t.Logf("killed %s at %s, %s after the first run was due, with %d of %d runs succeeded",
		what, killedAt.Format("15:04:05.000"), killedAt.Sub(begin).Round(time.Millisecond), h.events.count(succeeded), len(runs))
	time.Sleep(5 * time.Second) // the node stays down while runs fire; its length is the point
	restore()
	restored = true
	t.Logf("restarted after %s", time.Since(killedAt).Round(time.Millisecond))
	<-produced

	succeededRun := func(id string) bool { return slices.Contains(h.events.states(id), succeeded) }
	missing := func() int {
		n := 0
		for _, r := range runs {
			if !succeededRun(r.GetRunId()) {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return missing() == 0 }, 3*time.Minute, 50*time.Millisecond,
		"runs without SUCCEEDED: %d of %d; first: %s", missing(), len(runs), firstMissing(h, runs, succeededRun))
	t.Logf("every run succeeded %s after the kill", time.Since(killedAt).Round(time.Millisecond))

	watch.mu.Lock()
	defer watch.mu.Unlock()
	lost, dead := 0, 0
	var before, after []time.Duration
	for _, r := range runs {
		first, ok := watch.first[r.GetRunId()]
		if !ok {
			lost++
			continue
		}
		late := first.Sub(r.GetDueTime().AsTime())
		if r.GetDueTime().AsTime().Before(killedAt) {
			before = append(before, late)
		} else {
			after = append(after, late)
		}
	}
	for _, ev := range h.events.all() {
		if ev.GetState() == sundialv1.RunState_RUN_STATE_DEAD {
			dead++
		}
	}
	// The longest pause between two requests reaching the downstream after
	// the kill: how long the failure stopped all work.
	var pause time.Duration
	var pauseFrom time.Time
	reqs := slices.Clone(watch.requests)
	slices.SortFunc(reqs, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(reqs); i++ {
		if reqs[i].After(killedAt) && reqs[i].Sub(reqs[i-1]) > pause {
			pause, pauseFrom = reqs[i].Sub(reqs[i-1]), reqs[i-1]
		}
	}
	_, dupStarts := latencies(h.events.all())
	f := h.down.figures()
	t.Logf("cost of killing %s: longest pause of all requests %s (from %s, %s after the kill); lateness of the first request of runs due before the kill %s, due after it %s",
		what, pause.Round(time.Millisecond), pauseFrom.Format("15:04:05.000"), pauseFrom.Sub(killedAt).Round(time.Millisecond), spread(before), spread(after))
	t.Logf("runs %d, lost %d, dead %d, produce attempts that failed %d, runs started more than once %d; downstream: %s",
		len(runs), lost, dead, produceFailures, dupStarts, f)
	assert.Zero(t, lost, "every run reached the downstream")
	assert.Zero(t, dead, "no run was dead-lettered")
	assert.Empty(t, watch.overlaps, "executions of one job overlapped (its limit is 1)")
	assert.Empty(t, watch.backwards, "a job's fencing token went backwards")
	assert.Zero(t, f.dupEffects, "no run took effect twice")
}

// spread summarises durations as "p50 X, max Y over N".
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("p50 %s, p99 %s, max %s over %d", s[len(s)/2].Round(time.Millisecond),
		s[len(s)*99/100].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}
