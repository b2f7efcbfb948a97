package stacktest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/store/cassandra"
)

// Installation is an installation of Shards shards in a test's own
// namespaces of the real stack.
type Installation struct {
	Names  topics.Names
	Shards int
	// Cassandra is the store's configuration, for a test that opens
	// another store on the same keyspace.
	Cassandra cassandra.Config
	Store     *cassandra.Store
	// Producer partitions as the Enqueuer needs (enqueue.Partitioner).
	Producer *kgo.Client
	Enqueuer *enqueue.Enqueuer
}

// schemaTimeout bounds each schema change: a busy machine's Cassandra can
// take well over the default to agree on one.
const schemaTimeout = 2 * time.Minute

// Install makes the topics (topics.Setup) and the Cassandra schema
// (cassandra.Setup) of shards shards in k's topic prefix and c's keyspace,
// and opens a store and an Enqueuer on them; all are closed at cleanup.
// ctx bounds the setup.
func Install(ctx context.Context, t testing.TB, k testenv.Kafka, c testenv.Cassandra, shards int) Installation {
	t.Helper()
	names := topics.Names{Prefix: k.TopicPrefix}
	cfg := cassandra.Config{Hosts: c.Hosts, Keyspace: c.Keyspace, SchemaTimeout: schemaTimeout}
	if _, err := cassandra.Setup(ctx, cfg, shards); err != nil {
		t.Fatalf("cassandra schema of %d shards: %v", shards, err)
	}
	if _, err := topics.Setup(ctx, k.Brokers, names, shards, -1); err != nil {
		t.Fatalf("topics of %d shards: %v", shards, err)
	}
	st, err := cassandra.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	producer, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))
	if err != nil {
		t.Fatalf("kafka client for %v: %v", k.Brokers, err)
	}
	t.Cleanup(producer.Close)
	enq, err := enqueue.New(enqueue.Config{Store: st, Client: producer, Topics: names, Shards: shards})
	if err != nil {
		t.Fatalf("enqueuer: %v", err)
	}
	return Installation{Names: names, Shards: shards, Cassandra: cfg, Store: st, Producer: producer, Enqueuer: enq}
}
