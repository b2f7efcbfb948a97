package dagrun_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestScenarios runs every testdata/*.txt scenario. The format, one
// statement per line ("#" starts a comment):
//
//	dag <id> [policy=stop|continue]
//	node <ids> [after=<ids>] [timeout=<duration>] [job=<job id>]
//
// then steps, each followed by the expectations that check it:
//
//	at <offset>             the clock, as an offset from the DAG run's due time
//	start                   start the DAG run
//	ack                     the shell's work: Enqueued for every starting node, Published for every event in the outbox
//	event <ids> <state> [attempt=<n>] [gen=<g>]   a RunEvent of each node's run (current generation unless gen=)
//	tick | resume
//	startfailed <id> <reason>
//
//	expect starts <ids>|none          the StartNode decisions of the step, in order
//	expect events <id>:<state>[/<reason>] ...|none   the events published, in order ("dag" is the DAG run)
//	expect nodes <ids>=<phase> ...    node phases
//	expect status <status> [stuck]
//	expect finished <status>|none
//	expect ignored <reason>           the step changed nothing, for that reason
//	expect error <text>               the step failed with an error containing the text
//	expect deadline <offset>|none     the next node deadline
//
// <ids> is a comma-separated list where "m[1..3]" stands for m1,m2,m3. A
// step over several nodes is several inputs; its expectations check them
// together. After every step the runner also checks invariants: the stored
// form round-trips, a step that changed nothing returned the state as it
// was, and no node generation is ever started twice.
func TestScenarios(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			t.Parallel()
			runScenario(t, f)
		})
	}
}

var base = time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)

var rangePattern = regexp.MustCompile(`^(.*)\[(\d+)\.\.(\d+)\]$`)

// expand reads a list of ids with ranges.
func expand(t *testing.T, list string) []string {
	t.Helper()
	var out []string
	for _, item := range strings.Split(list, ",") {
		if m := rangePattern.FindStringSubmatch(item); m != nil {
			lo, _ := strconv.Atoi(m[2])
			hi, _ := strconv.Atoi(m[3])
			require.LessOrEqual(t, lo, hi, item)
			for i := lo; i <= hi; i++ {
				out = append(out, m[1]+strconv.Itoa(i))
			}
			continue
		}
		out = append(out, item)
	}
	return out
}

// kv splits "k=v" arguments.
func kv(args []string) map[string]string {
	out := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		out[k] = v
	}
	return out
}

type scenario struct {
	t       *testing.T
	spec    *sundialv1.DagSpec
	g       *dag.Graph
	state   *dagrun.State
	now     time.Time
	started map[string]bool // node#gen

	// The last step.
	decisions []dagrun.Decision
	ignored   []string
	changed   bool
	err       error
}

func runScenario(t *testing.T, path string) {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := &scenario{t: t, now: base, started: map[string]bool{}}
	lines := bufio.NewScanner(f)
	lines.Buffer(nil, 1<<20)
	for n := 1; lines.Scan(); n++ {
		line := lines.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		t.Logf("%s:%d: %s", filepath.Base(path), n, strings.TrimSpace(line))
		ok := t.Run(fmt.Sprintf("line%d", n), func(t *testing.T) {
			sc.t = t
			sc.statement(fields[0], fields[1:])
		})
		if !ok {
			t.Fatalf("%s:%d: %s failed", path, n, strings.TrimSpace(line))
		}
	}
	require.NoError(t, lines.Err())
}

func (sc *scenario) statement(verb string, args []string) {
	t := sc.t
	switch verb {
	case "dag":
		opts := kv(args[1:])
		sc.spec = &sundialv1.DagSpec{Id: "test." + args[0], OwnerTeam: "test"}
		switch opts["policy"] {
		case "", "stop":
			sc.spec.FailurePolicy = sundialv1.DagFailurePolicy_DAG_FAILURE_POLICY_STOP
		case "continue":
			sc.spec.FailurePolicy = sundialv1.DagFailurePolicy_DAG_FAILURE_POLICY_CONTINUE_INDEPENDENT
		default:
			t.Fatalf("unknown policy %q", opts["policy"])
		}
	case "node":
		opts := kv(args[1:])
		for _, id := range expand(t, args[0]) {
			n := &sundialv1.DagNode{Id: id, Job: &sundialv1.DagNode_JobId{JobId: cmpOr(opts["job"], "job."+id)}}
			if after := opts["after"]; after != "" {
				n.Parents = expand(t, after)
			}
			if d := opts["timeout"]; d != "" {
				n.Timeout = durationpb.New(sc.duration(d))
			}
			sc.spec.Nodes = append(sc.spec.Nodes, n)
		}
	case "at":
		sc.now = base.Add(sc.duration(args[0]))
	case "expect":
		sc.expect(args[0], args[1:])
	default:
		sc.step(verb, args)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (sc *scenario) duration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	require.NoError(sc.t, err)
	return d
}

func (sc *scenario) graph() *dag.Graph {
	if sc.g == nil {
		g, errs := dag.Compile(sc.spec, dag.Options{})
		require.Empty(sc.t, errs)
		sc.g = g
	}
	return sc.g
}

func (sc *scenario) step(verb string, args []string) {
	t := sc.t
	sc.decisions, sc.ignored, sc.changed, sc.err = nil, nil, false, nil
	g := sc.graph()
	if verb == "start" {
		res := dagrun.Start(g, dagrun.RunID(g.ID(), base), base, sc.now)
		sc.record(nil, res)
		sc.roundTrip()
		return
	}
	require.NotNil(t, sc.state, "start first")
	var inputs []dagrun.Input
	switch verb {
	case "ack":
		for _, n := range sc.state.Nodes {
			if n.Phase == dagrun.Starting {
				inputs = append(inputs, dagrun.Enqueued{Node: n.ID, Gen: n.Gen})
			}
		}
		var seqs []uint64
		for _, e := range sc.state.Outbox {
			seqs = append(seqs, e.Seq)
		}
		inputs = append(inputs, dagrun.Published{Seqs: seqs})
	case "event":
		state, ok := sundialv1.RunState_value["RUN_STATE_"+strings.ToUpper(args[1])]
		require.True(t, ok, "unknown run state %q", args[1])
		opts := kv(args[2:])
		for _, id := range expand(t, args[0]) {
			i, ok := g.Index(id)
			require.True(t, ok, "unknown node %q", id)
			gen := max(sc.state.Nodes[i].Gen, 1)
			if s := opts["gen"]; s != "" {
				gen, _ = strconv.Atoi(s)
			}
			attempt := 1
			if s := opts["attempt"]; s != "" {
				attempt, _ = strconv.Atoi(s)
			}
			inputs = append(inputs, dagrun.RunEvent{
				RunID: dagrun.NodeRunID(sc.state.DagRunID, id, gen), Node: id, Attempt: attempt, State: sundialv1.RunState(state),
			})
		}
	case "tick":
		inputs = append(inputs, dagrun.Tick{})
	case "resume":
		inputs = append(inputs, dagrun.Resume{})
	case "startfailed":
		i, ok := g.Index(args[0])
		require.True(t, ok)
		inputs = append(inputs, dagrun.StartFailed{Node: args[0], Gen: sc.state.Nodes[i].Gen, Reason: args[1]})
	default:
		t.Fatalf("unknown statement %q", verb)
	}
	// Deep comparisons of big states on every input would dominate the
	// run time; small scenarios get them on every input.
	deep := g.Len() <= 100
	for _, in := range inputs {
		var before *dagrun.State
		if deep {
			b := sc.state.Clone()
			before = &b
		}
		res, err := dagrun.Apply(g, *sc.state, in, sc.now)
		if err != nil {
			sc.err = err
			if deep {
				assert.Equal(t, *before, *sc.state, "a failed step leaves the state alone")
			}
			continue
		}
		sc.record(before, res)
	}
	sc.roundTrip()
}

// record takes a step's result and checks the invariants.
func (sc *scenario) record(before *dagrun.State, res dagrun.Result) {
	t := sc.t
	if !res.Changed {
		if before != nil {
			assert.Equal(t, *before, res.State, "an unchanged step returns the state as it was")
		}
		assert.Empty(t, res.Decisions)
		sc.ignored = append(sc.ignored, res.Ignored)
	} else {
		sc.changed = true
	}
	if before != nil && sc.state != nil {
		assert.Equal(t, *before, *sc.state, "the input state is not modified")
	}
	for _, d := range res.Decisions {
		if s, ok := d.(dagrun.StartNode); ok {
			key := s.Node + "#" + strconv.Itoa(s.Gen)
			require.False(t, sc.started[key], "node %s generation %d started twice", s.Node, s.Gen)
			sc.started[key] = true
			assert.Equal(t, dagrun.NodeRunID(res.State.DagRunID, s.Node, s.Gen), s.RunID)
		}
	}
	sc.decisions = append(sc.decisions, res.Decisions...)
	s := res.State
	sc.state = &s
}

// roundTrip checks that the state survives its stored form.
func (sc *scenario) roundTrip() {
	b, err := dagrun.Marshal(*sc.state)
	require.NoError(sc.t, err)
	back, err := dagrun.Unmarshal(b)
	require.NoError(sc.t, err)
	assert.Equal(sc.t, normalize(*sc.state), normalize(back), "the stored form round-trips")
}

// normalize makes empty slices nil, as the codec returns them.
func normalize(s dagrun.State) dagrun.State {
	if len(s.Outbox) == 0 {
		s.Outbox = nil
	}
	return s
}

func (sc *scenario) expect(what string, args []string) {
	t := sc.t
	switch what {
	case "starts":
		var got []string
		for _, d := range sc.decisions {
			if s, ok := d.(dagrun.StartNode); ok {
				got = append(got, s.Node)
			}
		}
		var want []string
		if args[0] != "none" {
			want = expand(t, args[0])
		}
		assert.Equal(t, want, got, "started nodes")
	case "events":
		var got []string
		for _, d := range sc.decisions {
			if p, ok := d.(dagrun.Publish); ok {
				got = append(got, eventString(p.Event))
			}
		}
		var want []string
		if args[0] != "none" {
			for _, a := range args {
				ids, rest, _ := strings.Cut(a, ":")
				for _, id := range expand(t, ids) {
					want = append(want, id+":"+rest)
				}
			}
		}
		assert.Equal(t, want, got, "published events")
	case "nodes":
		for _, a := range args {
			ids, phase, _ := strings.Cut(a, "=")
			for _, id := range expand(t, ids) {
				i, ok := sc.graph().Index(id)
				require.True(t, ok, id)
				assert.Equal(t, phase, sc.state.Nodes[i].Phase.String(), "phase of node %s", id)
			}
		}
	case "status":
		assert.Equal(t, args[0], sc.state.Status.String(), "status")
		assert.Equal(t, slices.Contains(args[1:], "stuck"), sc.state.Stuck, "stuck")
	case "finished":
		var got []string
		for _, d := range sc.decisions {
			if f, ok := d.(dagrun.Finish); ok {
				got = append(got, f.Status.String())
			}
		}
		if args[0] == "none" {
			assert.Empty(t, got)
		} else {
			assert.Equal(t, []string{args[0]}, got)
		}
	case "ignored":
		assert.False(t, sc.changed, "the step changed the state")
		require.NotEmpty(t, sc.ignored)
		for _, r := range sc.ignored {
			assert.Equal(t, args[0], r)
		}
	case "error":
		require.Error(t, sc.err)
		assert.Contains(t, sc.err.Error(), strings.Join(args, " "))
	case "deadline":
		d := sc.state.NextDeadline()
		if args[0] == "none" {
			assert.True(t, d.IsZero(), "deadline %v", d)
		} else {
			assert.Equal(t, base.Add(sc.duration(args[0])), d)
		}
	default:
		t.Fatalf("unknown expectation %q", what)
	}
	if what != "error" {
		assert.NoError(t, sc.err, "the step failed")
	}
}

func eventString(e dagrun.Event) string {
	node := e.Node
	if node == "" {
		node = "dag"
	}
	s := node + ":" + strings.ToLower(strings.TrimPrefix(e.State.String(), "DAG_STATE_"))
	if e.Reason != "" {
		s += "/" + e.Reason
	}
	return s
}
