package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

func dagDef(id, spec string, rev int64) store.Dag {
	return store.Dag{ID: id, Spec: []byte(spec), Revision: rev, UpdatedAt: base.Add(time.Duration(rev) * time.Second)}
}

func testDagPutGetDelete(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	_, err := s.GetDag(ctx, "etl")
	require.ErrorIs(t, err, store.ErrNotFound)

	steps := []struct {
		name string
		do   func() (store.Outcome, error)
		want store.Outcome
	}{
		{"create", func() (store.Outcome, error) { return s.PutDag(ctx, dagDef("etl", "v1", 10)) }, store.OutcomeCreated},
		{"identical resend", func() (store.Outcome, error) { return s.PutDag(ctx, dagDef("etl", "v1", 11)) }, store.OutcomeUnchanged},
		{"update", func() (store.Outcome, error) { return s.PutDag(ctx, dagDef("etl", "v2", 12)) }, store.OutcomeUpdated},
		{"older revision", func() (store.Outcome, error) { return s.PutDag(ctx, dagDef("etl", "v0", 5)) }, store.OutcomeStale},
		{"delete", func() (store.Outcome, error) { return s.DeleteDag(ctx, "etl", 13, base) }, store.OutcomeDeleted},
		{"delete again", func() (store.Outcome, error) { return s.DeleteDag(ctx, "etl", 14, base) }, store.OutcomeUnchanged},
		{"replay before the delete", func() (store.Outcome, error) { return s.PutDag(ctx, dagDef("etl", "v2b", 12)) }, store.OutcomeStale},
		{"recreate", func() (store.Outcome, error) { return s.PutDag(ctx, dagDef("etl", "v3", 20)) }, store.OutcomeCreated},
		{"delete unknown", func() (store.Outcome, error) { return s.DeleteDag(ctx, "never", 1, base) }, store.OutcomeDeleted},
	}
	for _, st := range steps {
		got, err := st.do()
		require.NoError(t, err, st.name)
		assert.Equal(t, st.want, got, st.name)
	}
	d, err := s.GetDag(ctx, "etl")
	require.NoError(t, err)
	assert.Equal(t, "v3", string(d.Spec))
	assert.Equal(t, int64(20), d.Revision)
	assert.Equal(t, store.SpecHash([]byte("v3")), d.Hash)
	assert.False(t, d.Deleted)
	assert.True(t, d.UpdatedAt.Equal(base.Add(20*time.Second)))

	tomb, err := s.GetDag(ctx, "never")
	require.NoError(t, err)
	assert.True(t, tomb.Deleted)

	_, err = s.PutDag(ctx, dagDef("another", "x", 1))
	require.NoError(t, err)
	all, err := s.ListDags(ctx)
	require.NoError(t, err)
	var ids []string
	for _, d := range all {
		ids = append(ids, d.ID)
	}
	assert.Equal(t, []string{"another", "etl"}, ids, "deleted DAGs are not listed; ids in order")
}

func dagRun(id, dagID string, due time.Time, state string) store.DagRun {
	return store.DagRun{
		ID: id, DagID: dagID, Due: due, Origin: "schedule", Spec: []byte("spec of " + dagID), State: []byte(state),
		Status: "running", Summary: "0/1 succeeded", Active: true, CreatedAt: due, UpdatedAt: due,
	}
}

