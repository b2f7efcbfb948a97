package dagengine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/dispatcher"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/runner/target"
)

// TestFiftyNodeDagEngineKilledTwice runs a 50-node DAG through the whole
// pipeline on the real stack while the DAG engine is killed and restarted
// twice: the engine enqueues each node, a real dispatcher fires it, a real
// runner executes it (leases, dedupe marks, retries) and publishes its
// events, and the engine starts the next nodes. Some nodes fail their first
// attempt: the runner retries them and the engine sees only their success.
//
// The engine is the `sundial dag engine` command, built from ./cmd/sundial
// and run as its own OS process, and it is killed with SIGKILL: no Stop, no
// commit, no acknowledgement, whatever writes it has under way cut off
// wherever they are (a node saved as starting but not enqueued, an event
// saved but not published, offsets not committed). The kills happen when
// the 12th and the 32nd node start, from inside that node's execution, so
// the killed engine is usually in the middle of starting a layer (the test
// prints the DAG run's summary at each kill: "starting" nodes are starts
// saved but not known to be enqueued) while other nodes execute, and the
// node's own success reaches sundial.events while no engine runs. A new
// process is started at once with the same consumer groups. The engines are
// static members (--group-instance-id): after the first kill the new
// process takes the killed one's id, as a restarted pod does, and gets its
// partitions back as soon as it joins; after the second it comes under
// another id, as a replacement that is not the killed process would, and
// gets them when the killed member's session (6s) expires. The test logs
// how long each took, from the new process's start until the DAG run holds
// the success of the node in flight at the kill, which only the new
// process can have applied.
//
// The downstream (the runner's handler) keeps a log of every execution:
// its start, and its success or failure, in one sequence. From that log
// the test checks that every node ran under exactly one run id and
// succeeded exactly once (a retried failed attempt is the same run), that
// no node was executed again, and that no node started before all its
// parents had succeeded.
//
// It takes about 20s on the local stack: the build of the command, one
// session timeout of 6s (the replacement under another id waits for the
// killed member's to expire), and the DAG itself.
func TestFiftyNodeDagEngineKilledTwice(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real stack")
	}
	bin := testenv.BuildSundial(t)
	s := setup(t)

	killAt := []int{12, 32} // kill when the n-th distinct node starts
	kills := newKillPoints(killAt)
	log := &downstreamLog{nodes: map[string]bool{}}
	handler := func(failFirst bool) target.Handler {
		return target.HandlerFunc(func(ctx context.Context, run *sundialv1.Run) error {
			started, attempt := log.start(run)
			kills.reached(ctx, started, run.GetDagNodeId()) // blocks while the engine is killed
			if failFirst && attempt == 1 {
				log.end(run, false)
				return errors.New("the first attempt fails")
			}
			log.end(run, true)
			kills.done(run.GetDagNodeId())
			return nil
		})
	}
	runnerMetrics := s.dispatchAndRun(map[string]target.Handler{"work": handler(false), "flaky": handler(true)})

	// Five layers of ten; each node waits for two nodes of the layer above.
	const layers, width = 5, 10
	spec := &sundialv1.DagSpec{Id: "test.e2e", OwnerTeam: "test"}
	flaky := map[string]bool{}
	parents := map[string][]string{}
	for l := range layers {
		for w := range width {
			id := fmt.Sprintf("l%d-n%d", l, w)
			name := "work"
			if w == 3 {
				name = "flaky"
				flaky[id] = true
			}
			n := &sundialv1.DagNode{Id: id, Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
				Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: name}}},
				Retry:  &sundialv1.RetryPolicy{MaxAttempts: 3, InitialBackoff: durationpb.New(100 * time.Millisecond)},
			}}}
			if l > 0 {
				n.Parents = []string{fmt.Sprintf("l%d-n%d", l-1, w), fmt.Sprintf("l%d-n%d", l-1, (w+1)%width)}
			}
			parents[id] = n.Parents
			spec.Nodes = append(spec.Nodes, n)
		}
	}
	s.putDag(spec)

	engineArgs := s.engineArgs()
	dir := t.TempDir()
	engine := startProcess(t, bin, filepath.Join(dir, "engine-1.log"), append(engineArgs, "--group-instance-id", "engine-a")...)

	// The run is started as the trigger consumer starts a triggered one,
	// from this process, while the engine process runs.
	start := time.Now()
	runs, err := dagengine.NewRuns(dagengine.RunsConfig{Store: s.store, Enqueuer: s.enq, Producer: s.client, Topics: s.names, Shards: testShards})
	require.NoError(t, err)
	id, created, err := runs.StartRun(s.ctx, "test.e2e", start, dagengine.OriginTrigger)
	require.NoError(t, err)
	require.True(t, created)
	t.Logf("%v: started DAG run %s", since(start), id)

	// Kill the engine at each kill point, let the node in flight finish
	// while no engine runs, and start a new engine.
	for i, n := range killAt {
		select {
		case <-kills.at[i].reached:
		case <-s.ctx.Done():
			require.FailNow(t, "the DAG run did not reach its kill point", "node %d: %v; %s", n, s.ctx.Err(), engine.tail())
		}
		require.NoError(t, engine.exitErr(), "the engine exited before it was killed")
		engine.kill(t)
		row, _ := s.state(id)
		t.Logf("%v: killed engine %d (SIGKILL) as node %d started; the DAG run then read %q", since(start), i+1, n, row.Summary)
		close(kills.at[i].resume)
		select {
		case <-kills.at[i].finished:
		case <-s.ctx.Done():
			require.FailNow(t, "the node in flight at the kill did not finish", "node %d: %v", n, s.ctx.Err())
		}
		// The first replacement restarts the killed process (its id), the
		// second replaces it (another id).
		instance, how := "engine-a", "restarted under the killed engine's id"
		if i > 0 {
			instance, how = "engine-b", "under another id, replacing the killed engine"
		}
		restarted := time.Now()
		engine = startProcess(t, bin, filepath.Join(dir, fmt.Sprintf("engine-%d.log", i+2)), append(engineArgs, "--group-instance-id", instance)...)
		t.Logf("%v: started engine %d (%s) after node %d succeeded", since(start), i+2, how, n)
		// The node in flight at the kill succeeded while no engine ran:
		// only the new engine can apply that event.
		kills.mu.Lock()
		inFlight := kills.at[i].node
		kills.mu.Unlock()
		require.True(t, eventually(s.ctx, 2*time.Minute, func() bool {
			row, err := s.store.GetDagRun(s.ctx, id)
			if err != nil {
				return false
			}
			st, err := dagrun.Unmarshal(row.State)
			if err != nil {
				return false
			}
			for _, nd := range st.Nodes {
				if nd.ID == inFlight {
					return nd.Phase == dagrun.Succeeded
				}
			}
			return false
		}), "engine %d never applied the success of node %s: %s", i+2, inFlight, engine.tail())
		t.Logf("%v: engine %d resumed the DAG run %v after its start: it applied the success of %s (%s)", since(start), i+2, since(restarted), inFlight, how)
	}

	st := s.waitStatus(id, "succeeded", 2*time.Minute)
	t.Logf("50-node DAG run took %v with two engine kills", since(start))
	require.NoError(t, engine.exitErr(), "the last engine exited")
	t.Logf("runner lease acquisitions: %v acquired, %v refused as already done, %v refused as held",
		metricSum(runnerMetrics, "sundial_runner_lease_acquisitions_total", "acquired"),
		metricSum(runnerMetrics, "sundial_runner_lease_acquisitions_total", "already_done"),
		metricSum(runnerMetrics, "sundial_runner_lease_acquisitions_total", "held"))

	for _, n := range st.Nodes {
		assert.Equal(t, dagrun.Succeeded, n.Phase, n.ID)
		assert.Equal(t, 1, n.Gen, "node %s started once", n.ID)
	}

	// From the downstream's log: one run id and one success per node, the
	// second execution of a flaky node only after its failed first, and
	// every start after all the node's parents succeeded.
	entries := log.snapshot()
	runIDs := map[string][]string{}
	execs := map[string]int{}
	succeeded := map[string]int{} // node -> sequence of its success
	for _, e := range entries {
		if !slices.Contains(runIDs[e.node], e.runID) {
			runIDs[e.node] = append(runIDs[e.node], e.runID)
		}
		switch e.what {
		case "start":
			execs[e.node]++
			assert.Zero(t, succeeded[e.node], "node %s executed again (#%d, attempt %d) after it succeeded", e.node, e.seq, e.attempt)
			for _, p := range parents[e.node] {
				assert.NotZero(t, succeeded[p], "node %s started (#%d) before its parent %s succeeded", e.node, e.seq, p)
			}
		case "ok":
			assert.Zero(t, succeeded[e.node], "node %s succeeded twice", e.node)
			succeeded[e.node] = e.seq
		}
	}
	assert.Len(t, succeeded, layers*width, "nodes that succeeded")
	if t.Failed() {
		for _, e := range entries {
			t.Logf("#%d %s %s %s attempt %d %s", e.seq, e.at.Sub(start).Round(time.Millisecond), e.node, e.runID, e.attempt, e.what)
		}
	}
	for node := range parents {
		assert.Equal(t, []string{dagrun.NodeRunID(id, node, 1)}, runIDs[node], "run ids of node %s", node)
		want := 1
		if flaky[node] {
			want = 2 // one failed attempt, retried by the runner under the same run id
		}
		assert.Equal(t, want, execs[node], "executions of node %s", node)
	}
}

