package dispatcher

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

// TestNextWriterWritesInParallelAndGroupsTheRest: with two writers, two
// shards' lone firings are written at once, each without waiting for the
// other, and the firings that arrive while both writes are in progress,
// whatever their shards, share the next write.
func TestNextWriterWritesInParallelAndGroupsTheRest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		gs := &gatedStore{entered: make(chan int), release: make(chan error)}
		w := startNextWriter(t.Context(), gs, time.Second, 2, 0)
		defer w.Stop()
		entry := func(i int) store.DueEntry {
			due := time.Now().Add(time.Duration(i+1) * time.Second)
			job := fmt.Sprintf("job-%02d", i) // jobs of many shards
			return store.DueEntry{Due: due, JobID: job, Kind: store.KindScheduled, RunID: fmt.Sprintf("%s@%d", job, due.UnixMilli()), Attempt: 1}
		}
		const firings = 20
		errs := make(chan error, firings)
		go func() { errs <- w.put(t.Context(), entry(0)) }()
		require.Equal(t, 1, <-gs.entered)
		go func() { errs <- w.put(t.Context(), entry(1)) }()
		require.Equal(t, 1, <-gs.entered, "a second write starts while the first is in progress")
		for i := 2; i < firings; i++ {
			go func() { errs <- w.put(t.Context(), entry(i)) }()
		}
		synctest.Wait() // both writers busy: the rest wait
		gs.release <- nil
		require.NoError(t, <-errs)
		require.Equal(t, firings-2, <-gs.entered, "the rest share the next write")
		gs.release <- nil
		gs.release <- nil
		for range firings - 1 {
			assert.NoError(t, <-errs)
		}
	})
}

// TestNextWriterGathersLoneFirings: firings that finish a few milliseconds
// apart, each alone, share one write when they fall within the gather of
// the first; one that comes after it goes in the next write.
func TestNextWriterGathersLoneFirings(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		gs := &gatedStore{entered: make(chan int), release: make(chan error)}
		w := startNextWriter(t.Context(), gs, time.Second, 4, 50*time.Millisecond)
		defer w.Stop()
		entry := func(i int) store.DueEntry {
			due := time.Now().Add(time.Duration(i+1) * time.Second)
			job := fmt.Sprintf("job-%02d", i)
			return store.DueEntry{Due: due, JobID: job, Kind: store.KindScheduled, RunID: fmt.Sprintf("%s@%d", job, due.UnixMilli()), Attempt: 1}
		}
		start := time.Now()
		errs := make(chan error, 6)
		for i := range 5 {
			go func() { errs <- w.put(t.Context(), entry(i)) }()
			time.Sleep(10 * time.Millisecond)
		}
		require.Equal(t, 5, <-gs.entered, "five firings 10ms apart share one write")
		assert.Equal(t, 50*time.Millisecond, time.Since(start), "written at the end of the gather")
		go func() { errs <- w.put(t.Context(), entry(5)) }()
		require.Equal(t, 1, <-gs.entered, "a firing after the gather goes in the next write, beside the one in progress")
		gs.release <- nil
		gs.release <- nil
		for range 6 {
			assert.NoError(t, <-errs)
		}
	})
}
