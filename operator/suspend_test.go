package operator_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/operator"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/worker"
)

// stepper is a handler of ten steps that checkpoints after each, through
// the worker SDK's calls. Its first execution waits at step 3, before the
// checkpoint, until gate is closed.
type stepper struct {
	gate    chan struct{}
	reached chan struct{}
	mu      sync.Mutex
	steps   []int
	once    sync.Once
}

func (s *stepper) handle(ctx context.Context, _ *sundialv1.Run) error {
	from := 0
	if data, ok, err := worker.LastCheckpoint(ctx); err != nil {
		return err
	} else if ok {
		if from, err = strconv.Atoi(string(data)); err != nil {
			return err
		}
	}
	for step := from + 1; step <= 10; step++ {
		s.mu.Lock()
		s.steps = append(s.steps, step)
		s.mu.Unlock()
		if step == 3 {
			s.once.Do(func() {
				close(s.reached)
				<-s.gate
			})
		}
		if err := worker.Checkpoint(ctx, []byte(strconv.Itoa(step))); err != nil {
			return err
		}
	}
	return nil
}

func (s *stepper) seen() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.steps)
}

// testSuspendAndResume: a run suspended during step 3 becomes SUSPENDED
// after its third checkpoint; ResumeRun dispatches it again under the same
// run id, and it goes on at step 4 to its success.
func testSuspendAndResume(t *testing.T) {
	p := newPipeline(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const id = "ops.steps"
	spec := job(id, &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "steps"}}})
	spec.Timeout = nil
	p.apply(spec)

	tr, err := p.op.Trigger(ctx, id, operator.TriggerOptions{})
	require.NoError(t, err)
	select {
	case <-p.steps.reached:
	case <-ctx.Done():
		t.Fatal("the run never reached step 3")
	}
	_, err = p.op.Suspend(ctx, id, "ops.steps@1", operator.SuspendOptions{})
	assert.ErrorIs(t, err, operator.ErrNotRunning)

	type result struct {
		res operator.SuspendResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := p.op.Suspend(ctx, id, tr.RunID, operator.SuspendOptions{Wait: true})
		done <- result{res, err}
	}()
	// The handler goes on once the suspension is asked (the action is
	// recorded right after its marker is set).
	require.Eventually(t, func() bool { return slices.Contains(p.audit.kinds(), "suspend "+id+" "+tr.RunID) }, time.Minute, 10*time.Millisecond)
	close(p.steps.gate)
	var got result
	select {
	case got = <-done:
	case <-ctx.Done():
		t.Fatal("no SUSPENDED")
	}
	require.NoError(t, got.err)
	require.NotNil(t, got.res.Event)
	assert.Equal(t, sundialv1.RunState_RUN_STATE_SUSPENDED, got.res.Event.GetState(), "event %v", got.res.Event)
	assert.Equal(t, []int{1, 2, 3}, p.steps.seen())

	since := time.Now()
	job, err := p.op.ResumeRun(ctx, tr.RunID)
	require.NoError(t, err)
	assert.Equal(t, id, job)
	_, err = p.op.ResumeRun(ctx, tr.RunID)
	assert.ErrorIs(t, err, operator.ErrNotSuspended, "a second resume")
	ev, err := p.op.WaitRun(ctx, tr.RunID, since)
	require.NoError(t, err)
	assert.Equal(t, sundialv1.RunState_RUN_STATE_SUCCEEDED, ev.GetState(), "event %v", ev)
	assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, p.steps.seen(), "4 follows 3, each step once")
	assert.Contains(t, p.audit.kinds(), "resume-run "+id+" "+tr.RunID)
}