// TestDagAppliedAndTriggeredThroughTheCommands defines a DAG with `sundial
// dag apply` and starts it with `sundial trigger`, on the real stack: the
// definition is answered by the engine (`sundial dag engine`, a process),
// the Trigger record is routed to the DAG by the trigger consumer of
// `sundial registry` (a process), and a real dispatcher and runner execute
// the nodes. The downstream sees each node once, each after its parents.
func TestDagAppliedAndTriggeredThroughTheCommands(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real stack")
	}
	bin := testenv.BuildSundial(t)
	s := setup(t)
	log := &downstreamLog{nodes: map[string]bool{}}
	s.dispatchAndRun(map[string]target.Handler{"work": target.HandlerFunc(func(_ context.Context, run *sundialv1.Run) error {
		log.start(run)
		log.end(run, true)
		return nil
	})})
	dir := t.TempDir()
	startProcess(t, bin, filepath.Join(dir, "engine.log"), s.engineArgs()...)
	group := s.names.Prefix + "e2e-"
	startProcess(t, bin, filepath.Join(dir, "registry.log"), append(append([]string{"registry"}, s.commandFlags()...),
		"--group-id", group+"registry", "--trigger-group-id", group+"triggers", "--log-level", "info")...)

	const spec = `{"id": "cli", "ownerTeam": "test", "nodes": [
		{"id": "a", "inline": {"target": {"handler": {"name": "work"}}}},
		{"id": "b", "parents": ["a"], "inline": {"target": {"handler": {"name": "work"}}}},
		{"id": "c", "parents": ["a"], "inline": {"target": {"handler": {"name": "work"}}}},
		{"id": "d", "parents": ["b", "c"], "inline": {"target": {"handler": {"name": "work"}}}}]}`
	// The team's topic, as `sundial teams create` makes it: the command
	// writes the DAG there (ownership is enforced by default).
	_, err := topics.Ensure(s.ctx, kadm.NewClient(s.client), []topics.Spec{s.names.TeamJobsSpec("test")}, 1)
	require.NoError(t, err)
	apply := exec.CommandContext(s.ctx, bin, append([]string{"dag", "apply", "-"}, s.commandFlags()[:4]...)...)
	apply.Stdin = strings.NewReader(spec)
	out, err := apply.CombinedOutput()
	require.NoError(t, err, "sundial dag apply: %s", out)
	require.Contains(t, string(out), "cli\tCREATED")

	out, err = exec.CommandContext(s.ctx, bin, append([]string{"trigger", "cli", "--key", "first"}, s.commandFlags()[:4]...)...).CombinedOutput()
	require.NoError(t, err, "sundial trigger: %s", out)
	m := regexp.MustCompile(`run (\S+) unless`).FindStringSubmatch(string(out))
	require.NotNil(t, m, "sundial trigger printed %q", out)
	id := m[1]
	start := time.Now()
	st := s.waitStatus(id, "succeeded", time.Minute)
	t.Logf("DAG run %s, started by a Trigger record, succeeded %v after sundial trigger returned", id, since(start))
	row, _ := s.state(id)
	assert.Equal(t, dagengine.OriginTrigger, row.Origin)
	for _, n := range st.Nodes {
		assert.Equal(t, dagrun.Succeeded, n.Phase, n.ID)
	}

	parents := map[string][]string{"a": nil, "b": {"a"}, "c": {"a"}, "d": {"b", "c"}}
	succeeded := map[string]bool{}
	for _, e := range log.snapshot() {
		switch e.what {
		case "start":
			assert.False(t, succeeded[e.node], "node %s executed again", e.node)
			for _, p := range parents[e.node] {
				assert.True(t, succeeded[p], "node %s started before its parent %s succeeded", e.node, p)
			}
		case "ok":
			succeeded[e.node] = true
		}
		assert.Equal(t, dagrun.NodeRunID(id, e.node, 1), e.runID)
	}
	assert.Len(t, succeeded, len(parents))
}

