package cassandra_test

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

// BenchmarkUpsertJobs measures bulk registration: new jobs in
// store.UpsertJobs calls of 1024 with 4 in flight (the registry's group
// commit), first occurrences spread over 500 s and 128 shards (a bench
// steady run's), specs of about 300 bytes. One op is one job; run it with
// a fixed count (-benchtime=100000x). Besides jobs/s it reports the CPU
// the Cassandra node spent per job (cass-µs/job) when its process is
// visible in /proc: on a shared machine that figure moves less than
// throughput does.
func BenchmarkUpsertJobs(b *testing.B) {
	const (
		callSize = 1024
		inFlight = 4
		shards   = 128
		spread   = 500 * time.Second
	)
	_, s := setup(b)
	ctx := b.Context()
	_, err := s.InitCluster(ctx, shards)
	require.NoError(b, err)

	spec := bytes.Repeat([]byte("x"), 300)
	start := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	prefix := strconv.FormatInt(time.Now().UnixNano(), 36)
	job := func(i int) store.Job {
		return store.Job{
			ID:        fmt.Sprintf("bench-%s-%08d", prefix, i),
			Spec:      append([]byte(strconv.Itoa(i)), spec...),
			Revision:  int64(i),
			UpdatedAt: start,
			NextDue:   start.Add(time.Duration(i) * spread / time.Duration(max(b.N, 1)) % spread),
		}
	}

	cassBefore, selfBefore := cassandraCPU(), selfCPU()
	b.ResetTimer()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	for range inFlight {
		wg.Go(func() {
			for {
				lo := int(next.Add(callSize)) - callSize
				if lo >= b.N {
					return
				}
				jobs := make([]store.Job, 0, callSize)
				for i := lo; i < min(lo+callSize, b.N); i++ {
					jobs = append(jobs, job(i))
				}
				res, err := s.UpsertJobs(ctx, jobs)
				if err == nil {
					for i, r := range res {
						if r.Err != nil || r.Outcome != store.OutcomeCreated {
							err = fmt.Errorf("job %s: outcome %v: %w", jobs[i].ID, r.Outcome, r.Err)
							break
						}
					}
				}
				if err != nil {
					errMu.Lock()
					first = cmp.Or(first, err)
					errMu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	require.NoError(b, first)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64((selfCPU()-selfBefore).Microseconds())/float64(b.N), "client-µs/job")
	if cassBefore >= 0 {
		if after := cassandraCPU(); after >= 0 {
			b.ReportMetric(float64((after-cassBefore).Microseconds())/float64(b.N), "cass-µs/job")
		}
	}
}

// selfCPU is the CPU time this process has used (user and system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cassandraCPU is the CPU time the local Cassandra node has used (user and
// system), or -1 when no such process is visible.
func cassandraCPU() time.Duration {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmd, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(cmd, []byte("org.apache.cassandra.service.CassandraDaemon")) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			return -1
		}
		// The fields after the command's closing parenthesis; utime and
		// stime are the 14th and 15th of the whole line.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 13 {
			return -1
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(u+s) * time.Second / 100 // USER_HZ
	}
	return -1
}
