package dispatcher

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/store/memory"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	valid := Config{Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:9092")}, Store: st}
	tests := []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"defaults", func(*Config) {}, nil},
		{"nothing", func(c *Config) { *c = Config{} }, []string{"kafka: is required", "store: required"}},
		{"every bad value at once", func(c *Config) {
			c.Lookahead = time.Minute
			c.CatchUpHorizon = time.Second
			c.MisfireThreshold = -time.Second
			c.WatermarkInterval = time.Millisecond
			c.SessionTimeout = 2 * time.Second
			c.HeartbeatInterval = 3 * time.Second
			c.MaxInflight = -1
			c.MaxBacklog = -1
			c.MaxFiring = -1
			c.MaxHeld = -1
			c.MaxMissedRuns = -1
			c.FireTimeout = -time.Second
			c.DrainTimeout = -time.Second
		}, []string{
			"lookahead: 1m0s: must be between 100ms and 50s",
			"catch-up horizon: 1s",
			"misfire threshold: -1s",
			"watermark interval: 1ms",
			"heartbeat interval: 3s: must be positive and less than the session timeout 2s",
			"max inflight: -1", "max backlog: -1", "max firing: -1", "max held: -1", "max missed runs: -1",
			"fire timeout: -1s", "drain timeout: -1s",
		}},
		{"prepare ahead beyond lookahead", func(c *Config) {
			c.Lookahead = time.Second
			c.PrepareAhead = 2 * time.Second
		}, []string{"prepare ahead: 2s: must be at least 1ms and less than the lookahead 1s"}},
		{"job feed lag below prepare ahead", func(c *Config) {
			c.PrepareAhead = 2 * time.Second
			c.JobFeedMaxLag = time.Second
		}, []string{"job feed max lag: 1s: must be at least the prepare ahead 2s"}},
		{"session timeout too short", func(c *Config) {
			c.SessionTimeout = 500 * time.Millisecond
			c.HeartbeatInterval = 100 * time.Millisecond
		}, []string{"session timeout: 500ms: must be at least 1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid
			tt.edit(&c)
			err := c.Validate()
			if tt.want == nil {
				require.NoError(t, err)
				_, err := New(c)
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
			_, err = New(c)
			assert.Error(t, err, "New refuses what Validate refuses")
		})
	}
}

func TestStopBeforeStartAndTwice(t *testing.T) {
	t.Parallel()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	d, err := New(Config{Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Store: st})
	require.NoError(t, err)
	d.Stop()
	d.Stop()
	assert.Error(t, d.Start(t.Context()), "a stopped dispatcher does not start")
}
