package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

// callStore records the UpsertJobs calls; the first one waits for release.
type callStore struct {
	Store
	release chan struct{}
	fail    error

	mu    sync.Mutex
	calls [][]string
}

func (s *callStore) UpsertJobs(_ context.Context, jobs []store.Job) ([]store.UpsertResult, error) {
	s.mu.Lock()
	first := len(s.calls) == 0
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	s.calls = append(s.calls, ids)
	s.mu.Unlock()
	if first {
		<-s.release
	}
	if s.fail != nil {
		return nil, s.fail
	}
	out := make([]store.UpsertResult, len(jobs))
	for i, j := range jobs {
		if j.ID == "refused" {
			out[i].Err = fmt.Errorf("%w: refused", store.ErrInvalid)
			continue
		}
		out[i].Outcome = store.OutcomeCreated
	}
	return out, nil
}

func (s *callStore) queued(u *upserts) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.queue)
}

// While one call runs, the jobs of the other handlers queue and go together
// in the next; each handler gets its own job's result.
func TestUpsertsGroupCalls(t *testing.T) {
	t.Parallel()
	st := &callStore{release: make(chan struct{})}
	u := newUpserts(st, 1, 100)
	ctx := t.Context()

	results := make(chan error, 11)
	go func() {
		_, err := u.upsert(ctx, store.Job{ID: "first"})
		results <- err
	}()
	require.Eventually(t, func() bool { st.mu.Lock(); defer st.mu.Unlock(); return len(st.calls) == 1 }, time.Minute, time.Millisecond)
	for i := range 10 {
		id := fmt.Sprintf("job-%d", i)
		if i == 3 {
			id = "refused"
		}
		go func() {
			outcome, err := u.upsert(ctx, store.Job{ID: id})
			if err == nil && outcome != store.OutcomeCreated {
				err = fmt.Errorf("%s: outcome %v", id, outcome)
			}
			if id == "refused" {
				if errors.Is(err, store.ErrInvalid) {
					err = nil
				} else {
					err = fmt.Errorf("refused: %w", err)
				}
			}
			results <- err
		}()
	}
	require.Eventually(t, func() bool { return st.queued(u) == 10 }, time.Minute, time.Millisecond)
	close(st.release)
	for range 11 {
		assert.NoError(t, <-results)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Len(t, st.calls, 2, "%v", st.calls)
	assert.Equal(t, []string{"first"}, st.calls[0])
	assert.Len(t, st.calls[1], 10, "the queued jobs went in one call")
}

// A failed call fails every job it carried, to be retried.
func TestUpsertsCallFailure(t *testing.T) {
	t.Parallel()
	boom := errors.New("timeout")
	st := &callStore{release: make(chan struct{}), fail: boom}
	close(st.release)
	u := newUpserts(st, 2, 100)
	_, err := u.upsert(t.Context(), store.Job{ID: "a"})
	assert.ErrorIs(t, err, boom)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = u.upsert(ctx, store.Job{ID: "b"})
	assert.Error(t, err)
}
