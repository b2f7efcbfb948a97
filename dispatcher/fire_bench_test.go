package dispatcher

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/store"
)

// slowReader is a jobReader that takes delay per read, like a store under
// load.
type slowReader struct {
	jobs  map[string]store.Job
	delay time.Duration
}

func (r slowReader) GetJob(ctx context.Context, id string) (store.Job, error) {
	select {
	case <-time.After(r.delay):
	case <-ctx.Done():
		return store.Job{}, ctx.Err()
	}
	j, ok := r.jobs[id]
	if !ok {
		return store.Job{}, store.ErrNotFound
	}
	return j, nil
}

// nullProducer acknowledges every record at once.
type nullProducer struct{}

func (nullProducer) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	out := make(kgo.ProduceResults, len(rs))
	for i, r := range rs {
		out[i] = kgo.ProduceResult{Record: r}
	}
	return out
}

// BenchmarkFire measures one firing of a recurring job that is due (plan,
// produce to a producer that acknowledges at once, and the hand-over of the
// next occurrence), with the job in the entry's snapshot, in memory, and
// read from a store that takes 1ms per read.
func BenchmarkFire(b *testing.B) {
	spec := jobSpec("job", intervalSchedule(time.Second, 0))
	value, err := proto.Marshal(spec)
	require.NoError(b, err)
	jobs := map[string]store.Job{"job": {ID: "job", Spec: value, Revision: 1, UpdatedAt: time.Unix(0, 0)}}
	for _, tc := range []struct {
		name     string
		cached   bool
		snapshot bool
	}{{"job in its entry", true, true}, {"job in memory", true, false}, {"job read per firing", false, false}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := Config{Kafka: []kgo.Opt{kgo.SeedBrokers("unused:9092")}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.withDefaults()
			m, err := newMetrics(prometheus.NewRegistry())
			require.NoError(b, err)
			r := slowReader{jobs: jobs, delay: time.Millisecond}
			o := &owner{cfg: cfg, prod: nullProducer{}, topics: cfg.Topics, m: m, log: cfg.Logger}
			o.store = storeOf{r: r}
			if tc.cached {
				o.jobs = newJobCache(r, time.Now, time.Hour, m)
				// The feed started a while ago: it vouches for snapshots.
				o.jobs.setFresh(time.Now().Add(-time.Minute), time.Now().Add(-time.Minute))
				o.jobs.setFresh(time.Now(), time.Now())
			}
			var payload []byte
			if tc.snapshot {
				payload = jobs["job"].Snapshot(time.Now()).Encode()
			}
			ctx, cancel := context.WithCancel(b.Context())
			o.next = startNextWriter(ctx, nopPuts{}, time.Second, 1, 0)
			due := store.Truncate(time.Now())
			b.ResetTimer()
			for i := range b.N {
				e := store.DueEntry{Due: due, JobID: "job", Kind: store.KindScheduled, RunID: fmt.Sprintf("job@%d", i), Attempt: 1, Revision: 1, Payload: payload}
				res := o.fire(ctx, 1, firing{Entry: e, At: due})
				if res.err != nil || res.next == nil {
					b.Fatalf("firing: %v", res.err)
				}
			}
			b.StopTimer()
			cancel()
			o.next.Stop()
		})
	}
}

// storeOf makes a jobReader the owner's Store for the benchmark; only
// GetJob is called.
type storeOf struct {
	Store
	r jobReader
}

func (s storeOf) GetJob(ctx context.Context, id string) (store.Job, error) {
	return s.r.GetJob(ctx, id)
}

// nopPuts stores nothing and answers every PutDue at once.
type nopPuts struct{}

func (nopPuts) PutDue(context.Context, ...store.DueEntry) error { return nil }

// BenchmarkFireOnGoroutines measures a firing of a job in its entry, each
// on a goroutine of its own as a tenure starts them: a new goroutine per
// firing (whose stack grows from the smallest size) against the
// dispatcher's firers, which keep their goroutines between firings.
func BenchmarkFireOnGoroutines(b *testing.B) {
	spec := jobSpec("job", intervalSchedule(time.Second, 0))
	value, err := proto.Marshal(spec)
	require.NoError(b, err)
	job := store.Job{ID: "job", Spec: value, Revision: 1, UpdatedAt: time.Unix(0, 0)}
	payload := job.Snapshot(time.Now()).Encode()
	for _, tc := range []struct {
		name   string
		reused bool
	}{{"new goroutine per firing", false}, {"firers", true}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := Config{Kafka: []kgo.Opt{kgo.SeedBrokers("unused:9092")}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.withDefaults()
			m, err := newMetrics(prometheus.NewRegistry())
			require.NoError(b, err)
			r := slowReader{jobs: map[string]store.Job{"job": job}}
			o := &owner{cfg: cfg, prod: nullProducer{}, topics: cfg.Topics, m: m, log: cfg.Logger, store: storeOf{r: r}}
			o.jobs = newJobCache(r, time.Now, time.Hour, m)
			o.jobs.setFresh(time.Now().Add(-time.Minute), time.Now().Add(-time.Minute))
			o.jobs.setFresh(time.Now(), time.Now())
			ctx, cancel := context.WithCancel(b.Context())
			o.next = startNextWriter(ctx, nopPuts{}, time.Second, 1, 0)
			f := newFirers(time.Minute)
			due := store.Truncate(time.Now())
			results := make(chan fireResult, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				e := store.DueEntry{Due: due, JobID: "job", Kind: store.KindScheduled, RunID: fmt.Sprintf("job@%d", i), Attempt: 1, Revision: 1, Payload: payload}
				fire := func() { results <- o.fire(ctx, 1, firing{Entry: e, At: due}) }
				if tc.reused {
					f.Go(fire)
				} else {
					go fire()
				}
				if res := <-results; res.err != nil || res.next == nil {
					b.Fatalf("firing: %v", res.err)
				}
			}
			b.StopTimer()
			f.Stop()
			cancel()
			o.next.Stop()
		})
	}
}
