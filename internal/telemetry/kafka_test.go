package telemetry_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/telemetry"
)

func TestKafkaMetricsRecordEachClient(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "sundial.runs.default"))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	reg := prometheus.NewRegistry()
	newClient := func(name string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), telemetry.KafkaMetrics(reg, name))
		require.NoError(t, err)
		return cl
	}
	producer := newClient("runner-producer")
	other := newClient("dispatcher")
	defer other.Close()

	require.NoError(t, telemetry.KafkaCheck(producer)(t.Context()))
	require.NoError(t, telemetry.KafkaCheck(other)(t.Context()))
	for range 3 {
		require.NoError(t, producer.ProduceSync(t.Context(), &kgo.Record{Topic: "sundial.runs.default", Value: []byte("x")}).FirstErr())
	}
	produced := series(t, reg, "sundial_kafka_produce_records_total", map[string]string{"client": "runner-producer", "topic": "sundial.runs.default"})
	require.Len(t, produced, 1)
	assert.EqualValues(t, 3, produced[0].GetCounter().GetValue())
	assert.NotEmpty(t, series(t, reg, "sundial_kafka_request_duration_e2e_seconds", map[string]string{"client": "runner-producer"}))
	assert.NotEmpty(t, series(t, reg, "sundial_kafka_connects_total", map[string]string{"client": "dispatcher"}), "the other client's series")

	// A client that replaces one of the same name does not panic.
	again := newClient("runner-producer")
	producer.Close()
	require.NoError(t, again.ProduceSync(t.Context(), &kgo.Record{Topic: "sundial.runs.default", Value: []byte("x")}).FirstErr())
	again.Close()

	cluster.Close()
	assert.ErrorContains(t, telemetry.KafkaCheck(other)(t.Context()), "kafka: ")
}
