package dagengine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

type nopEnqueuer struct{}

func (nopEnqueuer) Enqueue(context.Context, ...store.DueEntry) error { return nil }

type nopProducer struct{}

func (nopProducer) ProduceSync(context.Context, ...*kgo.Record) kgo.ProduceResults { return nil }

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	valid := func() dagengine.Config {
		return dagengine.Config{Kafka: []kgo.Opt{kgo.SeedBrokers("localhost:9092")}, Store: st, Enqueuer: nopEnqueuer{}, Producer: nopProducer{}, Shards: 4}
	}
	tests := []struct {
		name   string
		change func(*dagengine.Config)
		want   []string // substrings of the error; none: valid
	}{
		{name: "defaults", change: func(*dagengine.Config) {}},
		{name: "session timeout of the broker's minimum", change: func(c *dagengine.Config) { c.SessionTimeout = 6 * time.Second }},
		{name: "session timeout too short", change: func(c *dagengine.Config) { c.SessionTimeout = 500 * time.Millisecond },
			want: []string{"session timeout 500ms: at least 1s"}},
		{name: "events max poll negative", change: func(c *dagengine.Config) { c.EventsMaxPoll = -1 },
			want: []string{"events max poll -1: must be positive"}},
		{name: "every bad field", change: func(c *dagengine.Config) {
			c.Kafka, c.Shards, c.SweepInterval, c.SessionTimeout = nil, -1, time.Millisecond, time.Millisecond
		}, want: []string{"kafka: required", "shards -1: must be positive", "sweep interval 1ms", "session timeout 1ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid()
			tt.change(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
