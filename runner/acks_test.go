package runner

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sundialhq/sundial/internal/topics"
)

// heldAcks is a kfake cluster whose acknowledgements of produces to the
// events topic can be held back.
type heldAcks struct {
	b       backends
	hold    atomic.Bool
	held    atomic.Int64 // produce requests to the events topic being held
	release chan struct{}
	once    sync.Once
}

func newHeldAcks(t *testing.T) *heldAcks {
	t.Helper()
	names := topics.Names{}
	all := append(names.AllRuns(), names.Events(), names.DLQ(), "out")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, all...))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	h := &heldAcks{release: make(chan struct{})}
	t.Cleanup(h.let)
	// Produce requests name a topic by id from version 13 on.
	events := c.TopicInfo(names.Events())
	require.NotNil(t, events)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !h.hold.Load() {
			return nil, nil, false
		}
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			if tp.Topic == names.Events() || tp.TopicID == events.TopicID {
				h.held.Add(1)
				c.SleepControl(func() { <-h.release })
				break
			}
		}
		return nil, nil, false // then answered as usual
	})
	mr := miniredis.RunT(t)
	mr.ClockTTL(true)
	h.b = backends{brokers: c.ListenAddrs(), names: names, redisAddr: mr.Addr(), prefix: "t:"}
	return h
}

// let answers the held produces and stops holding.
func (h *heldAcks) let() {
	h.once.Do(func() {
		h.hold.Store(false)
		close(h.release)
	})
}

// A worker does not wait for the acknowledgement of its run's events, for a
// failed run as for a succeeded one: with one worker and the events topic's
// acknowledgements held back, the next run starts. The offsets of those runs
// become committable only once their events are acknowledged.
func TestWorkerDoesNotWaitForEventAcks(t *testing.T) {
	t.Parallel()
	acks := newHeldAcks(t)
	h := newHarness(t, acks.b, steadyTTL)
	h.down.set(func(r *http.Request, n int) (int, http.Header) {
		if r.URL.Path == "/fails-once" && n == 1 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	acks.hold.Store(true)
	r := h.start(func(c *Config) { c.Concurrency, c.MaxInFlight = 1, 8 })
	// Cleanups run last first: the acknowledgements come before the
	// runner's Stop, which waits for them.
	t.Cleanup(acks.let)
	now := time.Now()
	first := h.run("fails-once", now, nil)
	second := h.run("succeeds", now.Add(time.Millisecond), nil)
	third := h.run("succeeds", now.Add(2*time.Millisecond), nil)
	h.produce(first)
	require.Eventually(t, func() bool { return h.down.requestsOf(first.GetRunId()) == 1 }, wait, 5*time.Millisecond)
	// The first run failed and its events are held; the one worker takes
	// the next run anyway, and then the one after a success.
	h.produce(second)
	require.Eventually(t, func() bool { return h.down.requestsOf(second.GetRunId()) == 1 }, wait, 5*time.Millisecond,
		"the worker waited for the failed run's acknowledgements")
	h.produce(third)
	require.Eventually(t, func() bool { return h.down.requestsOf(third.GetRunId()) == 1 }, wait, 5*time.Millisecond,
		"the worker waited for the succeeded run's acknowledgements")
	// The first runs' events may still linger in the producer
	// (eventLinger) when the third run starts; once they reach the broker
	// their acknowledgements are held.
	require.Eventually(t, func() bool { return acks.held.Load() > 0 }, wait, 5*time.Millisecond,
		"no acknowledgement was held: the test proves nothing")
	for k, off := range r.in.committedView() {
		assert.LessOrEqual(t, off, int64(0), "%s/%d: an offset is committable before its run's events are acknowledged", k.topic, k.partition)
	}

	acks.let()
	waitStates(t, h, first.GetRunId(), started, failed, retrying, started, succeeded)
	waitStates(t, h, second.GetRunId(), started, succeeded)
	waitStates(t, h, third.GetRunId(), started, succeeded)
	// Three runs and a retry: four records, all committable in the end.
	require.Eventually(t, func() bool {
		sum := int64(0)
		for _, off := range r.in.committedView() {
			sum += max(off, 0)
		}
		return sum == 4
	}, wait, 10*time.Millisecond, "committable: %v", r.in.committedView())
	effects, dup, _ := h.down.counts()
	assert.Equal(t, 3, effects)
	assert.Zero(t, dup)
}
