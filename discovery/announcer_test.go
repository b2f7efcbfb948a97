package discovery

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sundialhq/sundial/internal/topics"
)

// tombstoneBuffered signals once a record without a value (the tombstone)
// is buffered by the announcer's producer.
type tombstoneBuffered struct {
	once sync.Once
	ch   chan struct{}
}

func (h *tombstoneBuffered) OnProduceRecordBuffered(r *kgo.Record) {
	if r.Value == nil {
		h.once.Do(func() { close(h.ch) })
	}
}

// TestStopWritesTheTombstoneBehindACanceledHeartbeat: heartbeats still
// buffered when Stop cancels the heartbeat loop are failed with their
// context, and the producer fails every record buffered behind them in the
// partition, the tombstone included. Stop still writes the tombstone, so
// readers see the executor leave rather than expire. Found by CI: a busy
// machine held a heartbeat in the buffer as the runner stopped.
func TestStopWritesTheTombstoneBehindACanceledHeartbeat(t *testing.T) {
	t.Parallel()
	names := topics.Names{Prefix: "t"}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, names.Executors()))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	brokers := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}

	dir, err := NewDirectory(DirectoryConfig{Kafka: brokers, Topics: names, Tick: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, dir.Start(context.Background()))
	t.Cleanup(dir.Stop)

	var announced atomic.Int64 // heartbeats begun: each asks InFlight first
	hook := &tombstoneBuffered{ch: make(chan struct{})}
	a, err := NewAnnouncer(AnnouncerConfig{Kafka: append(brokers, kgo.WithHooks(hook)), Topics: names, ID: "exec-1", Pool: "p", Capacity: 1,
		Interval: 5 * time.Millisecond, InFlight: func() int { announced.Add(1); return 0 }})
	require.NoError(t, err)
	require.NoError(t, a.Start(context.Background()))
	t.Cleanup(a.Stop)
	waitFor(t, dir, "exec-1 live", func() bool { return len(dir.Live("p")) == 1 })

	// Hold the next produce request at the broker, so the heartbeats after
	// it wait in the producer's buffer.
	held, release := make(chan struct{}), make(chan struct{})
	var holdOnce sync.Once
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		holdOnce.Do(func() {
			close(held)
			c.SleepControl(func() { <-release })
		})
		return nil, nil, false
	})
	<-held
	// The producer sends up to five requests to a broker at once; of the
	// heartbeats begun after the held one, the ones past the fifth wait in
	// the buffer. The loop produces a heartbeat before it begins the next.
	from := announced.Load()
	require.Eventually(t, func() bool { return announced.Load() >= from+12 }, wait, time.Millisecond)

	stopped := make(chan struct{})
	go func() {
		a.Stop()
		close(stopped)
	}()
	<-hook.ch // the tombstone waits behind the canceled heartbeats
	close(release)
	<-stopped

	// Stopped, it has expired (5 ms heartbeats) or left; the tombstone
	// turns an expired member to Left.
	waitFor(t, dir, "exec-1 left", func() bool {
		m, ok := dir.Member("exec-1")
		return ok && m.State == Left
	})
}