func testDagRunCreateOnce(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	const racers = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created []int
		states  = map[string]bool{}
	)
	for i := range racers {
		wg.Go(func() {
			r := dagRun("etl@1", "etl", base, fmt.Sprintf("state-%d", i))
			got, ok, err := s.CreateDagRun(ctx, r)
			assert.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				created = append(created, i)
			}
			states[string(got.State)] = true
			assert.Equal(t, int64(1), got.Version)
		})
	}
	wg.Wait()
	require.Len(t, created, 1, "exactly one creator wins")
	assert.Len(t, states, 1, "every caller gets the winner's run")

	got, err := s.GetDagRun(ctx, "etl@1")
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("state-%d", created[0]), string(got.State))
	assert.Equal(t, "spec of etl", string(got.Spec))
	assert.Equal(t, "etl", got.DagID)
	assert.Equal(t, "schedule", got.Origin)
	assert.True(t, got.Due.Equal(base))
	assert.True(t, got.Active)

	_, err = s.GetDagRun(ctx, "etl@2")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testDagRunConditionalUpdate(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	r, ok, err := s.CreateDagRun(ctx, dagRun("etl@1", "etl", base, "s1"))
	require.NoError(t, err)
	require.True(t, ok)

	r.State, r.Status, r.UpdatedAt = []byte("s2"), "running", base.Add(time.Second)
	v, err := s.UpdateDagRun(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, int64(2), v)

	// The same update again is computed from a version that is gone.
	_, err = s.UpdateDagRun(ctx, r)
	require.ErrorIs(t, err, store.ErrVersionConflict)

	// Racers from one version: exactly one applies.
	r.Version = 2
	const racers = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []string
	)
	for i := range racers {
		wg.Go(func() {
			mine := r
			mine.State = []byte(fmt.Sprintf("racer-%d", i))
			mine.UpdatedAt = base.Add(2 * time.Second)
			_, err := s.UpdateDagRun(ctx, mine)
			if err != nil {
				assert.ErrorIs(t, err, store.ErrVersionConflict)
				return
			}
			mu.Lock()
			wins = append(wins, string(mine.State))
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, wins, 1)
	got, err := s.GetDagRun(ctx, "etl@1")
	require.NoError(t, err)
	assert.Equal(t, int64(3), got.Version)
	assert.Equal(t, wins[0], string(got.State))
	assert.Equal(t, "spec of etl", string(got.Spec), "an update never changes the snapshot")

	missing := dagRun("etl@9", "etl", base, "x")
	missing.Version = 1
	_, err = s.UpdateDagRun(ctx, missing)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testDagRunListing(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	for i := range 5 {
		due := base.Add(time.Duration(i) * time.Hour)
		_, _, err := s.CreateDagRun(ctx, dagRun(fmt.Sprintf("etl@%d", due.UnixMilli()), "etl", due, "s"))
		require.NoError(t, err)
	}
	_, _, err := s.CreateDagRun(ctx, dagRun("other@1", "other", base, "s"))
	require.NoError(t, err)

	// The newest run ends; the listing follows.
	newest := fmt.Sprintf("etl@%d", base.Add(4*time.Hour).UnixMilli())
	r, err := s.GetDagRun(ctx, newest)
	require.NoError(t, err)
	r.State, r.Status, r.Summary, r.Active, r.UpdatedAt = []byte("done"), "succeeded", "1/1 succeeded", false, base.Add(5*time.Hour)
	_, err = s.UpdateDagRun(ctx, r)
	require.NoError(t, err)

	runs, err := s.ListDagRuns(ctx, "etl", 3)
	require.NoError(t, err)
	require.Len(t, runs, 3)
	for i, r := range runs {
		assert.True(t, r.Due.Equal(base.Add(time.Duration(4-i)*time.Hour)), "newest first: %d is due %v", i, r.Due)
		assert.Empty(t, r.Spec)
		assert.Empty(t, r.State)
		assert.Equal(t, "etl", r.DagID)
	}
	assert.Equal(t, newest, runs[0].ID)
	assert.Equal(t, "succeeded", runs[0].Status)
	assert.Equal(t, "1/1 succeeded", runs[0].Summary)
	assert.False(t, runs[0].Active)
	assert.Equal(t, int64(2), runs[0].Version)
	assert.Equal(t, "running", runs[1].Status)

	all, err := s.ListDagRuns(ctx, "etl", 100)
	require.NoError(t, err)
	assert.Len(t, all, 5)
	none, err := s.ListDagRuns(ctx, "nothing", 10)
	require.NoError(t, err)
	assert.Empty(t, none)
}

func testDagRunActive(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	var ids []string
	for i := range 20 {
		id := fmt.Sprintf("d%d@1", i)
		ids = append(ids, id)
		_, _, err := s.CreateDagRun(ctx, dagRun(id, fmt.Sprintf("d%d", i), base, "s"))
		require.NoError(t, err)
	}
	active := func() []string {
		got, err := s.ListActiveDagRuns(ctx)
		require.NoError(t, err)
		slices.Sort(got)
		return got
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	assert.Equal(t, want, active())

	// d3 ends, then is resumed.
	r, err := s.GetDagRun(ctx, "d3@1")
	require.NoError(t, err)
	r.Active, r.Status, r.UpdatedAt = false, "failed", base.Add(time.Minute)
	r.Version, err = s.UpdateDagRun(ctx, r)
	require.NoError(t, err)
	assert.NotContains(t, active(), "d3@1")

	r.Active, r.Status, r.UpdatedAt = true, "running", base.Add(2*time.Minute)
	_, err = s.UpdateDagRun(ctx, r)
	require.NoError(t, err)
	assert.Contains(t, active(), "d3@1")
}

func testDagValidation(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	_, err := s.PutDag(ctx, store.Dag{})
	require.ErrorIs(t, err, store.ErrInvalid)
	for _, field := range []string{"dag id", "spec", "updated at"} {
		assert.ErrorContains(t, err, field)
	}
	_, err = s.DeleteDag(ctx, "", 1, base)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, _, err = s.CreateDagRun(ctx, store.DagRun{})
	require.ErrorIs(t, err, store.ErrInvalid)
	for _, field := range []string{"dag run id", "dag id", "due", "state", "updated at"} {
		assert.ErrorContains(t, err, field)
	}
	_, err = s.UpdateDagRun(ctx, store.DagRun{ID: "x"})
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.ListDagRuns(ctx, "x", 0)
	require.ErrorIs(t, err, store.ErrInvalid)
}
