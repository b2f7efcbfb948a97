package consume_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/consume"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The loop's mechanics run against franz-go's in-process fake cluster; the
// registry's and trigger's tests run it against a real Kafka.
func cluster(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "in", "out"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func produce(t *testing.T, brokers []string, n, keys int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Key: []byte(fmt.Sprintf("k%d", i%keys)), Value: []byte(fmt.Sprint(i))}
	}
	require.NoError(t, cl.ProduceSync(t.Context(), recs...).FirstErr())
}

func committed(t *testing.T, brokers []string, group string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	offsets, err := kadm.NewClient(cl).FetchOffsets(t.Context(), group)
	require.NoError(t, err)
	var total int64
	offsets.Each(func(o kadm.OffsetResponse) { total += o.At })
	return total
}

func newLoop(t *testing.T, brokers []string, group string, handle consume.Handler) (*consume.Loop, *kgo.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, consume.GroupOptions(group, "in")...)...)
	require.NoError(t, err)
	return &consume.Loop{
		Client: cl, Handle: handle, Concurrency: 4, MaxPoll: 50,
		Backoff: backoff.Config{Min: time.Millisecond, Max: 10 * time.Millisecond},
		Logger:  slog.New(slog.DiscardHandler),
	}, cl
}

func TestLoopKeepsKeyOrderAndCommitsAfterAnswers(t *testing.T) {
	t.Parallel()
	brokers := cluster(t)
	const n, keys = 300, 7
	produce(t, brokers, n, keys)

	var (
		mu   sync.Mutex
		seen = map[string][]int64{}
		done = make(chan struct{})
		all  atomic.Int64
	)
	loop, cl := newLoop(t, brokers, "g", func(_ context.Context, rec *kgo.Record) []*kgo.Record {
		mu.Lock()
		seen[string(rec.Key)] = append(seen[string(rec.Key)], rec.Offset)
		mu.Unlock()
		return []*kgo.Record{{Topic: "out", Key: rec.Key, Value: rec.Value}}
	})
	loop.OnCommitted = func(k int) {
		if all.Add(int64(k)) == n {
			close(done)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		loop.Run(ctx)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("not every record was committed")
	}
	cancel()
	<-stopped
	cl.Close()

	for key, offsets := range seen {
		assert.IsIncreasing(t, offsets, "records of %s in offset order", key)
	}
	assert.Equal(t, int64(n), committed(t, brokers, "g"))

	// Every answer was produced.
	out, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer out.Close()
	got := 0
	for got < n {
		fs := out.PollFetches(t.Context())
		require.NoError(t, fs.Err())
		got += fs.NumRecords()
	}
	assert.Equal(t, n, got)
}

// TestNothingCommittedUntilDone: a record whose handler cannot finish (a
// store that stays down) holds back its poll's commit, and the next member
// of the group gets every record of that poll again.
func TestNothingCommittedUntilDone(t *testing.T) {
	t.Parallel()
	brokers := cluster(t)
	const n = 20
	produce(t, brokers, n, 1)

	reached := make(chan struct{})
	var once sync.Once
	loop, cl := newLoop(t, brokers, "g", func(ctx context.Context, rec *kgo.Record) []*kgo.Record {
		if string(rec.Value) == "5" {
			once.Do(func() { close(reached) })
			<-ctx.Done() // retrying a transient error until stopped
		}
		return nil
	})
	loop.MaxPoll = n
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		loop.Run(ctx)
	}()
	<-reached
	cancel()
	<-stopped
	cl.Close()
	// Record 5 (offset 5) never finished: its poll is not committed.
	kept := committed(t, brokers, "g")
	assert.LessOrEqual(t, kept, int64(5), "nothing of the unfinished poll is committed")

	var redelivered atomic.Int64
	done := make(chan struct{})
	loop2, cl2 := newLoop(t, brokers, "g", func(context.Context, *kgo.Record) []*kgo.Record {
		if redelivered.Add(1) == n-kept {
			close(done)
		}
		return nil
	})
	ctx2, cancel2 := context.WithCancel(t.Context())
	stopped2 := make(chan struct{})
	go func() {
		defer close(stopped2)
		loop2.Run(ctx2)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("records were not redelivered")
	}
	cancel2()
	<-stopped2
	cl2.Close()
}

// TestAnsweredPollCommittedWhenStopComes: a Stop that arrives while the
// commit of a fully answered poll is in flight must not cancel that commit,
// or a graceful restart would handle and answer the poll's records again.
// The broker fails the first commit with a retriable error at the moment
// the loop's context is cancelled; the loop must try again and commit.
func TestAnsweredPollCommittedWhenStopComes(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "in", "out"))
	require.NoError(t, err)
	defer c.Close()
	brokers := c.ListenAddrs()
	const n = 20
	produce(t, brokers, n, 4)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cancel() // Stop, while the commit is in flight
		r := req.(*kmsg.OffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range r.Topics {
			t := kmsg.NewOffsetCommitResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewOffsetCommitResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, kerr.CoordinatorLoadInProgress.Code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true // handled once: the next commit reaches the broker
	})

	var handled atomic.Int64
	loop, cl := newLoop(t, brokers, "g", func(context.Context, *kgo.Record) []*kgo.Record {
		handled.Add(1)
		return nil
	})
	defer cl.Close()
	loop.MaxPoll = n
	loop.Run(ctx)
	require.Positive(t, handled.Load())
	require.Equal(t, handled.Load(), committed(t, brokers, "g"),
		"the records handled before Stop (offsets start at 0) were not all committed")
}