// dispatchAndRun starts a real dispatcher and a real runner with the
// handlers, and returns the runner's metrics.
func (s *stack) dispatchAndRun(handlers map[string]target.Handler) *prometheus.Registry {
	t := s.t
	rd := testenv.NeedRedis(t)
	rc := redis.NewClient(&redis.Options{Addr: rd.Addr})
	t.Cleanup(func() { _ = rc.Close() })
	leases, err := leasing.New(leasing.Config{Client: rc, KeyPrefix: rd.KeyPrefix + "lease:"})
	require.NoError(t, err)
	require.NoError(t, leases.Load(s.ctx))
	group := s.names.Prefix + "e2e-"
	disp, err := dispatcher.New(dispatcher.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Store: s.store, Topics: s.names, GroupID: group + "dispatchers",
		InstanceID: "e2e-dispatcher", Registerer: prometheus.NewRegistry(), Logger: testLogger(t)})
	require.NoError(t, err)
	metrics := prometheus.NewRegistry()
	run, err := runner.New(runner.Config{ID: "e2e-runner", Kafka: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Topics: s.names,
		Group: group + "runners", Leases: leases, Redis: rc, KeyPrefix: rd.KeyPrefix + "runner:", Enqueuer: s.enq,
		Handlers: handlers, Registerer: metrics, Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, disp.Start(s.ctx))
	t.Cleanup(disp.Stop)
	require.NoError(t, run.Start(s.ctx))
	t.Cleanup(run.Stop)
	return metrics
}

