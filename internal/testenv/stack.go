package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/topics"
)

// KafkaRedis is a test's Kafka and Redis namespaces (NeedKafka,
// NeedRedis) with the installation's topics made under the topic prefix
// and a client on each backend: what a test that runs runners on the
// local stack starts from.
type KafkaRedis struct {
	Kafka Kafka
	Redis Redis
	// Names are the topics' names under Kafka.TopicPrefix.
	Names topics.Names
	// Client produces with a 1 ms linger, so that a test's records leave
	// at once. Closed at cleanup.
	Client *kgo.Client
	// RDB is a client of Redis. Closed at cleanup.
	RDB *redis.Client
}

// ensureTopicsTimeout bounds the making of a test's topics, which a busy
// machine's Kafka can take a while to answer.
const ensureTopicsTimeout = 3 * time.Minute

// NeedKafkaRedis returns a KafkaRedis whose every topic (topics.Names.Specs)
// has shards shards, one replica each.
func NeedKafkaRedis(t testing.TB, shards int) KafkaRedis {
	t.Helper()
	k := NeedKafka(t)
	rd := NeedRedis(t)
	names := topics.Names{Prefix: k.TopicPrefix}
	specs, err := names.Specs(shards)
	if err != nil {
		t.Fatalf("topics of %d shards: %v", shards, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ensureTopicsTimeout)
	defer cancel()
	if _, err := topics.EnsureAt(ctx, k.Brokers, specs, 1); err != nil {
		t.Fatalf("make the test's topics: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatalf("kafka client for %v: %v", k.Brokers, err)
	}
	t.Cleanup(cl.Close)
	rdb := redis.NewClient(&redis.Options{Addr: rd.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return KafkaRedis{Kafka: k, Redis: rd, Names: names, Client: cl, RDB: rdb}
}
