//go:build cluster

package dispatcher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/store/cassandra"
)

// The failure test of the local three-node Cassandra (deploy/local/cluster.sh,
// make test-cluster): dispatchers fire jobs every second from a keyspace of
// replication factor 3, read and written at the store's default consistency
// (LOCAL_QUORUM, LOCAL_SERIAL for the fencing and watermark transactions),
// while one node is killed with SIGKILL, stays down, and is started again.
// Two replicas of three answer every quorum, so nothing may be lost and no
// shard may stall. It prints what the failure cost.

// TestCassandraNodeKilledWhileRunsFire kills cassandra-1 (the seed and the
// first contact point, where the driver's control connection starts) while
// 18 jobs fire every second across 6 shards, keeps it down for 20 s and
// until every shard's watermark has passed the kill (no shard stalls
// without it), and starts it again. Every occurrence must have a run
// (counted by run id), a run id emitted twice is counted (the runners absorb
// it by run id), and every shard's watermark must pass the restart.
func TestCassandraNodeKilledWhileRunsFire(t *testing.T) {
	const (
		shards   = 6
		perShard = 3
		victim   = "cassandra-1"
		down     = 20 * time.Second
	)
	cluster := testenv.NeedCluster(t)
	k := testenv.NeedKafkaCluster(t)
	c := testenv.NeedCassandraCluster(t)
	s := newStackOn(t, shards, k, c, stackReplication{kafka: -1, cassandra: 3, sharedAddress: true})
	requireReplication(t, c, 3)

	ds := []*Dispatcher{s.dispatcher("d1"), s.dispatcher("d2")}
	s.waitOwned(ds...)
	specs := everySecondJobs(shards, perShard)
	first := s.register(t.Context(), specs, time.Now)
	require.Eventually(t, func() bool { return len(s.latency.shardsFired()) == shards }, 2*time.Minute, 50*time.Millisecond,
		"not every shard fired")
	// A few rounds on every shard before the kill.
	require.Eventually(t, func() bool { return s.runs.total() >= 3*len(specs) }, 2*time.Minute, 50*time.Millisecond,
		"runs do not flow")
	t.Logf("%d jobs due every second on %d shards (%d each), keyspace %s with replication factor 3, consistency %s",
		len(specs), shards, perShard, c.Keyspace, cassandra.DefaultConsistency)

	before := s.runs.total()
	killedAt := time.Now()
	cluster.Kill(t, victim)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			cluster.Start(t, victim)
		}
	})
	t.Logf("killed %s at %s with %d runs emitted", victim, killedAt.Format("15:04:05.000"), before)
	time.Sleep(down) // the node stays down while runs fire; its length is the point
	// No stalled shard while the node is down: two replicas of three make
	// every quorum, so every shard's watermark passes the kill without it.
	var marks string
	require.Eventually(t, func() bool {
		ok, m := watermarksPast(t, s, killedAt)
		marks = m
		return ok
	}, 3*time.Minute, 100*time.Millisecond, "with %s down, not every shard's watermark passed the kill at %s: %s",
		victim, killedAt.Format("15:04:05.000"), func() string { return marks }())
	t.Logf("every shard's watermark passed the kill with %s still down: %s", victim, marks)
	cluster.Start(t, victim)
	restarted = true
	backAt := time.Now()
	t.Logf("restarted %s: it was down %s (SIGKILL to serving again)", victim, backAt.Sub(killedAt).Round(time.Millisecond))

	// No stalled shard: every watermark passes a point after the restart,
	// and with it every occurrence due before that point.
	until := time.Now().Add(2 * time.Second)
	behind := s.waitDispatched(until)
	_, marks = watermarksPast(t, s, until)
	t.Logf("every shard's watermark passed %s (after the restart), %s after it: %s", until.Format("15:04:05.000"), behind.Round(time.Millisecond), marks)

	total, lost, dup := s.waitEveryOccurrence(specs, first, until)
	// What the node's absence cost: the dispatch latency (acknowledgement
	// minus due time) of the runs due while it was down.
	var during []time.Duration
	downRuns := 0
	for _, sp := range specs {
		for _, r := range s.runs.jobRuns(sp.GetId()) {
			due := r.GetDueTime().AsTime()
			if due.Before(killedAt) || !due.Before(backAt) {
				continue
			}
			downRuns++
			if lat, ok := s.latency.of(r.GetRunId()); ok {
				during = append(during, lat)
			}
		}
	}
	t.Logf("cost of killing %s: dispatch latency of the runs due while it was down %s", victim, spread(during))
	t.Logf("runs %d occurrences, %d due while %s was down, lost %d, emitted twice %d (absorbed by run id)", total, downRuns, victim, lost, dup)
	assert.Zero(t, lost, "every occurrence has a run")
	assert.NotZero(t, downRuns, "runs fired while the node was down")
}

// watermarksPast says whether every shard's watermark is past at, and
// lists them. A read that fails counts as not past.
func watermarksPast(t *testing.T, s *stack, at time.Time) (bool, string) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	all := true
	var marks []string
	for sh := range s.shards {
		st, err := s.store.GetShard(ctx, sh)
		if err != nil {
			return false, fmt.Sprintf("shard %d: %v", sh, err)
		}
		all = all && st.Watermark.After(at)
		marks = append(marks, fmt.Sprintf("%d@%s (epoch %d)", sh, st.Watermark.Format("15:04:05.000"), st.Epoch))
	}
	return all, strings.Join(marks, ", ")
}

// requireReplication checks that the test's keyspace keeps rf replicas: the
// migration's --replication-factor reached the cluster.
func requireReplication(t *testing.T, c testenv.Cassandra, rf int) {
	t.Helper()
	cl := gocql.NewCluster(c.Hosts...)
	cl.Timeout = 30 * time.Second
	cl.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 1, Interval: 100 * time.Millisecond}
	sess, err := cl.CreateSession()
	require.NoError(t, err)
	defer sess.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var repl map[string]string
	require.NoError(t, sess.Query("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?", c.Keyspace).
		WithContext(ctx).Scan(&repl))
	require.Equal(t, fmt.Sprint(rf), repl["replication_factor"], "keyspace %s replication %v", c.Keyspace, repl)
}

// spread summarises durations as "p50 X, p99 Y, max Z over N".
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("p50 %s, p99 %s, max %s over %d", s[len(s)/2].Round(time.Millisecond),
		s[len(s)*99/100].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}
