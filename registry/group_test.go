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
		if j.ID == "team.refused" {
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
		_, err := upsert(ctx, u, store.Job{ID: "first"})
		results <- err
	}()
	require.Eventually(t, func() bool { st.mu.Lock(); defer st.mu.Unlock(); return len(st.calls) == 1 }, time.Minute, time.Millisecond)
	for i := range 10 {
		id := fmt.Sprintf("team.job-%d", i)
		if i == 3 {
			id = "team.refused"
		}
		go func() {
			outcome, err := upsert(ctx, u, store.Job{ID: id})
			if err == nil && outcome != store.OutcomeCreated {
				err = fmt.Errorf("%s: outcome %v", id, outcome)
			}
			if id == "team.refused" {
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
	_, err := upsert(t.Context(), u, store.Job{ID: "a"})
	assert.ErrorIs(t, err, boom)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = upsert(ctx, u, store.Job{ID: "b"})
	assert.Error(t, err)
}

// readStore answers GetJobs from jobs and records the calls; the first
// waits for release.
type readStore struct {
	Store
	jobs    map[string]store.Job
	release chan struct{}

	mu    sync.Mutex
	calls [][]string
}

func (s *readStore) GetJobs(_ context.Context, ids []string) (map[string]store.Job, error) {
	s.mu.Lock()
	first := len(s.calls) == 0
	s.calls = append(s.calls, ids)
	s.mu.Unlock()
	if first {
		<-s.release
	}
	out := map[string]store.Job{}
	for _, id := range ids {
		if j, ok := s.jobs[id]; ok {
			out[id] = j
		}
	}
	return out, nil
}

// Reads queue while one runs and go together in the next; each handler
// gets its own job, found or not, tombstones included.
func TestLookupsGroupReads(t *testing.T) {
	t.Parallel()
	st := &readStore{release: make(chan struct{}), jobs: map[string]store.Job{
		"first": {ID: "first", Revision: 1},
		"job-2": {ID: "job-2", Revision: 2},
		"job-5": {ID: "job-5", Revision: 5, Deleted: true},
	}}
	l := newLookups(st, 1, 100)
	ctx := t.Context()
	type answer struct {
		id   string
		held stored
		err  error
	}
	answers := make(chan answer, 11)
	ask := func(id string) {
		held, err := l.do(ctx, id)
		answers <- answer{id, held, err}
	}
	go ask("first")
	require.Eventually(t, func() bool { st.mu.Lock(); defer st.mu.Unlock(); return len(st.calls) == 1 }, time.Minute, time.Millisecond)
	for i := range 10 {
		go ask(fmt.Sprintf("team.job-%d", i))
	}
	require.Eventually(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.queue) == 10 }, time.Minute, time.Millisecond)
	close(st.release)
	for range 11 {
		a := <-answers
		require.NoError(t, a.err)
		want, ok := st.jobs[a.id]
		assert.Equal(t, ok, a.held.found, a.id)
		assert.Equal(t, want, a.held.job, a.id)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Len(t, st.calls, 2, "%v", st.calls)
	assert.Len(t, st.calls[1], 10, "the queued reads went in one call")
}
