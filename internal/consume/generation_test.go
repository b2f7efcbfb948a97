package consume_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/consume"
)

func TestGenerationEnded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{kerr.UnknownMemberID, true},
		{kerr.IllegalGeneration, true},
		{kerr.RebalanceInProgress, true},
		{kerr.FencedInstanceID, true},
		{kerr.FencedMemberEpoch, true},
		{kerr.StaleMemberEpoch, true},
		{fmt.Errorf("commit: %w", kerr.UnknownMemberID), true},
		{kerr.CoordinatorNotAvailable, false},
		{kerr.NotCoordinator, false},
		{kerr.RequestTimedOut, false},
		{context.DeadlineExceeded, false},
		{errors.New("dial tcp: connection refused"), false},
	} {
		assert.Equal(t, tc.want, consume.GenerationEnded(tc.err), "%v", tc.err)
	}
}

// A member dropped from its group while it handles a poll (its session
// expired while Kafka was away; here an operator removes it) cannot commit
// that poll: the group answers UNKNOWN_MEMBER_ID. The loop must give the
// commit up and let the client rejoin; the records stay uncommitted until a
// later commit covers them (or the partition's next owner handles them
// again). Retrying the commit instead holds the poll, and with it the
// rejoin, for ever: nothing more is consumed or committed (a DAG engine did
// that for nine minutes of a chaos run).
func TestLoopRejoinsWhenTheGroupDroppedItDuringAPoll(t *testing.T) {
	k, adm, topic, group := groupTopic(t, "dropped", 1)

	var (
		mu      sync.Mutex
		handled = map[string]int{}
	)
	count := func(v string) int { mu.Lock(); defer mu.Unlock(); return handled[v] }
	inFirst, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	handle := func(ctx context.Context, rec *kgo.Record) []*kgo.Record {
		v := string(rec.Value)
		if v == "first" {
			once.Do(func() {
				close(inFirst)
				select {
				case <-release:
				case <-ctx.Done():
				}
			})
		}
		mu.Lock()
		handled[v]++
		mu.Unlock()
		return nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.Brokers...), kgo.InstanceID("a"),
		kgo.SessionTimeout(time.Minute), kgo.HeartbeatInterval(time.Second)},
		consume.GroupOptions(group, topic)...)...)
	require.NoError(t, err)
	defer cl.Close()
	loop := &consume.Loop{
		Client: cl, Handle: handle, Concurrency: 1, MaxPoll: 10,
		Backoff: backoff.Config{Min: time.Millisecond, Max: 100 * time.Millisecond},
		Logger:  slog.New(slog.DiscardHandler),
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); loop.Run(ctx) }()
	defer func() { cancel(); <-done }()

	prod, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer prod.Close()
	require.NoError(t, prod.ProduceSync(t.Context(), &kgo.Record{Value: []byte("first")}).FirstErr())
	<-inFirst

	// The member is dropped while the poll is in its hands.
	left, err := adm.LeaveGroup(t.Context(), kadm.LeaveGroup(group).InstanceIDs("a").Reason("test: drop the member"))
	require.NoError(t, err)
	require.NoError(t, left.Error())
	close(release)
	require.NoError(t, prod.ProduceSync(t.Context(), &kgo.Record{Value: []byte("second")}).FirstErr())

	require.Eventually(t, func() bool { return count("second") > 0 }, 3*time.Minute, 50*time.Millisecond,
		"the loop goes on consuming")

	// It rejoins under a new member id and commits again: the records whose
	// commits were given up were handled, and a later commit covers them.
	require.NoError(t, prod.ProduceSync(t.Context(), &kgo.Record{Value: []byte("third")}).FirstErr())
	committed := func() int64 {
		offsets, err := adm.FetchOffsets(t.Context(), group)
		if err != nil {
			return -1
		}
		o, ok := offsets.Lookup(topic, 0)
		if !ok {
			return -1
		}
		return o.At
	}
	require.Eventually(t, func() bool { return count("third") > 0 && committed() == 3 }, 3*time.Minute, 50*time.Millisecond,
		"the loop rejoins and commits every record it handled")
}
