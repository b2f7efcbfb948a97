package leasing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBatcherRedis(t *testing.T)     { runBatcher(t, realRedis) }
func TestBatcherMiniredis(t *testing.T) { runBatcher(t, miniRedis) }

func runBatcher(t *testing.T, newBackend backendFactory) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, b backend)
	}{
		{"SameRepliesAsTheStore", testBatcherReplies},
		{"CallsArrivingDuringAPipelineShareTheNext", testBatcherShares},
		{"RacingAcquiresOfOneRunOneWins", testBatcherRace},
		{"NoScriptIsRecovered", testBatcherNoScript},
		{"KeeperRenewsThroughTheBatcher", testBatcherKeeper},
		{"RenewalsOfManyRunsShareAPipeline", testBatcherRenewalsShare},
		{"UpToNPipelinesOutAtOnce", testBatcherPipelines},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, newBackend(t))
		})
	}
}

// testBatcherReplies: acquire, complete, release and their refusals come
// back as from the Store's own methods.
func testBatcherReplies(t *testing.T, b backend) {
	s, _ := setup(t, b, keeperTimes)
	bt := NewBatcher(s, 0, 0)
	ctx := t.Context()

	l, err := bt.Acquire(ctx, Request{JobID: "j", RunID: "r1", Limit: 1})
	require.NoError(t, err)
	assert.Positive(t, l.Token)
	_, err = bt.Acquire(ctx, Request{JobID: "j", RunID: "r1", Limit: 1})
	require.ErrorIs(t, err, ErrRunHeld)
	_, err = bt.Acquire(ctx, Request{JobID: "j", RunID: "r2", Limit: 1})
	var ns *NoSlotError
	require.ErrorAs(t, err, &ns)
	assert.Equal(t, []string{"r1"}, ns.Holders)
	require.NoError(t, bt.Complete(ctx, l))
	_, err = bt.Acquire(ctx, Request{JobID: "j", RunID: "r1", Limit: 1})
	require.ErrorIs(t, err, ErrAlreadyDone)

	l2, err := bt.Acquire(ctx, Request{JobID: "j", RunID: "r2", Limit: 1})
	require.NoError(t, err)
	assert.Greater(t, l2.Token, l.Token)
	require.NoError(t, bt.Release(ctx, l2))
	require.ErrorIs(t, bt.Release(ctx, l2), ErrLeaseLost)
	require.ErrorIs(t, bt.Complete(ctx, l2), ErrLeaseLost)

	_, err = bt.Acquire(ctx, Request{JobID: "bad{", RunID: "r"})
	require.ErrorContains(t, err, "JobID")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = bt.Acquire(cancelled, Request{JobID: "j", RunID: "r3"})
	require.ErrorIs(t, err, context.Canceled)
}

// gate holds the first pipeline of scripts until released, and records the
// size of every such pipeline.
type gate struct {
	mu      sync.Mutex
	sizes   []int
	entered chan struct{}
	release chan struct{}
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || cmds[0].Name() != "evalsha" {
			return next(ctx, cmds) // the connection's handshake
		}
		g.mu.Lock()
		g.sizes = append(g.sizes, len(cmds))
		first := len(g.sizes) == 1
		g.mu.Unlock()
		if first {
			close(g.entered)
			<-g.release
		}
		return next(ctx, cmds)
	}
}

// requireDistinctLeases checks that every call got a lease, each with its
// own fencing token.
func requireDistinctLeases(t *testing.T, leases []Lease, errs []error) {
	t.Helper()
	tokens := map[int64]bool{}
	for i := range leases {
		require.NoError(t, errs[i], "call %d", i)
		assert.False(t, tokens[leases[i].Token], "token %d given twice", leases[i].Token)
		tokens[leases[i].Token] = true
	}
}

func (bt *Batcher) queued() int {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return len(bt.queue)
}

