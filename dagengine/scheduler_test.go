package dagengine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

// flakyStore is a memory store whose CreateDagRun, the first write of a
// scheduled start, fails the first failures calls for each DAG, as a store
// that is down and comes back. The first hold calls wait at a gate until
// the test opens it, so the test sees how many starts are under way at
// once. It records every call.
type flakyStore struct {
	*memory.Store
	failures int
	hold     int

	mu       sync.Mutex
	gate     chan struct{}
	arrived  int
	inflight int
	most     int
	calls    map[string][]call // by DAG id, in order
	created  map[string]int    // by DAG run id
}

type call struct {
	id     string
	at     time.Time
	failed bool
}

var errStoreDown = errors.New("store unavailable")

func (f *flakyStore) CreateDagRun(ctx context.Context, r store.DagRun) (store.DagRun, bool, error) {
	f.mu.Lock()
	f.inflight++
	f.most = max(f.most, f.inflight)
	f.arrived++
	wait := f.arrived <= f.hold
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
	}()
	if wait {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return store.DagRun{}, false, ctx.Err()
		}
	}
	f.mu.Lock()
	failed := countFailed(f.calls[r.DagID]) < f.failures
	f.calls[r.DagID] = append(f.calls[r.DagID], call{id: r.ID, at: time.Now(), failed: failed})
	f.mu.Unlock()
	if failed {
		return store.DagRun{}, false, fmt.Errorf("create dag run %q: %w", r.ID, errStoreDown)
	}
	stored, created, err := f.Store.CreateDagRun(ctx, r)
	if created {
		f.mu.Lock()
		f.created[r.ID]++
		f.mu.Unlock()
	}
	return stored, created, err
}

func countFailed(calls []call) int {
	n := 0
	for _, c := range calls {
		if c.failed {
			n++
		}
	}
	return n
}

type nopEnqueuer struct{}

func (nopEnqueuer) Enqueue(context.Context, ...store.DueEntry) error { return nil }

type nopProducer struct{}

func (nopProducer) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	out := make(kgo.ProduceResults, len(rs))
	for i, r := range rs {
		out[i] = kgo.ProduceResult{Record: r}
	}
	return out
}

// TestCatchUpAfterStoreOutage: DAGs that missed occurrences while the
// store was down start them all once it is back: distinct DAGs at once (as
// many as Concurrency allows, no more), each DAG's occurrences in order and
// each exactly once, and a failed start is retried after a jittered wait
// that grows from RetryMin, not after a flat RetryMax.
func TestCatchUpAfterStoreOutage(t *testing.T) {
	const (
		dags        = 8
		concurrency = 4
		missed      = 6 // occurrences per DAG due when the scheduler starts
		failures    = 4 // failed starts per DAG before the store answers
		every       = time.Minute
		retryMin    = 100 * time.Millisecond
		retryMax    = 5 * time.Second
	)
	synctest.Test(t, func(t *testing.T) {
		mem, err := memory.New(memory.Options{})
		require.NoError(t, err)
		st := &flakyStore{Store: mem, failures: failures, hold: concurrency, gate: make(chan struct{}),
			calls: map[string][]call{}, created: map[string]int{}}

		// The definitions were accepted when their first occurrence was due;
		// the scheduler starts missed-1 intervals and a half later.
		first := time.Now().Truncate(time.Second)
		time.Sleep(time.Duration(missed-1)*every + every/2)
		for i := range dags {
			id := fmt.Sprintf("t.d%d", i)
			spec := &sundialv1.DagSpec{Id: id, OwnerTeam: "t",
				Schedule: &sundialv1.Schedule{TimeZone: "UTC", MisfirePolicy: sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ALL,
					CatchUpWindow: durationpb.New(time.Hour),
					Kind: &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: durationpb.New(every),
						Anchor: &sundialv1.Interval_Start{Start: timestamppb.New(first)}}}},
				Nodes: []*sundialv1.DagNode{{Id: "n", Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
					Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}}}}},
			}
			b, err := dag.Marshal(spec)
			require.NoError(t, err)
			_, err = mem.PutDag(t.Context(), store.Dag{ID: id, Spec: b, Revision: 1, UpdatedAt: first})
			require.NoError(t, err)
		}

		e, err := New(Config{
			Kafka: []kgo.Opt{kgo.SeedBrokers("unused:9092")}, Store: st, Enqueuer: nopEnqueuer{}, Producer: nopProducer{}, Shards: 4,
			Concurrency: concurrency, RetryMin: retryMin, RetryMax: retryMax,
			Registerer: prometheus.NewRegistry(),
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.sched.run(ctx)
		}()

		// Every goroutine is now blocked: the starts under way wait at the
		// gate. Distinct DAGs start at once, bounded by Concurrency.
		synctest.Wait()
		st.mu.Lock()
		underWay, arrived := st.inflight, st.arrived
		st.mu.Unlock()
		assert.Equal(t, concurrency, underWay, "starts under way at once")
		assert.Equal(t, concurrency, arrived, "starts begun before the first ended")
		close(st.gate)

		// Wait (in the bubble's time) until every missed occurrence started.
		want := map[string][]string{}
		for i := range dags {
			id := fmt.Sprintf("t.d%d", i)
			for k := range missed {
				want[id] = append(want[id], dagrun.RunID(id, first.Add(time.Duration(k)*every)))
			}
		}
		allStarted := func() bool {
			st.mu.Lock()
			defer st.mu.Unlock()
			for _, ids := range want {
				for _, id := range ids {
					if st.created[id] == 0 {
						return false
					}
				}
			}
			return true
		}
		for !allStarted() {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done

		st.mu.Lock()
		defer st.mu.Unlock()
		assert.LessOrEqual(t, st.most, concurrency, "starts under way at once, at most")
		for dagID, ids := range want {
			calls := st.calls[dagID]
			require.GreaterOrEqual(t, len(calls), failures+missed, "calls of %s: %v", dagID, calls)
			// Failed starts come first, all for the first occurrence; each
			// retry waits no longer than the backoff's cap at that step.
			bound := retryMin
			for k := 1; k <= failures; k++ {
				assert.Equal(t, ids[0], calls[k].id, "%s: call %d retries the first occurrence", dagID, k)
				gap := calls[k].at.Sub(calls[k-1].at)
				assert.Positive(t, gap, "%s: retry %d waits", dagID, k)
				assert.LessOrEqual(t, gap, bound, "%s: wait before retry %d", dagID, k)
				bound = min(2*bound, retryMax)
			}
			// Then one successful start per occurrence, in order.
			var startedIDs []string
			for _, c := range calls[failures:] {
				assert.False(t, c.failed, "%s: %s", dagID, c.id)
				startedIDs = append(startedIDs, c.id)
			}
			assert.Equal(t, ids, startedIDs[:missed], "%s: occurrences started in order", dagID)
			assert.Len(t, slices.Compact(slices.Clone(startedIDs)), len(startedIDs), "%s: no occurrence started twice", dagID)
			for _, id := range startedIDs {
				assert.Equal(t, 1, st.created[id], "%s created", id)
			}
		}
	})
}