// commandFlags are the flags that point a sundial command at the test's
// topics (the first four) and keyspace.
func (s *stack) commandFlags() []string {
	return []string{
		"--kafka-brokers", strings.Join(s.brokers, ","), "--topic-prefix", s.names.Prefix,
		"--cassandra-hosts", strings.Join(s.hosts, ","), "--keyspace", s.keyspace,
	}
}

// engineArgs run `sundial dag engine` on the test's topics, keyspace and
// groups, with short timers.
func (s *stack) engineArgs() []string {
	group := s.names.Prefix + "e2e-"
	return append(append([]string{"dag", "engine"}, s.commandFlags()...),
		"--group-id", group+"dagengine", "--definitions-group-id", group+"dagengine-definitions",
		"--session-timeout", "6s", "--sweep-interval", "1s", "--redrive-after", "2s", "--log-level", "info")
}

func since(start time.Time) time.Duration { return time.Since(start).Round(time.Millisecond) }

// downstreamLog is the downstream's log of executions, in one sequence.
type downstreamLog struct {
	mu      sync.Mutex
	entries []logEntry
	nodes   map[string]bool // nodes started at least once
}

type logEntry struct {
	seq     int // from 1
	at      time.Time
	node    string
	runID   string
	attempt uint32
	what    string // start, ok, failed
}

