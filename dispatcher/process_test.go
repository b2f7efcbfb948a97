//go:build linux

// Linux only: a dispatcher process is started with a parent-death signal, so
// that it dies with the test binary even when the binary itself is killed
// (a go test timeout) and no cleanup runs.

package dispatcher

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/store"
)

// processSessionTimeout is the group session timeout of the dispatcher
// processes: the brokers' smallest allowed by default, so a killed process's
// shards move as soon as Kafka allows.
const processSessionTimeout = 6 * time.Second

// TestKillDispatcherProcess runs three `sundial dispatcher` processes sharing
// the shards, SIGKILLs one while jobs fire every second on every shard, and
// checks the runs topic: every occurrence due in the window is emitted at
// least once (none missing), every duplicate carries the same run id, and the
// killed process's shards fire again under a new epoch. It prints how long
// after the kill they did, against the session timeout + 2 s (not asserted:
// a timed assertion fails on a loaded CI machine). The jobs are FIRE_ALL, so
// the occurrences that fall due while the shards have no owner fire in the
// catch-up.
func TestKillDispatcherProcess(t *testing.T) {
	t.Parallel()
	const shards = 12
	s := newStack(t, shards)
	bin := testenv.BuildSundial(t)
	names := []string{"p1", "p2", "p3"}
	procs := map[string]*dispatcherProcess{}
	for _, name := range names {
		procs[name] = s.startDispatcherProcess(bin, name)
	}
	owners := s.waitClaimedBy(names, 2*time.Minute)
	t.Logf("three processes own the shards: %v", owners)

	specs := everySecondJobs(shards, 5)
	first := s.register(t.Context(), specs, time.Now)
	// Every shard fires under the epoch of its current owner.
	epochs := map[int]int64{}
	require.Eventually(t, func() bool {
		for sh := range shards {
			st, err := s.store.GetShard(t.Context(), sh)
			if err != nil {
				return false
			}
			epochs[sh] = st.Epoch
			if _, ok := s.runs.shardDispatch(sh, func(e int64) bool { return e == st.Epoch }, true); !ok {
				return false
			}
		}
		return true
	}, time.Minute, 50*time.Millisecond, "not every shard fired under its owner's epoch")
	owners = s.waitClaimedBy(names, time.Minute) // as they are now: a late rebalance may have moved some
	victim := "p2"
	var owned []int
	for sh, o := range owners {
		if o == victim {
			owned = append(owned, sh)
		}
	}
	require.NotEmpty(t, owned)

	// Kill just after a second's runs start going out: firings are in
	// flight.
	next := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(next.Add(5 * time.Millisecond))) // a point in the schedule, not a wait for a condition
	killed := time.Now()
	procs[victim].kill()
	t.Logf("SIGKILLed %s (pid %d) owning shards %v at %s", victim, procs[victim].cmd.Process.Pid, owned, killed.Format("15:04:05.000"))

	// The killed process's shards fire again under a newer epoch.
	require.Eventually(t, func() bool {
		for _, sh := range owned {
			if _, ok := s.runs.shardDispatch(sh, func(e int64) bool { return e > epochs[sh] }, true); !ok {
				return false
			}
		}
		return true
	}, time.Minute, 20*time.Millisecond, "shards of the killed dispatcher were not taken over")
	var worstTakeover, worstSilence time.Duration
	for _, sh := range owned {
		firstNew, _ := s.runs.shardDispatch(sh, func(e int64) bool { return e > epochs[sh] }, true)
		lastOld, _ := s.runs.shardDispatch(sh, func(e int64) bool { return e == epochs[sh] }, false)
		worstTakeover = max(worstTakeover, firstNew.Sub(killed))
		worstSilence = max(worstSilence, firstNew.Sub(lastOld))
	}
	target := processSessionTimeout + 2*time.Second
	t.Logf("take-over: the killed process's %d shards fired again under a new epoch at most %s after the kill, silent at most %s (session timeout %s, target %s, met: %t)",
		len(owned), worstTakeover.Round(time.Millisecond), worstSilence.Round(time.Millisecond), processSessionTimeout, target, worstTakeover < target)
	after := s.waitClaimedBy([]string{"p1", "p3"}, time.Minute)
	t.Logf("after the kill: %v", after)

	until := time.Now().Add(3 * time.Second)
	total, lost, dup := s.waitEveryOccurrence(specs, first, until)
	var records int
	for _, sp := range specs {
		for _, r := range s.runs.jobRuns(sp.GetId()) {
			records++
			// A duplicate is the same run: same id for the same occurrence.
			assert.Equal(t, store.RunID(sp.GetId(), r.GetDueTime().AsTime()), r.GetRunId())
		}
	}
	t.Logf("across the kill: %d jobs, %d occurrences from their first to %s, %d run records, %d missing, %d duplicates (same run id; allowed: firings in flight at the kill)",
		len(specs), total, until.Format("15:04:05.000"), records, lost, dup)
	assert.Zero(t, lost)
	if t.Failed() {
		for _, name := range names {
			procs[name].dumpLog()
		}
	}
}

