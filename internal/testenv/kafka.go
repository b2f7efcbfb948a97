package testenv

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka is a test's view of a Kafka cluster.
type Kafka struct {
	// Brokers are seed broker addresses (host:port).
	Brokers []string
	// TopicPrefix is prepended to every topic the test creates, e.g.
	// "t-1a2b3c4d5e." + "sundial.jobs". Topics with it are deleted at cleanup.
	TopicPrefix string
}

// NeedKafka returns a reachable Kafka and a topic prefix of the test's own.
func NeedKafka(t testing.TB) Kafka {
	t.Helper()
	skipShort(t, "Kafka")
	brokers := addresses(EnvKafka)
	if len(brokers) == 0 {
		var err error
		brokers, err = containerKafka()
		if err != nil {
			unavailable(t, "Kafka", EnvKafka, err.Error())
		}
	}
	return newKafka(t, brokers)
}

// newKafka checks that brokers answer and gives the test a topic prefix
// whose topics are deleted at cleanup.
func newKafka(t testing.TB, brokers []string) Kafka {
	t.Helper()
	adm, err := kafkaAdmin(brokers)
	if err != nil {
		t.Fatalf("kafka client for %v: %v", brokers, err)
	}
	ctx, cancel := timeoutCtx()
	defer cancel()
	if _, err := adm.BrokerMetadata(ctx); err != nil {
		adm.Close()
		t.Fatalf("kafka at %v does not answer a metadata request: %v (%s)", brokers, err, howToStart)
	}
	k := Kafka{Brokers: brokers, TopicPrefix: fmt.Sprintf("t-%s-%s.", slug(t.Name(), 20), randomSuffix())}
	t.Cleanup(func() {
		defer adm.Close()
		ctx, cancel := timeoutCtx()
		defer cancel()
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			t.Logf("cleanup: list topics: %v", err)
			return
		}
		var mine []string
		for _, name := range topics.Names() {
			if strings.HasPrefix(name, k.TopicPrefix) {
				mine = append(mine, name)
			}
		}
		if len(mine) == 0 {
			return
		}
		if _, err := adm.DeleteTopics(ctx, mine...); err != nil {
			t.Logf("cleanup: delete topics %v: %v", mine, err)
		}
	})
	return k
}

func kafkaAdmin(brokers []string) (*kadm.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}
