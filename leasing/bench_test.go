package leasing

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAcquireComplete measures the lease cost of one run: an acquire and
// a complete, i.e. two EVALSHA calls, on the local stack's Redis. This is the
// R baseline of the bench (bench/README.md). Runs are spread over 1000 jobs; every run id is new,
// so every complete writes a dedupe mark as in production.
func BenchmarkAcquireComplete(b *testing.B) {
	env := realRedis(b)
	s, _ := setup(b, env, func(c *Config) {
		c.TTL, c.Margin, c.DoneRetention = 30*time.Second, 0, 10*time.Minute
	})
	ctx := b.Context()
	var seq atomic.Int64
	next := func() Request {
		n := seq.Add(1)
		job := fmt.Sprintf("job%d", n%1000)
		return Request{JobID: job, RunID: fmt.Sprintf("%s@%d", job, n), Limit: 1000}
	}
	report := func(b *testing.B, runs int) {
		perSec := float64(runs) / b.Elapsed().Seconds()
		b.ReportMetric(perSec, "runs/s")
		b.ReportMetric(2*perSec, "evalsha/s")
	}

	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			l, err := s.Acquire(ctx, next())
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Complete(ctx, l); err != nil {
				b.Fatal(err)
			}
		}
		report(b, b.N)
	})

	b.Run("plain-parallel", func(b *testing.B) {
		b.SetParallelism(8) // 8 callers per core, as a runner executes many runs at once
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l, err := s.Acquire(ctx, next())
				if err != nil {
					b.Error(err)
					return
				}
				if err := s.Complete(ctx, l); err != nil {
					b.Error(err)
					return
				}
			}
		})
		report(b, b.N)
	})

	for _, batch := range []int{16, 128} {
		b.Run(fmt.Sprintf("pipelined-%d", batch), func(b *testing.B) {
			reqs := make([]Request, batch)
			leases := make([]Lease, batch)
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				for j := range n {
					reqs[j] = next()
				}
				for j, r := range s.AcquireBatch(ctx, reqs[:n]) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
					leases[j] = r.Lease
				}
				for _, err := range s.CompleteBatch(ctx, leases[:n]) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			report(b, b.N)
		})
	}
}
