package dagengine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/dagengine"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestStartStopTwice stops an engine before it starts and twice in a row,
// and starts it again after a Stop: each run answers a DAG definition, and
// goleak (TestMain) finds no goroutine left behind.
func TestStartStopTwice(t *testing.T) {
	t.Parallel()
	s := setup(t)
	e, err := dagengine.New(dagengine.Config{
		Kafka: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Topics: s.names, Group: "restart", DefinitionsGroup: "restart-definitions", SharedTopic: true,
		Store: s.store, Enqueuer: s.enq, Producer: s.client, Shards: testShards,
		SweepInterval: time.Second, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Registerer: prometheus.NewRegistry(), Logger: testLogger(t),
	})
	require.NoError(t, err)
	e.Stop() // before Start: nothing to stop
	for i := range 2 {
		require.NoError(t, e.Start(s.ctx), "start %d", i+1)
		require.Error(t, e.Start(s.ctx), "a second Start while running")
		// A self-edge is rejected: the answer shows the run is processing.
		id := fmt.Sprintf("selfish-%d", i)
		rec := &kgo.Record{Topic: s.names.Jobs(), Key: []byte(id),
			Value: fmt.Appendf(nil, `{"id":%q,"ownerTeam":"t","nodes":[{"id":"a","jobId":"j","parents":["a"]}]}`, id),
			Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindDag)},
				{Key: sundialv1.HeaderContentType, Value: []byte("application/json")}}}
		require.NoError(t, s.client.ProduceSync(s.ctx, rec).FirstErr())
		got := s.readStatuses(i + 1)
		require.Len(t, got[id], 1, "run %d: statuses %v", i+1, got)
		require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, got[id][0].GetOutcome())
		e.Stop()
		e.Stop()
	}
}
