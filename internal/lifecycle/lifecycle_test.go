package lifecycle_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sundialhq/sundial/internal/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// component is the smallest user of Lifecycle: one goroutine that runs
// until Stop, and a resource released by an OnStop hook.
type component struct {
	life     lifecycle.Lifecycle
	fail     error
	running  atomic.Int32 // goroutines alive
	released atomic.Int32 // OnStop hooks run
	started  chan struct{}
}

func (c *component) Start(ctx context.Context) error {
	return c.life.Start(ctx, func(_ context.Context, run *lifecycle.Run) error {
		c.started = make(chan struct{})
		started := c.started
		run.OnStop(func() { c.released.Add(1) })
		run.Go(func(ctx context.Context) {
			c.running.Add(1)
			defer c.running.Add(-1)
			close(started)
			<-ctx.Done()
		})
		return c.fail
	})
}

func (c *component) Stop() { c.life.Stop() }

func TestLifecycle(t *testing.T) {
	t.Parallel()

	t.Run("StopBeforeStart", func(t *testing.T) {
		t.Parallel()
		c := &component{}
		c.Stop()
		c.Stop()
		require.False(t, c.life.Running())
		require.Zero(t, c.released.Load())
	})

	t.Run("StartStopTwice", func(t *testing.T) {
		t.Parallel()
		c := &component{}
		for i := range 2 {
			require.NoError(t, c.Start(t.Context()))
			<-c.started
			require.True(t, c.life.Running())
			require.Equal(t, int32(1), c.running.Load())
			c.Stop()
			require.Zero(t, c.running.Load(), "Stop returned before its goroutine did")
			require.Equal(t, int32(i+1), c.released.Load())
			c.Stop()
			require.Equal(t, int32(i+1), c.released.Load(), "a second Stop released again")
		}
	})

	t.Run("StartWhileRunning", func(t *testing.T) {
		t.Parallel()
		c := &component{}
		require.NoError(t, c.Start(t.Context()))
		t.Cleanup(c.Stop)
		require.ErrorIs(t, c.Start(t.Context()), lifecycle.ErrRunning)
	})

	t.Run("FailedStartIsUndone", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		c := &component{fail: boom}
		require.ErrorIs(t, c.Start(t.Context()), boom)
		require.False(t, c.life.Running())
		require.Zero(t, c.running.Load())
		require.Equal(t, int32(1), c.released.Load())
		c.fail = nil
		require.NoError(t, c.Start(t.Context()))
		c.Stop()
		require.Equal(t, int32(2), c.released.Load())
	})

	t.Run("RunOutlivesStartContext", func(t *testing.T) {
		t.Parallel()
		c := &component{}
		ctx, cancel := context.WithCancel(t.Context())
		require.NoError(t, c.Start(ctx))
		<-c.started
		cancel()
		require.True(t, c.life.Running())
		require.Equal(t, int32(1), c.running.Load())
		c.Stop()
		require.Zero(t, c.running.Load())
	})

	t.Run("HooksRunInReverseAfterGoroutines", func(t *testing.T) {
		t.Parallel()
		var life lifecycle.Lifecycle
		var order []string
		exited := make(chan struct{})
		require.NoError(t, life.Start(t.Context(), func(_ context.Context, run *lifecycle.Run) error {
			run.OnStop(func() { order = append(order, "first") })
			run.OnStop(func() {
				select {
				case <-exited:
					order = append(order, "second")
				default:
					order = append(order, "second before the goroutine exited")
				}
			})
			run.Go(func(ctx context.Context) {
				defer close(exited)
				<-ctx.Done()
			})
			return nil
		}))
		life.Stop()
		require.Equal(t, []string{"second", "first"}, order)
	})
}

// step records its Start and Stop in a shared log.
type step struct {
	name string
	fail error
	log  *[]string
}

func (s step) Start(context.Context) error {
	*s.log = append(*s.log, "start "+s.name)
	return s.fail
}

func (s step) Stop() { *s.log = append(*s.log, "stop "+s.name) }

func TestStartAll(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name    string
		failAt  int // index of the component whose Start fails; -1 none
		want    []string
		wantErr error
	}{
		{name: "every component starts in order and stops in reverse", failAt: -1,
			want: []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}},
		{name: "a failed start stops the ones started before it, not itself or later ones", failAt: 1,
			want: []string{"start a", "start b", "stop a"}, wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var log []string
			var comps []lifecycle.Component
			for i, n := range []string{"a", "b", "c"} {
				s := step{name: n, log: &log}
				if i == tt.failAt {
					s.fail = boom
				}
				comps = append(comps, s)
			}
			var l lifecycle.Lifecycle
			err := l.Start(t.Context(), func(ctx context.Context, run *lifecycle.Run) error {
				return run.StartAll(ctx, comps...)
			})
			require.ErrorIs(t, err, tt.wantErr)
			l.Stop()
			require.Equal(t, tt.want, log)
		})
	}
}
