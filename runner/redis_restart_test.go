package runner

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// ownRedis is a redis-server process of one test's own, which the test may
// kill with SIGKILL and start again on the same port and data directory.
// Tests that kill Redis cannot use the stack's Redis: every test package
// shares it.
type ownRedis struct {
	t    *testing.T
	bin  string
	dir  string
	addr string
	port string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// startOwnRedis starts redis-server on a free 127.0.0.1 port with its data in
// a temporary directory and an append-only file fsynced every second, as the
// local stack runs it (deploy/local/redis/redis.conf.in). It follows
// internal/testenv's rules: skipped under -short; a missing binary fails the
// test under CI and skips it otherwise. The process is killed at cleanup.
func startOwnRedis(t *testing.T) *ownRedis {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a redis-server binary; skipped under -short")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server is not on PATH (.ci/run installs Debian's redis-server): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set, so a missing backend fails the run: %s", msg)
		}
		t.Skip(msg)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(l.Addr().String())
	require.NoError(t, err)
	require.NoError(t, l.Close())
	s := &ownRedis{t: t, bin: bin, dir: t.TempDir(), port: port, addr: net.JoinHostPort("127.0.0.1", port)}
	t.Cleanup(s.kill)
	s.start()
	return s
}

// start runs redis-server and waits until it answers PING (after loading
// its append-only file).
func (s *ownRedis) start() {
	s.t.Helper()
	logFile, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(s.t, err)
	defer logFile.Close()
	cmd := exec.Command(s.bin,
		"--bind", "127.0.0.1", "--port", s.port, "--dir", s.dir,
		"--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
		"--daemonize", "no", "--protected-mode", "no")
	// A file, not a pipe: no goroutine copies the output.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(s.t, cmd.Start())
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	require.Eventually(s.t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return c.Ping(ctx).Err() == nil
	}, 30*time.Second, 20*time.Millisecond, "redis-server on %s did not answer PING; log:\n%s", s.addr, s.log())
}

// kill sends SIGKILL and reaps the process; it does nothing when none runs.
func (s *ownRedis) kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	err := cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		s.t.Logf("redis-server wait: %v", err)
	}
}

