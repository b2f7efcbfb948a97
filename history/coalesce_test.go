package history

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

func TestCoalescer(t *testing.T) {
	t.Parallel()
	rec := func(job string, attempt int, state store.RunState, at time.Time) store.RunRecord {
		return store.RunRecord{JobID: job, RunID: store.RunID(job, due), Attempt: attempt, Due: due, State: state, UpdatedAt: at}
	}
	us := func(n int) time.Time { return t1.Add(time.Duration(n) * time.Microsecond) }
	tests := []struct {
		name string
		in   []store.RunRecord
		want []store.RunRecord
	}{
		{"one attempt's states become its latest",
			[]store.RunRecord{rec("a", 1, store.StateRunning, us(0)), rec("a", 1, store.StateSucceeded, us(400))},
			[]store.RunRecord{rec("a", 1, store.StateSucceeded, us(400))}},
		{"a late older state does not win",
			[]store.RunRecord{rec("a", 1, store.StateFailed, us(400)), rec("a", 1, store.StateRunning, us(0))},
			[]store.RunRecord{rec("a", 1, store.StateFailed, us(400))}},
		{"within one microsecond the later in the poll wins",
			[]store.RunRecord{rec("a", 1, store.StateRunning, us(7)), rec("a", 1, store.StateFailed, us(7).Add(300))},
			[]store.RunRecord{rec("a", 1, store.StateFailed, us(7).Add(300))}},
		{"attempts and jobs stay apart, in first-seen order",
			[]store.RunRecord{
				rec("a", 1, store.StateRunning, us(0)), rec("b", 1, store.StateRunning, us(1)),
				rec("a", 1, store.StateFailed, us(2)), rec("a", 2, store.StateScheduled, us(3)),
			},
			[]store.RunRecord{rec("a", 1, store.StateFailed, us(2)), rec("b", 1, store.StateRunning, us(1)), rec("a", 2, store.StateScheduled, us(3))}},
		{"nothing in, nothing out", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCoalescer()
			for _, r := range tt.in {
				c.add(r)
			}
			assert.Equal(t, tt.want, c.records())
			assert.Equal(t, len(tt.want), c.len())
		})
	}
}

func TestLag(t *testing.T) {
	t.Parallel()
	l := newLag()
	now := t1.Add(time.Minute)
	assert.Zero(t, l.records())
	assert.Zero(t, l.seconds(now))

	// Partition 0: a poll of offsets 10..19 of 30, the first produced 50s
	// ago, being stored.
	l.fetched(0, 10, now.Add(-50*time.Second), 30)
	assert.Equal(t, int64(20), l.records())
	assert.InDelta(t, 50, l.seconds(now), 1e-9)
	// Stored up to offset 19, the newest produced 40s ago: 10 behind, at
	// most 40s old.
	l.stored(0, 19, now.Add(-40*time.Second), 30)
	assert.Equal(t, int64(10), l.records())
	assert.InDelta(t, 40, l.seconds(now), 1e-9)
	// Partition 1 is caught up: it adds nothing.
	l.fetched(1, 5, now.Add(-time.Second), 6)
	l.stored(1, 5, now.Add(-time.Second), 6)
	assert.Equal(t, int64(10), l.records())
	assert.InDelta(t, 40, l.seconds(now), 1e-9)
	// Partition 0 revoked: nothing is behind.
	l.forget([]int32{0})
	assert.Zero(t, l.records())
	assert.Zero(t, l.seconds(now))
	// A new membership starts with no partition.
	l.fetched(2, 0, now.Add(-time.Second), 3)
	l.reset()
	assert.Zero(t, l.records())
}

// countingHistory counts the store calls of a Writer.
type countingHistory struct {
	store.History
	mu          sync.Mutex
	batches     int
	batchedRecs int
	singles     int
}

func (c *countingHistory) RecordRuns(ctx context.Context, recs []store.RunRecord) error {
	c.mu.Lock()
	c.batches++
	c.batchedRecs += len(recs)
	c.mu.Unlock()
	return c.History.RecordRuns(ctx, recs)
}

func (c *countingHistory) RecordRun(ctx context.Context, r store.RunRecord) error {
	c.mu.Lock()
	c.singles++
	c.mu.Unlock()
	return c.History.RecordRun(ctx, r)
}

// The events of one poll cost one store call: 100 runs that each started
// and succeeded, and 20 that failed within the millisecond they started and
// were scheduled for a retry, are 260 records written as 140, once.
func TestPollIsOneWrite(t *testing.T) {
	t.Parallel()
	mem, err := memory.New(memory.Options{})
	require.NoError(t, err)
	h := &countingHistory{History: mem}
	w, err := New(Config{Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, History: h, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)

	var recs []*kgo.Record
	add := func(ev *sundialv1.RunEvent) {
		val, err := proto.Marshal(ev)
		require.NoError(t, err)
		recs = append(recs, &kgo.Record{Key: []byte(ev.GetJobId()), Value: val,
			Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindRunEvent)}}})
	}
	job := func(i int) func(*sundialv1.RunEvent) {
		return func(ev *sundialv1.RunEvent) {
			ev.JobId = fmt.Sprintf("job-%d", i)
			ev.RunId = store.RunID(ev.JobId, due)
		}
	}
	for i := range 100 {
		add(event(sundialv1.RunState_RUN_STATE_STARTED, 1, t1, job(i)))
		add(event(sundialv1.RunState_RUN_STATE_SUCCEEDED, 1, t1.Add(3*time.Millisecond), func(ev *sundialv1.RunEvent) {
			job(i)(ev)
			ev.Duration = durationpb.New(3 * time.Millisecond)
		}))
	}
	for i := 100; i < 120; i++ {
		add(event(sundialv1.RunState_RUN_STATE_STARTED, 1, t1, job(i)))
		add(event(sundialv1.RunState_RUN_STATE_FAILED, 1, t1.Add(200*time.Microsecond), func(ev *sundialv1.RunEvent) {
			job(i)(ev)
			ev.Error = &sundialv1.RunError{Code: "connection_refused"}
		}))
		add(event(sundialv1.RunState_RUN_STATE_RETRYING, 1, t1.Add(300*time.Microsecond), func(ev *sundialv1.RunEvent) {
			job(i)(ev)
			ev.NextAttemptDueTime = timestamppb.New(due.Add(time.Second))
		}))
	}
	require.NoError(t, w.store(t.Context(), recs))

	assert.Equal(t, 1, h.batches)
	assert.Equal(t, 140, h.batchedRecs)
	assert.Zero(t, h.singles)
	assert.Equal(t, float64(140), testutil.ToFloat64(w.m.records.WithLabelValues(resultStored)))
	assert.Equal(t, float64(120), testutil.ToFloat64(w.m.coalesced))
	for i := range 120 {
		runs, err := mem.ListRuns(t.Context(), fmt.Sprintf("job-%d", i), 10)
		require.NoError(t, err)
		if i < 100 {
			require.Len(t, runs, 1)
			assert.Equal(t, store.StateSucceeded, runs[0].State, "job %d", i)
			continue
		}
		require.Len(t, runs, 2, "job %d", i)
		assert.Equal(t, store.StateScheduled, runs[0].State, "job %d attempt 2", i)
		assert.Equal(t, store.StateFailed, runs[1].State, "job %d attempt 1", i)
		assert.Equal(t, "connection_refused", runs[1].Error, "job %d", i)
	}
}
