package registry_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/registry"
)

// testStartStopTwice stops a registry before it starts and twice in a row,
// and starts it again after a Stop: each run answers a definition, and
// goleak (TestMain) finds no goroutine left behind.
func testStartStopTwice(t *testing.T, s *stack) {
	r, err := registry.New(registry.Config{
		Kafka: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Topics: s.names, Group: "restart", Store: s.store, Waker: s.waker, SharedTopic: true, // the test writes sundial.jobs
		Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler),
		RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	r.Stop() // before Start: nothing to stop
	for i, id := range []string{"restart.first", "restart.second"} {
		require.NoError(t, r.Start(t.Context()), "start %d", i+1)
		require.Error(t, r.Start(t.Context()), "a second Start while running")
		rec := s.produce(jobRecord(t, cronSpec(id, "0 3 * * *"), sundialv1.EncodingJSON))[0]
		got := s.statuses.wait(t, 1, rec)[0].status
		require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, got.GetOutcome(), "run %d: %v", i+1, got)
		r.Stop()
		r.Stop()
	}
}
