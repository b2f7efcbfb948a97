package main

import (
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/dispatcher"
	"github.com/sundialhq/sundial/history"
	"github.com/sundialhq/sundial/internal/stacktest"
	"github.com/sundialhq/sundial/internal/testenv"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testShards = 4

// TestExampleHandlerRunsAndItsLogReachesRunsGet fires a job whose target is
// the example's handler through the real pipeline (a trigger due entry in
// Cassandra, a dispatcher, the runs topic) on the local stack. The example's
// handler runs in a worker, the history writer stores the run's events, and
// `sundial runs get` prints the lines the handler logged.
func TestExampleHandlerRunsAndItsLogReachesRunsGet(t *testing.T) {
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	rd := testenv.NeedRedis(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	logger := testLogger(t)
	inst := stacktest.Install(ctx, t, k, c, testShards)
	names, st, enq := inst.Names, inst.Store, inst.Enqueuer

	disp, err := dispatcher.New(dispatcher.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Store: st, Topics: names, GroupID: k.TopicPrefix + "dispatchers",
		Registerer: prometheus.NewRegistry(), Logger: logger})
	require.NoError(t, err)
	require.NoError(t, disp.Start(ctx))
	t.Cleanup(disp.Stop)
	hw, err := history.New(history.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Group: k.TopicPrefix + "history",
		History: st, Registerer: prometheus.NewRegistry(), Logger: logger})
	require.NoError(t, err)
	require.NoError(t, hw.Start(ctx))
	t.Cleanup(hw.Stop)
	// The worker's pool is the test's own (its consumer group too), and
	// the job names it: a worker executes its pool's handler runs only.
	pool := strings.Trim(k.TopicPrefix, ".")
	w, err := worker.New(worker.Config{
		Pool: pool, Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, TopicPrefix: k.TopicPrefix,
		RedisAddr: rd.Addr, RedisKeyPrefix: rd.KeyPrefix, CassandraHosts: c.Hosts, Keyspace: c.Keyspace,
		Registerer: prometheus.NewRegistry(), Logger: logger,
	})
	require.NoError(t, err)
	register(w)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)

	// What the trigger consumer does for `sundial trigger`: the job's
	// definition in the store, and a trigger entry due now.
	const jobID = "billing.invoice-acme"
	spec := &sundialv1.JobSpec{Id: jobID, OwnerTeam: "billing", Pool: pool,
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "billing.invoice"}}}}
	specBytes, err := proto.Marshal(spec)
	require.NoError(t, err)
	now := store.Truncate(time.Now())
	_, err = st.UpsertJob(ctx, store.Job{ID: jobID, Spec: specBytes, Revision: 1, UpdatedAt: now})
	require.NoError(t, err)
	trig, err := proto.Marshal(&sundialv1.Trigger{JobId: jobID, RequestedAt: timestamppb.New(now), Payload: []byte(`{"customer": "acme", "lines": 3}`)})
	require.NoError(t, err)
	runID := store.RunID(jobID, now)
	require.NoError(t, enq.Enqueue(ctx, store.DueEntry{Due: now, JobID: jobID, Kind: store.KindTrigger, RunID: runID, Attempt: 1, Revision: 1, Payload: trig}))

	var rec store.RunRecord
	found := func() bool {
		runs, err := st.ListRuns(ctx, jobID, 10)
		if err != nil {
			return false
		}
		for _, r := range runs {
			if r.RunID == runID && r.State == store.StateSucceeded {
				rec = r
				return true
			}
		}
		return false
	}
	if !assert.Eventually(t, found, 2*time.Minute, 100*time.Millisecond) {
		runs, err := st.ListRuns(ctx, jobID, 10)
		require.FailNow(t, "the run did not succeed", "history of %s: %+v (err %v)", jobID, runs, err)
	}
	log := strings.Join(rec.Log, "\n")
	assert.Contains(t, log, `msg=invoicing customer=acme lines=3 idempotency_key=`+runID)
	assert.Contains(t, log, `msg="progress 3/3: line billed"`)
	assert.Contains(t, log, `msg="invoice sent" customer=acme`)

	bin := testenv.BuildSundial(t)
	out, err := exec.CommandContext(ctx, bin, "runs", "get", runID, "--cassandra-hosts", strings.Join(c.Hosts, ","), "--keyspace", c.Keyspace).CombinedOutput()
	require.NoError(t, err, "sundial runs get: %s", out)
	t.Logf("sundial runs get %s:\n%s", runID, out)
	assert.Contains(t, string(out), "attempt 1: succeeded")
	assert.Contains(t, string(out), `msg="progress 2/3: line billed"`)
	assert.Contains(t, string(out), `msg="invoice sent" customer=acme`)
}

// testLogger logs to the test at warning level and above (testenv.Logger).
func testLogger(t *testing.T) *slog.Logger { return testenv.Logger(t, slog.LevelWarn) }
