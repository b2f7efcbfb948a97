package runner

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/checkpoint"
	"github.com/sundialhq/sundial/internal/testenv"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/store/cassandra"
)

// stepper is a handler of ten steps that checkpoints after each; its
// downstream records every step it performs, per run.
type stepper struct {
	mu    sync.Mutex
	steps []int
	// pause, when set, is called after step 3's effect and before its
	// checkpoint, on the first execution only.
	pause func()
	// suspended receives the error of a save that failed; release holds
	// the handler's return back until it is closed.
	suspended chan error
	release   chan struct{}
	once      sync.Once
}

func (s *stepper) handle(ctx context.Context, _ *sundialv1.Run) error {
	sess := checkpoint.FromContext(ctx)
	if sess == nil {
		return errors.New("no checkpoint session")
	}
	from := 0
	last, ok, err := sess.Last(ctx)
	if err != nil {
		return err
	}
	if ok {
		if from, err = strconv.Atoi(string(last.Data)); err != nil {
			return err
		}
	}
	for step := from + 1; step <= 10; step++ {
		s.mu.Lock()
		s.steps = append(s.steps, step)
		s.mu.Unlock()
		if step == 3 && s.pause != nil {
			s.once.Do(s.pause)
		}
		if err := sess.Save(ctx, []byte(strconv.Itoa(step))); err != nil {
			s.suspended <- err
			<-s.release
			return err
		}
	}
	return nil
}

func (s *stepper) seen() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.steps...)
}

// TestSuspendAfterCheckpointSurvivesCrashesAndResumes is the done-when of
// suspension on the real stack. A ten-step handler is asked to suspend
// during step 3: its third checkpoint reports ErrSuspended. Its runner is
// killed before it can record SUSPENDED; the runner that takes the
// partition over finds the run to suspend and records SUSPENDED without
// executing it. That runner is killed too, while the run is suspended; the
// resume is executed by a third runner, which starts at step 4. The
// downstream sees steps 1..10, each once, in order.
func TestSuspendAfterCheckpointSurvivesCrashesAndResumes(t *testing.T) {
	t.Parallel()
	b := realBackends(t, 2)
	cs := testenv.NeedCassandra(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	ccfg := cassandra.Config{Hosts: cs.Hosts, Keyspace: cs.Keyspace}
	_, err := cassandra.Setup(ctx, ccfg, 1)
	require.NoError(t, err)
	st, err := cassandra.Open(ctx, ccfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	// Leases short enough for a takeover within seconds, long enough for
	// a busy machine's renewals.
	h := newHarness(t, b, 3*time.Second)
	asked := make(chan struct{})
	s := &stepper{suspended: make(chan error, 4), release: make(chan struct{})}
	run := h.run("suspend-steps", time.Now(), func(r *sundialv1.Run) {
		r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "steps"}}}
		r.Timeout = nil
	})
	s.pause = func() {
		require.NoError(t, SignalSuspend(ctx, h.redis, h.b.prefix+"runner:", run.GetJobId(), run.GetRunId()))
		close(asked)
	}
	withSteps := func(c *Config) {
		c.Handlers = map[string]target.Handler{"steps": target.HandlerFunc(s.handle)}
		c.Checkpoints = st
	}
	a := h.start(withSteps)
	waitAssigned(t, 3*2, a)
	h.produce(run)

	var saveErr error
	select {
	case saveErr = <-s.suspended:
	case <-ctx.Done():
		t.Fatalf("the handler was never told to suspend; steps %v, events %s", s.seen(), h.events.describe(run.GetRunId()))
	}
	<-asked
	require.ErrorIs(t, saveErr, checkpoint.ErrSuspended, "the third checkpoint's answer")
	cp, ok, err := st.LoadCheckpoint(ctx, run.GetRunId())
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(3), cp.Seq, "the checkpoint that reported the suspension is stored")
	assert.Equal(t, "3", string(cp.Data))

	// Crash before SUSPENDED is out: the second runner finds the run.
	bRunner := h.start(withSteps)
	a.kill()
	close(s.release) // A's handler returns into a dead runner
	require.Eventually(t, func() bool {
		for _, st := range h.events.states(run.GetRunId()) {
			if st == sundialv1.RunState_RUN_STATE_SUSPENDED {
				return true
			}
		}
		return false
	}, 2*time.Minute, 20*time.Millisecond, "no SUSPENDED; events %s", h.events.describe(run.GetRunId()))
	sp, ok, err := st.Suspended(ctx, run.GetRunId())
	require.NoError(t, err)
	require.True(t, ok, "the store holds the suspension")
	assert.Equal(t, run.GetJobId(), sp.JobID)
	assert.Equal(t, []int{1, 2, 3}, s.seen(), "the redelivery suspended the run without executing it")

	// Crash while suspended: nothing is lost.
	c := h.start(withSteps)
	bRunner.kill()
	job, err := Resume(ctx, ResumeConfig{Checkpoints: st, Enqueuer: h.enq, Redis: h.redis, KeyPrefix: h.b.prefix + "runner:", Now: time.Now}, run.GetRunId())
	require.NoError(t, err)
	assert.Equal(t, run.GetJobId(), job)
	_, err = Resume(ctx, ResumeConfig{Checkpoints: st, Enqueuer: h.enq, Redis: h.redis, KeyPrefix: h.b.prefix + "runner:", Now: time.Now}, run.GetRunId())
	assert.ErrorIs(t, err, checkpoint.ErrNotSuspended, "a second resume")

	require.Eventually(t, func() bool {
		for _, st := range h.events.states(run.GetRunId()) {
			if st == succeeded {
				return true
			}
		}
		return false
	}, 2*time.Minute, 20*time.Millisecond, "no SUCCEEDED; steps %v, events %s", s.seen(), h.events.describe(run.GetRunId()))
	assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, s.seen(), "steps seen downstream: 4 follows 3, each once")
	cp, ok, err = st.LoadCheckpoint(ctx, run.GetRunId())
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(10), cp.Seq)
	for _, ev := range h.events.all() {
		if ev.GetRunId() == run.GetRunId() && ev.GetState() == succeeded {
			assert.Equal(t, c.cfg.ID, ev.GetRunnerId(), "the resume ran on the third runner")
			assert.Equal(t, uint32(1), ev.GetAttempt(), "suspension spends no attempt")
		}
	}
}
