package dagrun_test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestScenarios runs the DAG run machine through the scenarios of
// testdata/scenarios, one file per behaviour, in cockroachdb/datadriven's
// format: a command with arguments, input lines, "----", and the expected
// output. Rewrite the expected outputs after a deliberate change with:
// go test ./dagengine/dagrun -run TestScenarios -rewrite
//
// Commands:
//
//	dag <id> [policy=stop|continue]    the DAG; one node a line of input:
//	    <ids> [after=<ids>] [timeout=<duration>] [job=<job id>]
//	at <offset>             the clock, as an offset from the DAG run's due time
//
// Steps, each answered with what it decided: "starts: <ids>" (the StartNode
// decisions, in order), "events: <id>:<state>[/<reason>] ..." (the events
// published, in order; "dag" is the DAG run), "finished: <status>",
// "ignored: <reasons>" (the step changed nothing) and "error: <text>":
//
//	start                   start the DAG run
//	ack                     the shell's work: Enqueued for every starting node, Published for every event in the outbox
//	event <ids> <state> [attempt=<n>] [gen=<g>]   a RunEvent of each node's run (current generation unless gen=)
//	tick | resume
//	startfailed <id> <reason>
//
// Queries of the state after the last step:
//
//	nodes <ids> ...         node phases: "<ids>=<phase>" when the listed nodes share it
//	status                  the DAG run's status, and "stuck"
//	deadline                the next node deadline, as an offset, or "none"
//
// <ids> is a comma-separated list where "m[1..3]" stands for m1,m2,m3, and
// outputs write a run of three or more such ids the same way. A step over
// several nodes is several inputs; its output is theirs together. After
// every step the runner also checks invariants: the stored form
// round-trips, a step that changed nothing returned the state as it was,
// the input state is not modified, a failed step leaves the state alone,
// and no node generation is ever started twice.
func TestScenarios(t *testing.T) {
	t.Parallel()
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		t.Parallel()
		sc := &scenario{t: t, now: base, started: map[string]bool{}}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			sc.t = t
			args := words(d)
			switch d.Cmd {
			case "dag":
				sc.dag(args, d.Input)
				return ""
			case "at":
				require.Len(t, args, 1, d.Pos)
				sc.now = base.Add(sc.duration(args[0]))
				return ""
			case "nodes", "status", "deadline":
				require.NotNil(t, sc.state, "%s: start first", d.Pos)
				return sc.query(d.Cmd, args)
			}
			sc.step(d.Cmd, args)
			return sc.outcome()
		})
	})
}

// words are a command's arguments as written: "key" or "key=value".
func words(d *datadriven.TestData) []string {
	var out []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			out = append(out, a.Key)
			continue
		}
		out = append(out, a.Key+"="+strings.Join(a.Vals, ","))
	}
	return out
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