// testBatcherShares: while one pipeline is out, the calls that arrive wait
// and then go together in one pipeline, in arrival order, up to the
// batch size.
func testBatcherShares(t *testing.T, b backend) {
	g := &gate{entered: make(chan struct{}), release: make(chan struct{})}
	s, _ := setupHooked(t, b, []redis.Hook{g}, keeperTimes)
	const n, maxBatch = 25, 10
	bt := NewBatcher(s, maxBatch, 1)
	ctx := t.Context()

	first := make(chan error, 1)
	go func() {
		_, err := bt.Acquire(ctx, Request{JobID: "share", RunID: "first", Limit: 1000})
		first <- err
	}()
	<-g.entered
	var wg sync.WaitGroup
	leases := make([]Lease, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			leases[i], errs[i] = bt.Acquire(ctx, Request{JobID: "share", RunID: fmt.Sprint("r", i), Limit: 1000})
		})
	}
	require.Eventually(t, func() bool { return bt.queued() == n }, 10*time.Second, time.Millisecond)
	close(g.release)
	require.NoError(t, <-first)
	wg.Wait()
	requireDistinctLeases(t, leases, errs)
	g.mu.Lock()
	defer g.mu.Unlock()
	assert.Equal(t, []int{1, 10, 10, 5}, g.sizes, "the first call alone, then the waiting ones by batches of %d", maxBatch)
}

// testBatcherRace: many goroutines acquire the same run through one
// Batcher: one lease, the rest ErrRunHeld.
func testBatcherRace(t *testing.T, b backend) {
	s, _ := setup(t, b, keeperTimes)
	bt := NewBatcher(s, 0, 0)
	ctx := t.Context()
	const n = 50
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = bt.Acquire(ctx, Request{JobID: "race", RunID: "r", Limit: 5})
		})
	}
	wg.Wait()
	won, held := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, ErrRunHeld):
			held++
		default:
			t.Errorf("unexpected error %v", err)
		}
	}
	assert.Equal(t, 1, won)
	assert.Equal(t, n-1, held)
}

// testBatcherNoScript: after SCRIPT FLUSH, a pipeline of several scripts
// loads them and succeeds.
func testBatcherNoScript(t *testing.T, b backend) {
	s, c := setup(t, b, keeperTimes)
	bt := NewBatcher(s, 0, 0)
	ctx := t.Context()
	l, err := bt.Acquire(ctx, Request{JobID: "ns", RunID: "a", Limit: 2})
	require.NoError(t, err)
	require.NoError(t, c.ScriptFlush(ctx).Err())
	l2, err := bt.Acquire(ctx, Request{JobID: "ns", RunID: "b", Limit: 2})
	require.NoError(t, err)
	require.NoError(t, c.ScriptFlush(ctx).Err())
	// One pipeline of two different scripts, neither loaded.
	vals, errs := s.evalPipeline(ctx, []scriptCall{
		{sc: s.scripts.complete, c: s.completeCall(l)},
		{sc: s.scripts.release, c: s.releaseCall(l2)},
	})
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	assert.EqualValues(t, 1, vals[0])
	assert.EqualValues(t, 1, vals[1])
	_, err = bt.Acquire(ctx, Request{JobID: "ns", RunID: "a", Limit: 2})
	require.ErrorIs(t, err, ErrAlreadyDone)
}

// testBatcherKeeper: a Keeper made by the Batcher renews the lease, so it
// keeps the slot past its TTL, and cancels its context when the lease is
// lost; Renew refuses a lease that is not held, as Store.Renew does.
func testBatcherKeeper(t *testing.T, b backend) {
	s, c := setup(t, b, keeperTimes)
	bt := NewBatcher(s, 0, 0)
	ctx := t.Context()
	a, err := bt.Acquire(ctx, Request{JobID: "bk", RunID: "bk@1"})
	require.NoError(t, err)
	k := bt.NewKeeper(a, nil)
	require.NoError(t, k.Start(ctx))
	defer k.Stop()
	require.Eventually(t, func() bool { return k.Lease().AcquiredAt.After(a.AcquiredAt) }, 2*a.TTL, 10*time.Millisecond,
		"the Keeper renewed")
	// Past the first lease's TTL, the renewed lease still holds the slot.
	require.Never(t, func() bool {
		_, err := s.Acquire(ctx, Request{JobID: "bk", RunID: "bk@2"})
		return err == nil
	}, a.TTL+200*time.Millisecond, 20*time.Millisecond)
	require.NoError(t, k.Context().Err())

	require.NoError(t, c.Del(ctx, s.slotsKey("bk"), s.holdersKey("bk")).Err())
	waitDone(t, k.Context(), 2*a.TTL)
	require.ErrorIs(t, context.Cause(k.Context()), ErrLeaseLost)
	_, err = bt.Renew(ctx, a)
	require.ErrorIs(t, err, ErrLeaseLost)
}

