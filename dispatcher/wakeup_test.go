package dispatcher

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
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
		stopFeed := alwaysFresh(cache) // a feed that is always caught up
		synctest.Wait()                // the bucket is read and its job looked up: not found
		require.Positive(t, reader.reads.Load(), "the bucket read looked the job up")
		require.Empty(t, e.prod.of("every2s"))

		// The row is written, then the wake-up arrives.
		reader.set(job)
		e.wake(0, job.ScheduledEntry())

		time.Sleep(time.Until(start.Add(10 * time.Second)))
		stopFeed()
		e.o.stop(false)

		runs := e.prod.of("every2s")
		require.NotEmpty(t, runs, "the woken entry fired no run: its job was remembered as not found")
		assert.Equal(t, store.RunID("every2s", first["every2s"]), runs[0].run.GetRunId())
		assert.GreaterOrEqual(t, len(runs), 4, "the chain goes on every 2s")
	})
}

// TestEntryAheadOfItsJobRow: the store writes a definition's entry before
// its job row, and under load the row can follow seconds later, after the
// entry's due time. A firing that finds no row (a new job), or an older one
// (a changed job), must wait for the row rather than drop the entry as
// dead, which ended the job's chain before its first run: the chain must
// start with the entry's own occurrence once the row is there, with the
// definition of the entry's revision. No wake-up follows the row here, so
// only the firing's own retries can find it.
func TestEntryAheadOfItsJobRow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// before is what the dispatcher reads of the job until the row is
		// written: nothing, or the previous definition.
		before func(job store.Job) (store.Job, bool)
	}{
		{"new job", func(store.Job) (store.Job, bool) { return store.Job{}, false }},
		{"changed job", func(job store.Job) (store.Job, bool) {
			old := job
			old.Revision--
			spec := &sundialv1.JobSpec{}
			if err := proto.Unmarshal(job.Spec, spec); err != nil {
				panic(err)
			}
			if spec.GetPriority() == sundialv1.Priority_PRIORITY_HIGH {
				panic("the test's job must not be of high priority")
			}
			spec.Priority = sundialv1.Priority_PRIORITY_HIGH
			old.Spec, _ = proto.Marshal(spec)
			return old, true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				e := newOwnerEnv(t)
				start := time.Now()
				time.Sleep(time.Second) // registered now, due at start+2s
				first := e.register(jobSpec("every2s", intervalSchedule(2*time.Second, 0)))
				job, err := e.st.GetJob(t.Context(), "every2s")
				require.NoError(t, err)
				reader := &countingReader{jobs: map[string]store.Job{}}
				if old, ok := tc.before(job); ok {
					reader.set(old)
				}
				cache := startWithJobs(e, reader)
				stopFeed := alwaysFresh(cache)

				// The row is written 1.7 s after the entry fell due.
				time.Sleep(time.Until(first["every2s"].Add(1700 * time.Millisecond)))
				require.Empty(t, e.prod.of("every2s"), "fired before its job's row was written")
				reader.set(job)

				time.Sleep(time.Until(start.Add(12 * time.Second)))
				stopFeed()
				e.o.stop(false)

				runs := e.prod.of("every2s")
				require.NotEmpty(t, runs, "the entry written ahead of its job row fired no run")
				assert.Equal(t, store.RunID("every2s", first["every2s"]), runs[0].run.GetRunId(), "the chain starts with the entry's own occurrence")
				assert.GreaterOrEqual(t, len(runs), 5, "the chain goes on every 2s")
				for _, r := range runs {
					assert.NotEqual(t, sundialv1.Priority_PRIORITY_HIGH, r.run.GetPriority(), "run %s built from the previous definition", r.run.GetRunId())
					assert.Equal(t, job.Revision, r.run.GetDefinitionOffset())
				}
			})
		})
	}
}

// alwaysFresh keeps the cache's feed caught up, as a jobs feed with nothing
// to report would, until the returned function is called.
func alwaysFresh(cache *jobCache) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cache.setFresh(time.Now(), time.Now())
			select {
			case <-ctx.Done():
			case <-time.After(feedInterval):
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
