//go:build crash

package cassandra_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
)

// crashShards is the shard count of the crash test's keyspace.
const crashShards = 8

// TestAcknowledgedWritesSurviveKill writes due entries from several writers,
// kills the Cassandra node with SIGKILL while they write, starts it again
// and reads every bucket back: each entry whose PutDue returned nil must be
// there. Sundial's correctness rests on this (a dispatcher stores a job's
// next occurrence and then lets the shard's watermark pass the current one;
// the fencing epochs and watermarks are lightweight transactions), and a
// node whose commit log is synced periodically breaks it: it acknowledges a
// write once it is in the commit log's memory and loses whatever was written
// since the last sync when the process dies. The chaos bench lost 86 runs
// that way: successors acknowledged in the last moments before Cassandra was
// killed were gone after its restart.
//
// It needs a Cassandra it may kill: make test-crash starts one of its own
// and names its stack.sh in SUNDIAL_CRASH_STACK_CTL.
func TestAcknowledgedWritesSurviveKill(t *testing.T) {
	ctl := testenv.NeedCrashStack(t)
	cfg, s := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	_, err := s.InitCluster(ctx, crashShards)
	require.NoError(t, err)

	// Every entry falls in one bucket, so reading back is a read of
	// crashShards partitions.
	bucket := store.BucketOf(time.Now().Add(time.Hour))
	var (
		mu    sync.Mutex
		acked []store.DueEntry
	)
	stop := make(chan struct{})
	var writers sync.WaitGroup
	const writerCount = 16
	for w := range writerCount {
		writers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				job := fmt.Sprintf("job-%d-%d", w, i)
				due := bucket.Add(time.Duration(i%60000) * time.Millisecond)
				e := store.DueEntry{Due: due, JobID: job, Kind: store.KindScheduled, RunID: store.RunID(job, due), Attempt: 1, Revision: 1}
				wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
				err := s.PutDue(wctx, e)
				wcancel()
				if err != nil {
					// The node is gone: what was acknowledged until now is
					// what must survive.
					return
				}
				mu.Lock()
				acked = append(acked, e)
				mu.Unlock()
			}
		})
	}
	// Kill while the writers are busy: after a few thousand writes, which
	// also puts the kill well after the commit log's last sync at start.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 3000
	}, 5*time.Minute, 10*time.Millisecond, "the writers never reached 3000 acknowledged writes")
	ctl.Kill(t, "cassandra")
	close(stop)
	writers.Wait()
	require.NoError(t, s.Close())
	ctl.Start(t, "cassandra")

	// A fresh session: the old one's pool may still be reconnecting.
	s2, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	defer func() { _ = s2.Close() }()
	found := map[string]bool{}
	for shard := range crashShards {
		for e, err := range s2.ListBucket(ctx, bucket, shard) {
			require.NoError(t, err)
			found[e.RunID] = true
		}
	}
	var lost []string
	for _, e := range acked {
		if !found[e.RunID] {
			lost = append(lost, e.RunID)
		}
	}
	t.Logf("%d writes acknowledged before the kill, %d found after the restart, %d lost", len(acked), len(found), len(lost))
	assert.Empty(t, lost, "due entries acknowledged by Cassandra and gone after its restart (%d of %d); the first: %v",
		len(lost), len(acked), lost[:min(len(lost), 10)])
}