func (s *ownRedis) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// kafkaWithOwnRedis is the stack's Kafka, with topics of the test's own
// prefix, and the given Redis address.
func kafkaWithOwnRedis(t *testing.T, partitions int32, redisAddr string) backends {
	t.Helper()
	k := testenv.NeedKafka(t)
	names := topics.Names{Prefix: k.TopicPrefix}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	require.NoError(t, err)
	defer cl.Close()
	var specs []topics.Spec
	for _, name := range append(names.AllRuns(), names.Events(), names.DLQ()) {
		specs = append(specs, topics.Spec{Name: name, Partitions: partitions})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = topics.Ensure(ctx, kadm.NewClient(cl), specs, 1)
	require.NoError(t, err)
	return backends{brokers: k.Brokers, names: names, redisAddr: redisAddr, prefix: "rr:", real: true}
}

// TestRedisRestartLosesNoRun kills Redis with SIGKILL while runs execute and
// starts it again on the same port and data directory after about 1.5 s.
//
// Redis runs with `appendfsync everysec`, as the local stack does, not
// `always`: the test is about the configuration Sundial is run with, and
// with everysec up to a second of writes acknowledged before the kill is
// gone after the restart (dedupe marks, leases, fencing counters). The
// design does not promise one execution across such a loss: a run whose
// mark was lost and that is delivered again executes again, with the same
// idempotency key. So the test asserts what the design guarantees: no run
// is lost (every run succeeds), every request carries its run id as its
// idempotency key, and so an idempotent downstream applies each run's
// effect once. Duplicate executions and the requests a non-idempotent
// downstream would have applied twice are printed as they are.
func TestRedisRestartLosesNoRun(t *testing.T) {
	rs := startOwnRedis(t)
	b := kafkaWithOwnRedis(t, 4, rs.addr)
	h := newHarness(t, b, steadyTTL)

	// Every request is checked for its idempotency key, and takes a little
	// time, so that runs are inside the downstream when Redis dies.
	var wrongKey, succeededCalls atomic.Int64
	h.down.set(func(r *http.Request, _ int) (int, http.Header) {
		if r.Header.Get("Idempotency-Key") != r.Header.Get("Sundial-Run-Id") || r.Header.Get("Idempotency-Key") == "" {
			wrongKey.Add(1)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-r.Context().Done():
		}
		succeededCalls.Add(1)
		return http.StatusOK, nil
	})
	r1 := h.start(nil)
	r2 := h.start(nil)
	waitAssigned(t, 3*4, r1, r2)

	const n = 500
	const rate = 150 // runs per second: 500 runs over about 3.3 s
	const batch = 10
	begin := time.Now()
	runs := make([]*sundialv1.Run, 0, n)
	for i := range n {
		due := begin.Add(time.Duration(i) * time.Second / rate)
		runs = append(runs, h.run("rr-"+strconv.Itoa(i), due, nil))
	}
	produced := make(chan struct{})
	var produceErr error
	go func() {
		defer close(produced)
		for i := 0; i < n; i += batch {
			if d := time.Until(runs[i].GetDueTime().AsTime()); d > 0 {
				time.Sleep(d) // open-loop pacing of the producer, not a wait for a condition
			}
			if produceErr = produceBatch(t.Context(), h.client, b.names, runs[i:min(i+batch, n)]); produceErr != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { <-produced })

	// Kill Redis once a fifth of the runs have succeeded and some are
	// inside the downstream, while the rest are being produced.
	var inFlightAtKill int64
	require.Eventually(t, func() bool {
		inFlightAtKill = h.down.inFlight(succeededCalls.Load())
		return h.events.count(succeeded) >= n/5 && inFlightAtKill >= 4
	}, wait, 5*time.Millisecond, "succeeded %d before the kill", h.events.count(succeeded))
	rs.kill()
	killedAt := time.Now()
	succeededAtKill := h.events.count(succeeded)
	// The outage lasts about 1.5 s (its length is the point, not a wait
	// for something to happen).
	time.Sleep(1500 * time.Millisecond)
	rs.start()
	outage := time.Since(killedAt)
	<-produced
	require.NoError(t, produceErr)

	succeededRun := func(id string) bool {
		for _, s := range h.events.states(id) {
			if s == succeeded {
				return true
			}
		}
		return false
	}
	missing := func() int {
		m := 0
		for _, run := range runs {
			if !succeededRun(run.GetRunId()) {
				m++
			}
		}
		return m
	}
	require.Eventually(t, func() bool { return missing() == 0 }, 45*time.Second, 50*time.Millisecond,
		"runs without SUCCEEDED: %d of %d; first: %s", missing(), n, firstMissing(h, runs, succeededRun))
	recovered := time.Since(killedAt)

	lost := 0
	for _, run := range runs {
		if h.down.requestsOf(run.GetRunId()) == 0 {
			lost++
		}
	}
	f := h.down.figures()
	effects, dupEffects, dupRequests := f.effects, f.dupEffects, f.dupRequests
	_, dupStarts := latencies(h.events.all())
	leaseLost, dead := 0, 0
	for _, ev := range h.events.all() {
		switch {
		case ev.GetState() == failed && ev.GetError().GetCode() == codeLeaseLost:
			leaseLost++
		case ev.GetState() == sundialv1.RunState_RUN_STATE_DEAD:
			dead++
		}
	}
	t.Logf("Redis SIGKILLed after %d of %d runs succeeded (%d requests in flight), back after %s (appendfsync everysec); all runs succeeded %s after the kill",
		succeededAtKill, n, inFlightAtKill, outage.Round(time.Millisecond), recovered.Round(time.Millisecond))
	t.Logf("lost %d, dead %d, attempts failed with lease_lost %d, duplicate executions (runs started more than once) %d, duplicate requests (keys called more than once, what a non-idempotent downstream would apply twice) %d, duplicate effects at the idempotent downstream %d, requests with a wrong idempotency key %d",
		lost, dead, leaseLost, dupStarts, dupRequests, dupEffects, wrongKey.Load())
	t.Logf("downstream: %s", f)
	assert.Zero(t, lost, "every run reached the downstream")
	assert.Zero(t, dead, "no run was dead-lettered")
	assert.Equal(t, n, effects, "every run took effect")
	assert.Zero(t, wrongKey.Load(), "every request carries its run id as its idempotency key")
	// Follows from the keys: the downstream applies once per key, and
	// counts effects per run id.
	assert.Zero(t, dupEffects)
}

// inFlight is how many requests the downstream has received but not yet
// answered with success, given how many it has answered.
func (d *downstream) inFlight(answered int64) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var got int64
	for _, n := range d.requests {
		got += int64(n)
	}
	return got - answered
}

func firstMissing(h *harness, runs []*sundialv1.Run, ok func(string) bool) string {
	for _, run := range runs {
		if !ok(run.GetRunId()) {
			return run.GetRunId() + " " + h.events.describe(run.GetRunId())
		}
	}
	return "none"
}

// produceBatch is produceRuns for a goroutine other than the test's.
func produceBatch(ctx context.Context, cl *kgo.Client, names topics.Names, runs []*sundialv1.Run) error {
	recs := make([]*kgo.Record, 0, len(runs))
	for _, r := range runs {
		val, err := proto.Marshal(r)
		if err != nil {
			return err
		}
		recs = append(recs, &kgo.Record{Topic: names.Runs(topicPriority(r.GetPriority())), Key: []byte(r.GetJobId()), Value: val})
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, recs...).FirstErr()
}