// dispatcherProcess is a `sundial dispatcher` process started by a test.
type dispatcherProcess struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	once sync.Once
}

// startDispatcherProcess starts `sundial dispatcher` on the stack's topics,
// keyspace and consumer group, named name in shard claims. It is SIGKILLed at
// cleanup, and when the test binary dies.
func (s *stack) startDispatcherProcess(bin, name string) *dispatcherProcess {
	t := s.t
	t.Helper()
	p := &dispatcherProcess{t: t, name: name, log: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	require.NoError(t, err)
	defer f.Close()
	p.cmd = exec.Command(bin, "dispatcher",
		"--kafka-brokers", strings.Join(s.kafka.Brokers, ","),
		"--topic-prefix", s.names.Prefix,
		"--cassandra-hosts", strings.Join(s.cassandra.Hosts, ","),
		"--keyspace", s.cassandra.Keyspace,
		"--group-id", s.names.Prefix+"dispatchers",
		"--instance-id", name,
		"--session-timeout", processSessionTimeout.String(),
	)
	// Only the flags configure it, not the SUNDIAL_* variables of the
	// test's environment.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUNDIAL_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

// kill sends SIGKILL and waits for the process to exit.
func (p *dispatcherProcess) kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}

// dumpLog prints the end of the process's log.
func (p *dispatcherProcess) dumpLog() {
	b, err := os.ReadFile(p.log)
	if err != nil {
		p.t.Logf("%s: log: %v", p.name, err)
		return
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	p.t.Logf("%s: last lines of %s:\n%s", p.name, p.log, strings.Join(lines[max(len(lines)-40, 0):], "\n"))
}

// waitClaimedBy waits until every shard is claimed by one of names, each
// owning shards/len(names) or more, and returns shard -> owner.
func (s *stack) waitClaimedBy(names []string, within time.Duration) map[int]string {
	s.t.Helper()
	var owners map[int]string
	require.Eventually(s.t, func() bool {
		owners = map[int]string{}
		count := map[string]int{}
		for sh := range s.shards {
			st, err := s.store.GetShard(s.t.Context(), sh)
			if err != nil {
				return false
			}
			owners[sh] = st.Owner
			count[st.Owner]++
		}
		for _, n := range names {
			if count[n] < s.shards/len(names) {
				return false
			}
		}
		return len(count) == len(names)
	}, within, 50*time.Millisecond, "shards not claimed by %v", names)
	return owners
}

// shardDispatch returns the earliest (first) or latest dispatch time of the
// runs emitted for shard under an epoch that match accepts.
func (l *runLog) shardDispatch(shard int, match func(epoch int64) bool, first bool) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var at time.Time
	for _, runs := range l.byJob {
		for _, r := range runs {
			if int(r.GetShard()) != shard || !match(r.GetEpoch()) {
				continue
			}
			d := r.GetDispatchedAt().AsTime()
			if at.IsZero() || (first && d.Before(at)) || (!first && d.After(at)) {
				at = d
			}
		}
	}
	return at, !at.IsZero()
}
