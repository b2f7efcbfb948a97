package startoffsetstest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sundialhq/sundial/internal/topics"
)

// hang bounds each wait of a round. It is no timing: a round that waits
// this long is stuck.
const hang = time.Minute

// Rounds runs round n times, each as a subtest, and stops at the first
// round that fails.
func Rounds(t *testing.T, n int, round func(t *testing.T)) {
	t.Helper()
	for i := range n {
		if !t.Run(fmt.Sprintf("round_%d_of_%d", i+1, n), round) {
			return
		}
	}
}

// SundialTopics returns the cluster options that seed every topic of an
// installation named by names, with shards partitions of sundial.shards.
func SundialTopics(t testing.TB, names topics.Names, shards int) []kfake.Opt {
	t.Helper()
	specs, err := names.Specs(shards)
	require.NoError(t, err)
	opts := make([]kfake.Opt, 0, len(specs))
	for _, s := range specs {
		opts = append(opts, kfake.SeedTopics(s.Partitions, s.Name))
	}
	return opts
}

// Race is the staged race on one cluster. Its methods are safe for
// concurrent use.
type Race struct {
	t       testing.TB
	cluster *kfake.Cluster
	writer  *kgo.Client

	mu       sync.Mutex
	topic    string
	topicID  [16]byte
	minFetch map[int32]int64 // by partition of topic, since Arm

	armedBy   atomic.Pointer[kmsg.ListOffsetsRequest]
	writing   atomic.Bool
	written   chan struct{} // closed once the record is written
	skipped   chan struct{} // closed once the reader fetched past it
	skipOnce  sync.Once
	partition int32 // of the record, once written
	offset    int64 // of the record, once written
}

// Start starts a cluster of one broker with the given options (the topics
// to seed) and the writer of the record, a client with connections of its
// own made with writerOpts and no linger. Both close when t ends.
func Start(t testing.TB, cluster []kfake.Opt, writerOpts ...kgo.Opt) *Race {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, cluster...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	w, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0)}, writerOpts...)...)
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return &Race{t: t, cluster: c, writer: w, written: make(chan struct{}), skipped: make(chan struct{})}
}

// Brokers are the cluster's addresses, for the reader.
func (r *Race) Brokers() []string { return r.cluster.ListenAddrs() }

// Arm stages the race on rec's topic: once the broker has answered the
// first lookup by time of that topic, the next request it handles waits
// until rec is written. Arm before the reader looks its start up, and only
// once.
func (r *Race) Arm(rec *kgo.Record) {
	r.t.Helper()
	topic := rec.Topic
	details, err := kadm.NewClient(r.writer).ListTopics(r.t.Context(), topic)
	require.NoError(r.t, err)
	require.NoError(r.t, details[topic].Err, "topic %s", topic)
	r.mu.Lock()
	r.topic, r.topicID = topic, details[topic].ID // fetches may name topics by id
	r.minFetch = map[int32]int64{}
	r.mu.Unlock()

	r.cluster.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r.cluster.KeepControl()
		list := req.(*kmsg.ListOffsetsRequest)
		for _, tp := range list.Topics {
			for _, p := range tp.Partitions {
				if tp.Topic == topic && p.Timestamp >= 0 && !r.writing.Load() {
					r.armedBy.CompareAndSwap(nil, list)
				}
			}
		}
		return nil, nil, false // the cluster answers
	})
	r.cluster.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		r.cluster.KeepControl()
		// Not the lookup itself (its controls run before the broker
		// answers it): the request the broker handles after it.
		if by := r.armedBy.Load(); by != nil && kmsg.Request(by) != req && r.writing.CompareAndSwap(false, true) {
			r.cluster.SleepControl(func() { r.write(rec) })
		}
		return nil, nil, false
	})
	r.cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r.cluster.KeepControl()
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			for _, p := range tp.Partitions {
				r.fetched(tp.Topic, tp.TopicID, p.Partition, p.FetchOffset)
			}
		}
		return nil, nil, false
	})
}

func (r *Race) write(rec *kgo.Record) {
	if err := r.writer.ProduceSync(r.t.Context(), rec).FirstErr(); err != nil {
		r.t.Errorf("write the record to %s during the lookup: %v", rec.Topic, err)
		return
	}
	r.mu.Lock()
	r.partition, r.offset = rec.Partition, rec.Offset
	r.mu.Unlock()
	close(r.written)
	r.checkSkipped()
}

func (r *Race) fetched(topic string, id [16]byte, partition int32, offset int64) {
	r.mu.Lock()
	if topic == r.topic || id == r.topicID {
		if low, ok := r.minFetch[partition]; !ok || offset < low {
			r.minFetch[partition] = offset
		}
	}
	r.mu.Unlock()
	r.checkSkipped()
}

func (r *Race) checkSkipped() {
	if !r.Written() {
		return
	}
	r.mu.Lock()
	low, ok := r.minFetch[r.partition]
	past := ok && low > r.offset
	r.mu.Unlock()
	if past {
		r.skipOnce.Do(func() { close(r.skipped) })
	}
}

// Written reports whether the record has been written: the reader looked
// its start up by time, and the race happened.
func (r *Race) Written() bool {
	select {
	case <-r.written:
		return true
	default:
		return false
	}
}

// Skipped is closed once the reader has fetched the record's partition only
// from past the record.
func (r *Race) Skipped() <-chan struct{} { return r.skipped }

// UntilSkipped returns a context that also ends once the reader has
// skipped the record, for a reader that blocks until it reads it.
func (r *Race) UntilSkipped(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-r.skipped:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// Await waits until the record is written, then until read reports it
// read or the reader skipped it, and fails t in the latter case.
func (r *Race) Await(t testing.TB, read func() bool) {
	t.Helper()
	select {
	case <-r.written:
	case <-time.After(hang):
		t.Fatalf("the record was never written: the reader made no lookup by time of %s", r.topic)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	stuck := time.After(hang)
	for !read() {
		select {
		case <-r.skipped:
			if read() {
				return
			}
			t.Fatalf("the record written while the reader looked up its start was never read: %s", r)
		case <-stuck:
			t.Fatalf("the reader neither read the record nor fetched past it: %s", r)
		case <-tick.C:
		}
	}
}

// String says where the record is and where the reader fetched from.
func (r *Race) String() string {
	if !r.Written() {
		return fmt.Sprintf("no record written to %s yet", r.topic)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	where := fmt.Sprintf("the record is at %s[%d]@%d", r.topic, r.partition, r.offset)
	if low, ok := r.minFetch[r.partition]; ok {
		return fmt.Sprintf("%s; the lowest offset fetched there is %d", where, low)
	}
	return where + "; nothing was fetched there"
}