// start logs the start of an execution and returns how many distinct nodes
// have started, and the execution's attempt.
func (l *downstreamLog) start(run *sundialv1.Run) (started int, attempt uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.add(run, "start")
	if l.nodes[run.GetDagNodeId()] {
		return 0, run.GetAttempt() // not a new node
	}
	l.nodes[run.GetDagNodeId()] = true
	return len(l.nodes), run.GetAttempt()
}

func (l *downstreamLog) end(run *sundialv1.Run, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.add(run, map[bool]string{true: "ok", false: "failed"}[ok])
}

func (l *downstreamLog) add(run *sundialv1.Run, what string) {
	l.entries = append(l.entries, logEntry{seq: len(l.entries) + 1, at: time.Now(), node: run.GetDagNodeId(),
		runID: run.GetRunId(), attempt: run.GetAttempt(), what: what})
}

func (l *downstreamLog) snapshot() []logEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

// killPoints hold the executions of the nodes at which the engine is
// killed: the execution signals reached and waits for resume; the test
// kills the engine, resumes it, and waits for finished before it starts a
// new engine.
type killPoints struct {
	mu sync.Mutex
	at []*killPoint
}

type killPoint struct {
	started                   int    // the kill point: when the started-th distinct node starts
	node                      string // that node, once known
	done                      bool   // finished is closed
	reached, resume, finished chan struct{}
}

func newKillPoints(nodes []int) *killPoints {
	k := &killPoints{}
	for _, n := range nodes {
		k.at = append(k.at, &killPoint{started: n, reached: make(chan struct{}), resume: make(chan struct{}), finished: make(chan struct{})})
	}
	return k
}

// reached blocks the execution of the started-th node, if it is a kill
// point, until the test has killed the engine.
func (k *killPoints) reached(ctx context.Context, started int, node string) {
	for _, p := range k.at {
		if p.started == started {
			k.mu.Lock()
			p.node = node
			k.mu.Unlock()
			close(p.reached)
			select {
			case <-p.resume:
			case <-ctx.Done():
			}
		}
	}
}

// done tells the test that a kill point's node has succeeded.
func (k *killPoints) done(node string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.at {
		if p.node == node && !p.done {
			p.done = true
			close(p.finished)
		}
	}
}

// process is a sundial command run by the test, its output in a file.
type process struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	err    error
}

// startProcess starts bin with args. Its environment has no SUNDIAL_
// variable: the flags say everything. The process dies with the test binary
// (on Linux) and is ended at cleanup.
func startProcess(t *testing.T, bin, logPath string, args ...string) *process {
	t.Helper()
	f, err := os.Create(logPath)
	require.NoError(t, err)
	defer func() { _ = f.Close() }() // the child holds its own descriptor
	// Not tied to a context: the cleanup stops it gently, then kills it.
	cmd := exec.CommandContext(context.Background(), bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUNDIAL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = dieWithParent()
	require.NoError(t, cmd.Start(), "start %s", bin)
	p := &process{cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s:\n%s", logPath, p.tail())
		}
	})
	return p
}

// kill sends SIGKILL and waits until the process is gone.
func (p *process) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Kill())
	<-p.exited
}

// exitErr is an error if the process has exited.
func (p *process) exitErr() error {
	select {
	case <-p.exited:
		return fmt.Errorf("exited: %w; %s:\n%s", p.err, p.log, p.tail())
	default:
		return nil
	}
}

// tail is the end of the process's output.
func (p *process) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}