// dag defines the DAG: args are its id and options, input its nodes.
func (sc *scenario) dag(args []string, input string) {
	t := sc.t
	require.NotEmpty(t, args, "dag <id>")
	opts := kv(args[1:])
	sc.spec = &sundialv1.DagSpec{Id: "test." + args[0], OwnerTeam: "test"}
	sc.g = nil
	switch opts["policy"] {
	case "", "stop":
		sc.spec.FailurePolicy = sundialv1.DagFailurePolicy_DAG_FAILURE_POLICY_STOP
	case "continue":
		sc.spec.FailurePolicy = sundialv1.DagFailurePolicy_DAG_FAILURE_POLICY_CONTINUE_INDEPENDENT
	default:
		t.Fatalf("unknown policy %q", opts["policy"])
	}
	for _, line := range strings.Split(input, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		nopts := kv(fields[1:])
		for _, id := range expand(t, fields[0]) {
			n := &sundialv1.DagNode{Id: id, Job: &sundialv1.DagNode_JobId{JobId: cmpOr(nopts["job"], "job."+id)}}
			if after := nopts["after"]; after != "" {
				n.Parents = expand(t, after)
			}
			if d := nopts["timeout"]; d != "" {
				n.Timeout = durationpb.New(sc.duration(d))
			}
			sc.spec.Nodes = append(sc.spec.Nodes, n)
		}
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

// outcome is what the last step decided.
func (sc *scenario) outcome() string {
	var starts, events, finished []string
	for _, d := range sc.decisions {
		switch d := d.(type) {
		case dagrun.StartNode:
			starts = append(starts, d.Node)
		case dagrun.Publish:
			events = append(events, eventString(d.Event))
		case dagrun.Finish:
			finished = append(finished, d.Status.String())
		default:
			sc.t.Fatalf("unknown decision %T", d)
		}
	}
	var out []string
	if len(starts) > 0 {
		out = append(out, "starts: "+compress(starts, ""))
	}
	if len(events) > 0 {
		out = append(out, "events: "+compressEvents(events))
	}
	if len(finished) > 0 {
		out = append(out, "finished: "+strings.Join(finished, " "))
	}
	if !sc.changed && len(sc.ignored) > 0 {
		out = append(out, "ignored: "+strings.Join(slices.Compact(slices.Clone(sc.ignored)), " "))
	}
	if sc.err != nil {
		out = append(out, "error: "+sc.err.Error())
	}
	return strings.Join(out, "\n")
}

// query answers nodes, status and deadline.
func (sc *scenario) query(what string, args []string) string {
	t := sc.t
	switch what {
	case "nodes":
		var out []string
		for _, group := range args {
			ids := expand(t, group)
			phases := make([]string, len(ids))
			for i, id := range ids {
				n, ok := sc.graph().Index(id)
				require.True(t, ok, "unknown node %q", id)
				phases[i] = sc.state.Nodes[n].Phase.String()
			}
			if len(slices.Compact(slices.Clone(phases))) == 1 {
				out = append(out, group+"="+phases[0])
				continue
			}
			for i, id := range ids {
				out = append(out, id+"="+phases[i])
			}
		}
		return strings.Join(out, " ")
	case "status":
		if sc.state.Stuck {
			return sc.state.Status.String() + " stuck"
		}
		return sc.state.Status.String()
	default: // deadline
		d := sc.state.NextDeadline()
		if d.IsZero() {
			return "none"
		}
		return d.Sub(base).String()
	}
}

var idPattern = regexp.MustCompile(`^(.*?)(\d+)$`)

// compress writes ids as a comma-separated list, a run of three or more
// consecutive numbered ids (m1,m2,m3) as m[1..3]; suffix follows each item.
func compress(ids []string, suffix string) string {
	var out []string
	for i := 0; i < len(ids); {
		j := i + 1
		m := idPattern.FindStringSubmatch(ids[i])
		if m != nil {
			lo, _ := strconv.Atoi(m[2])
			for j < len(ids) && ids[j] == m[1]+strconv.Itoa(lo+j-i) {
				j++
			}
			if j-i >= 3 {
				out = append(out, fmt.Sprintf("%s[%d..%d]%s", m[1], lo, lo+j-i-1, suffix))
				i = j
				continue
			}
		}
		out = append(out, ids[i]+suffix)
		i++
	}
	return strings.Join(out, ",")
}

// compressEvents writes events "<id>:<rest>" separated by spaces, a run of
// three or more consecutive numbered ids with the same rest as
// m[1..3]:<rest>.
func compressEvents(events []string) string {
	var out []string
	for i := 0; i < len(events); {
		_, rest, _ := strings.Cut(events[i], ":")
		var ids []string
		for ; i < len(events); i++ {
			id, r, _ := strings.Cut(events[i], ":")
			if r != rest {
				break
			}
			ids = append(ids, id)
		}
		out = append(out, strings.Split(compress(ids, ":"+rest), ",")...)
	}
	return strings.Join(out, " ")
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
