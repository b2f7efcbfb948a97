package telemetry

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// KafkaMetrics returns the client option that records a franz-go client's
// metrics (franz-go's kprom plugin) on reg, under sundial_kafka_* with a
// constant label client=name. Give each Kafka client of a process its own
// option and name ("dispatcher", "runner-consumer", "runner-producer"): one
// kprom instance describes one client.
//
// Recorded: connections and connection errors, bytes and errors read and
// written per broker (label node_id), records, batches and bytes produced
// and fetched per broker and topic, records and bytes buffered in the
// client, and the histograms of request round trips (request_duration_e2e)
// and broker throttling per broker.
//
// Further hooks (a WorkCounter's KafkaHook) are added to the same option.
//
// kprom registers when the client is created and unregisters when it is
// closed. Should a client be created while another with the same name is
// still open, the new client's metrics replace the old one's instead of
// panicking.
func KafkaMetrics(reg prometheus.Registerer, name string, hooks ...kgo.Hook) kgo.Opt {
	m := kprom.NewMetrics("sundial",
		kprom.Subsystem("kafka"),
		kprom.Registerer(replacingRegisterer{reg}),
		kprom.WithStaticLabel(prometheus.Labels{"client": name}),
		kprom.FetchAndProduceDetail(kprom.ByNode, kprom.ByTopic, kprom.Records, kprom.Batches,
			kprom.UncompressedBytes, kprom.ConsistentNaming),
		kprom.Histograms(kprom.RequestDurationE2E, kprom.RequestThrottled),
		kprom.NativeBucketFactor(NativeBucketFactor),
		kprom.NativeMaxBuckets(NativeMaxBuckets),
		kprom.NativeBucketMinReset(NativeMinResetDuration),
	)
	return kgo.WithHooks(append([]kgo.Hook{m}, hooks...)...)
}

// replacingRegisterer registers like its Registerer, except that MustRegister
// (what kprom uses) replaces a collector already registered with the same
// descriptors instead of panicking.
type replacingRegisterer struct{ prometheus.Registerer }

func (r replacingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		err := r.Register(c)
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			r.Unregister(are.ExistingCollector)
			err = r.Register(c)
		}
		if err != nil {
			panic(err) // inconsistent descriptors: a programming error, as in prometheus.MustRegister
		}
	}
}
