package dagengine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/dispatcher"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/runner/target"
)

// executions counts the runner's executions per run id.
type executions struct {
	mu sync.Mutex
	n  map[string]int
}

func (x *executions) add(runID string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.n[runID]++
	return x.n[runID]
}

// TestFiftyNodeDagWithRealRunners runs a 50-node DAG through the whole
// pipeline on the real stack: the engine enqueues each node, a real
// dispatcher fires it, a real runner executes it (leases, dedupe marks,
// retries) and publishes its events, and the engine starts the next nodes.
// Some nodes fail their first attempt: the runner retries them and the
// engine sees only their success.
func TestFiftyNodeDagWithRealRunners(t *testing.T) {
	t.Parallel()
	s := setup(t)
	rd := testenv.NeedRedis(t)
	rc := redis.NewClient(&redis.Options{Addr: rd.Addr})
	t.Cleanup(func() { _ = rc.Close() })
	leases, err := leasing.New(leasing.Config{Client: rc, KeyPrefix: rd.KeyPrefix + "lease:"})
	require.NoError(t, err)
	require.NoError(t, leases.Load(s.ctx))

	runs := &executions{n: map[string]int{}}
	handlers := map[string]target.Handler{
		"work": target.HandlerFunc(func(_ context.Context, run *sundialv1.Run) error {
			runs.add(run.GetRunId())
			return nil
		}),
		"flaky": target.HandlerFunc(func(_ context.Context, run *sundialv1.Run) error {
			if runs.add(run.GetRunId()) == 1 {
				return errors.New("the first attempt fails")
			}
			return nil
		}),
	}
	disp, err := dispatcher.New(dispatcher.Config{Brokers: s.brokers, Store: s.store, Topics: s.names, GroupID: "e2e-dispatchers",
		InstanceID: "e2e-dispatcher", Registerer: prometheus.NewRegistry(), Logger: testLogger(t)})
	require.NoError(t, err)
	run, err := runner.New(runner.Config{ID: "e2e-runner", Kafka: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Topics: s.names,
		Group: "e2e-runners", Leases: leases, Redis: rc, KeyPrefix: rd.KeyPrefix + "runner:", Enqueuer: s.enq,
		Handlers: handlers, Registerer: prometheus.NewRegistry(), Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, disp.Start(s.ctx))
	t.Cleanup(disp.Stop)
	require.NoError(t, run.Start(s.ctx))
	t.Cleanup(run.Stop)
	e := s.engine("e2e", nil)

	// Five layers of ten; each node waits for two nodes of the layer above.
	const layers, width = 5, 10
	spec := &sundialv1.DagSpec{Id: "e2e", OwnerTeam: "test"}
	flaky := map[string]bool{}
	for l := range layers {
		for w := range width {
			id := fmt.Sprintf("l%d-n%d", l, w)
			handler := "work"
			if w == 3 {
				handler = "flaky"
				flaky[id] = true
			}
			n := &sundialv1.DagNode{Id: id, Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
				Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: handler}}},
				Retry:  &sundialv1.RetryPolicy{MaxAttempts: 3, InitialBackoff: durationpb.New(100 * time.Millisecond)},
			}}}
			if l > 0 {
				n.Parents = []string{fmt.Sprintf("l%d-n%d", l-1, w), fmt.Sprintf("l%d-n%d", l-1, (w+1)%width)}
			}
			spec.Nodes = append(spec.Nodes, n)
		}
	}
	s.putDag(spec)

	start := time.Now()
	id, _, err := e.Runs().StartRun(s.ctx, "e2e", start, dagengine.OriginTrigger)
	require.NoError(t, err)
	st := s.waitStatus(id, "succeeded", 2*time.Minute)
	t.Logf("50-node DAG run took %v", time.Since(start))

	for _, n := range st.Nodes {
		assert.Equal(t, dagrun.Succeeded, n.Phase, n.ID)
		assert.Equal(t, 1, n.Gen, "node %s started once", n.ID)
		want := 1
		if flaky[n.ID] {
			want = 2 // one failed attempt, retried by the runner
		}
		assert.Equal(t, want, runs.n[n.RunID(id)], "executions of node %s", n.ID)
	}
	assert.Len(t, runs.n, layers*width, "one run id per node")
}