// testBatcherRenewalsShare: the renewals of many runs that fall due while
// one renewal is out go to Redis together: n leases cost 2 round trips to
// renew, not n.
func testBatcherRenewalsShare(t *testing.T, b backend) {
	g := &gate{entered: make(chan struct{}), release: make(chan struct{})}
	s, _ := setupHooked(t, b, []redis.Hook{g}, keeperTimes)
	bt := NewBatcher(s, 0, 1)
	ctx := t.Context()
	const n = 40
	keepers := make([]*Keeper, n)
	leases := make([]Lease, n)
	for i := range n {
		l, err := s.Acquire(ctx, Request{JobID: fmt.Sprint("share-", i%4), RunID: fmt.Sprint("r", i), Limit: n})
		require.NoError(t, err)
		leases[i] = l
		keepers[i] = bt.NewKeeper(l, nil)
		require.NoError(t, keepers[i].Start(ctx))
		defer keepers[i].Stop()
	}
	// The first renewal is held at Redis's door until the others queue.
	<-g.entered
	require.Eventually(t, func() bool { return bt.queued() == n-1 }, leases[0].TTL, time.Millisecond)
	close(g.release)
	for i, k := range keepers {
		require.Eventually(t, func() bool { return k.Lease().AcquiredAt.After(leases[i].AcquiredAt) }, leases[i].TTL, time.Millisecond,
			"keeper %d renewed", i)
		require.NoError(t, k.Context().Err(), "keeper %d", i)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	require.GreaterOrEqual(t, len(g.sizes), 2)
	assert.Equal(t, []int{1, n - 1}, g.sizes[:2], "the first renewal alone, then the %d that fell due meanwhile together", n-1)
}

// holdAll holds every pipeline of scripts until released, and records the
// size of each and how many were out at once.
type holdAll struct {
	mu       sync.Mutex
	sizes    []int
	out, max int
	release  chan struct{}
}

func (h *holdAll) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *holdAll) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *holdAll) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || cmds[0].Name() != "evalsha" {
			return next(ctx, cmds)
		}
		h.mu.Lock()
		h.sizes = append(h.sizes, len(cmds))
		h.out++
		h.max = max(h.max, h.out)
		h.mu.Unlock()
		<-h.release
		err := next(ctx, cmds)
		h.mu.Lock()
		h.out--
		h.mu.Unlock()
		return err
	}
}

func (h *holdAll) entered() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sizes)
}

// testBatcherPipelines: with 3 pipelines, the first 3 calls go out at once,
// each alone, and the rest queue; once Redis answers, the queued calls go
// in batches, never more than 3 pipelines out at once, and each call gets
// its own lease.
func testBatcherPipelines(t *testing.T, b backend) {
	h := &holdAll{release: make(chan struct{})}
	s, _ := setupHooked(t, b, []redis.Hook{h}, keeperTimes)
	const n, pipelines, maxBatch = 20, 3, 4
	bt := NewBatcher(s, maxBatch, pipelines)
	ctx := t.Context()

	var wg sync.WaitGroup
	leases := make([]Lease, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			leases[i], errs[i] = bt.Acquire(ctx, Request{JobID: "pipes", RunID: fmt.Sprint("r", i), Limit: n})
		})
	}
	require.Eventually(t, func() bool { return bt.queued() == n-pipelines }, 10*time.Second, time.Millisecond)
	assert.Equal(t, pipelines, h.entered(), "pipelines out while the rest queue")
	close(h.release)
	wg.Wait()

	requireDistinctLeases(t, leases, errs)
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.LessOrEqual(t, h.max, pipelines, "pipelines out at once")
	sum := 0
	for _, size := range h.sizes {
		assert.LessOrEqual(t, size, maxBatch)
		sum += size
	}
	assert.Equal(t, n, sum, "every call sent once: %v", h.sizes)
	assert.Equal(t, []int{1, 1, 1}, h.sizes[:pipelines], "the first calls alone")
}
