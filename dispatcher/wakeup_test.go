package dispatcher

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

// TestWakeupRereadsJobNotFoundByBucketRead: the store writes a job's first
// entry before the job's row, so a bucket read between the two writes finds
// the entry and remembers the job as not found. The wake-up, sent once both
// are stored, must make the job be read again; fired from the remembered
// "not found", the entry would be dropped as dead and the job's chain would
// end without a trace (what TestCrashTakeover and TestCatchUpMisfirePolicies
// hit when a registration coincided with the new owners' first bucket read).
func TestWakeupRereadsJobNotFoundByBucketRead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newOwnerEnv(t)
		start := time.Now()
		// The bubble starts on a 2s boundary: registered now, the job would
		// be due at once, before its wake-up could arrive.
		time.Sleep(time.Second)
		// The entry is in the store; what the dispatcher reads of the job
		// (reader) does not have the row yet.
		first := e.register(jobSpec("every2s", intervalSchedule(2*time.Second, 0)))
		job, err := e.st.GetJob(t.Context(), "every2s")
		require.NoError(t, err)
		reader := &countingReader{jobs: map[string]store.Job{}}
		cache := startWithJobs(e, reader)
		ctx, stopFeed := context.WithCancel(context.Background())
		feedDone := make(chan struct{})
		go func() { // a feed that is always caught up
			defer close(feedDone)
			for ctx.Err() == nil {
				cache.setFresh(time.Now())
				select {
				case <-ctx.Done():
				case <-time.After(feedInterval):
				}
			}
		}()
		synctest.Wait() // the bucket is read and its job looked up: not found
		require.Positive(t, reader.reads.Load(), "the bucket read looked the job up")
		require.Empty(t, e.prod.of("every2s"))

		// The row is written, then the wake-up arrives.
		reader.set(job)
		e.wake(0, job.ScheduledEntry())

		time.Sleep(time.Until(start.Add(10 * time.Second)))
		stopFeed()
		<-feedDone
		e.o.stop(false)

		runs := e.prod.of("every2s")
		require.NotEmpty(t, runs, "the woken entry fired no run: its job was remembered as not found")
		assert.Equal(t, store.RunID("every2s", first["every2s"]), runs[0].run.GetRunId())
		assert.GreaterOrEqual(t, len(runs), 4, "the chain goes on every 2s")
	})
}
