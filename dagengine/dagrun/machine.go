package dagrun

import (
	"errors"
	"fmt"
	"time"

	"github.com/sundialhq/sundial/dagengine/dag"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// ErrNothingToResume is returned by a Resume of a DAG run without a failed,
// cancelled or timed-out node.
var ErrNothingToResume = errors.New("nothing to resume: no node failed, was cancelled or timed out")

// Input is something that happens to a DAG run.
type Input interface{ isInput() }

// RunEvent is a RunEvent of a node's run, as read from sundial.events.
type RunEvent struct {
	// RunID and Node identify the node's run (RunEvent.run_id and
	// dag_node_id).
	RunID string
	Node  string
	// Attempt is RunEvent.attempt.
	Attempt int
	// State is RunEvent.state.
	State sundialv1.RunState
}

// Tick says that time has passed: nodes whose deadline is at or before now
// time out.
type Tick struct{}

// Resume reruns the failed, cancelled and timed-out nodes, each with a new
// run id, puts the skipped nodes back to waiting, and continues.
type Resume struct{}

// Enqueued acknowledges that the run of generation Gen of Node is enqueued.
type Enqueued struct {
	Node string
	Gen  int
}

// StartFailed says that generation Gen of Node could not be started:
// Reason is "job_not_found" when its registered job does not exist or
// belongs to another team than the DAG's (the engine does not tell them
// apart).
type StartFailed struct {
	Node   string
	Gen    int
	Reason string
}

// Published acknowledges that the events numbered Seqs are published.
// Instances acknowledge what they published themselves, which need not be
// a prefix of the outbox.
type Published struct{ Seqs []uint64 }

func (RunEvent) isInput()    {}
func (Tick) isInput()        {}
func (Resume) isInput()      {}
func (Enqueued) isInput()    {}
func (StartFailed) isInput() {}
func (Published) isInput()   {}

// Decision is something the shell must do.
type Decision interface{ isDecision() }

// StartNode says: enqueue the run RunID of node Node (position Index in
// the graph), due At.
type StartNode struct {
	Index int
	Node  string
	JobID string
	Gen   int
	RunID string
	At    time.Time
}

// Publish says: publish the event (it is also in State.Outbox until
// acknowledged).
type Publish struct{ Event Event }

// Finish says: the DAG run ended with Status.
type Finish struct{ Status Status }

func (StartNode) isDecision() {}
func (Publish) isDecision()   {}
func (Finish) isDecision()    {}

// Result is the outcome of one step.
type Result struct {
	// State is the new state. The input state is never modified.
	State State
	// Decisions are what this step decided, in order.
	Decisions []Decision
	// Changed reports whether State differs from the input state; a step
	// that changed nothing need not be saved.
	Changed bool
	// Ignored says why an input changed nothing ("stale_run",
	// "node_ended", ...); empty when it counted.
	Ignored string
}

// Start begins the DAG run dagRunID of g, due at due, at now: every root
// node starts.
func Start(g *dag.Graph, dagRunID string, due, now time.Time) Result {
	m := &machine{g: g, now: now, s: State{
		DagRunID:  dagRunID,
		DagID:     g.ID(),
		Due:       due,
		Status:    StatusRunning,
		CreatedAt: now,
		Nodes:     make([]Node, g.Len()),
	}}
	for i := range m.s.Nodes {
		m.s.Nodes[i] = Node{ID: g.Node(i).ID, Phase: Waiting}
	}
	m.emit("", sundialv1.DagState_DAG_STATE_RUNNING, "", "")
	for i := range m.s.Nodes {
		if len(g.Parents(i)) == 0 {
			m.start(i)
		}
	}
	m.finishIfDone()
	return Result{State: m.s, Decisions: m.out, Changed: true}
}

// Apply applies one input to s at now.
func Apply(g *dag.Graph, s State, in Input, now time.Time) (Result, error) {
	if err := check(g, &s); err != nil {
		return Result{}, err
	}
	m := &machine{g: g, now: now, s: s.Clone()}
	var err error
	switch in := in.(type) {
	case RunEvent:
		m.runEvent(in)
	case Tick:
		m.tick()
	case Resume:
		err = m.resume()
	case Enqueued:
		m.enqueued(in)
	case StartFailed:
		m.startFailed(in)
	case Published:
		m.published(in)
	default:
		err = fmt.Errorf("dag run %s: unknown input %T", s.DagRunID, in)
	}
	if err != nil {
		return Result{State: s}, err
	}
	if !m.changed {
		return Result{State: s, Ignored: m.ignored}, nil
	}
	return Result{State: m.s, Decisions: m.out, Changed: true}, nil
}

// check verifies that the state belongs to the graph.
func check(g *dag.Graph, s *State) error {
	if len(s.Nodes) != g.Len() {
		return fmt.Errorf("dag run %s: state has %d nodes, the DAG %d", s.DagRunID, len(s.Nodes), g.Len())
	}
	for i, n := range s.Nodes {
		if n.ID != g.Node(i).ID {
			return fmt.Errorf("dag run %s: state node %d is %q, the DAG's %q", s.DagRunID, i, n.ID, g.Node(i).ID)
		}
	}
	return nil
}

type machine struct {
	g       *dag.Graph
	now     time.Time
	s       State
	out     []Decision
	changed bool
	ignored string
}

func (m *machine) ignore(reason string) { m.ignored = reason }

func (m *machine) emit(node string, state sundialv1.DagState, runID, reason string) {
	m.s.Seq++
	e := Event{Seq: m.s.Seq, Node: node, State: state, Time: m.now, RunID: runID, Reason: reason}
	m.s.Outbox = append(m.s.Outbox, e)
	m.out = append(m.out, Publish{Event: e})
	m.changed = true
}

// start starts the next generation of node i.
func (m *machine) start(i int) {
	n := &m.s.Nodes[i]
	n.Gen++
	n.Phase = Starting
	n.StartedAt = m.now
	n.Deadline = time.Time{}
	if t := m.g.Node(i).Timeout; t > 0 {
		n.Deadline = m.now.Add(t)
	}
	n.EndedAt = time.Time{}
	n.Attempt = 0
	n.RunState = sundialv1.RunState_RUN_STATE_UNSPECIFIED
	n.Reason = ""
	runID := n.RunID(m.s.DagRunID)
	m.out = append(m.out, StartNode{Index: i, Node: n.ID, JobID: m.g.Node(i).JobID, Gen: n.Gen, RunID: runID, At: m.now})
	m.emit(n.ID, sundialv1.DagState_DAG_STATE_RUNNING, runID, "")
}

// end moves node i to a terminal phase and emits its event.
func (m *machine) end(i int, p Phase, reason string) {
	n := &m.s.Nodes[i]
	n.Phase = p
	n.EndedAt = m.now
	n.Reason = reason
	m.emit(n.ID, p.DagState(), n.RunID(m.s.DagRunID), reason)
}

func (m *machine) runEvent(ev RunEvent) {
	i, ok := m.g.Index(ev.Node)
	if !ok {
		m.ignore("unknown_node")
		return
	}
	n := &m.s.Nodes[i]
	if ev.RunID != n.RunID(m.s.DagRunID) || n.Gen == 0 {
		m.ignore("stale_run") // another generation's, or never started
		return
	}
	if !n.Phase.Active() {
		m.ignore("node_ended") // a duplicate, or late after a timeout
		return
	}
	switch ev.State {
	case sundialv1.RunState_RUN_STATE_STARTED, sundialv1.RunState_RUN_STATE_RETRYING:
		if ev.Attempt < n.Attempt || (ev.Attempt == n.Attempt && rank(ev.State) <= rank(n.RunState) && n.Phase == Running) {
			m.ignore("not_newer")
			return
		}
		n.Attempt = ev.Attempt
		n.RunState = ev.State
		n.Phase = Running // a run that started was enqueued
		m.changed = true
	case sundialv1.RunState_RUN_STATE_SUCCEEDED:
		n.Attempt = max(n.Attempt, ev.Attempt)
		n.RunState = ev.State
		m.end(i, Succeeded, "")
		if len(m.failed()) == 0 || m.g.Policy() == dag.ContinueIndependent {
			for _, c := range m.g.Children(i) {
				if m.ready(c) {
					m.start(c)
				}
			}
		}
		m.finishIfDone()
	case sundialv1.RunState_RUN_STATE_DEAD:
		m.fail(i, ev, Failed, "run_dead")
	case sundialv1.RunState_RUN_STATE_SKIPPED:
		m.fail(i, ev, Failed, "run_skipped")
	case sundialv1.RunState_RUN_STATE_CANCELLED:
		m.fail(i, ev, Cancelled, "run_cancelled")
	default:
		// ENQUEUED, FAILED and TIMED_OUT of an attempt (RETRYING or DEAD
		// follows), DEFERRED, and SUSPENDED: a suspended node is neither
		// failed nor done; its resume ends it later with one of the
		// states above, and the DAG run waits for it.
		m.ignore("not_terminal")
	}
}

func (m *machine) fail(i int, ev RunEvent, p Phase, reason string) {
	n := &m.s.Nodes[i]
	n.Attempt = max(n.Attempt, ev.Attempt)
	n.RunState = ev.State
	m.end(i, p, reason)
	m.applyPolicy(i)
	m.finishIfDone()
}

// failed returns the nodes in a failure phase.
func (m *machine) failed() []int { return m.s.Failed() }

// applyPolicy skips what node i's failure rules out.
func (m *machine) applyPolicy(i int) {
	downstream := map[int]bool{}
	for _, d := range m.g.Descendants(i) {
		downstream[d] = true
	}
	for j, n := range m.s.Nodes {
		if n.Phase != Waiting {
			continue
		}
		switch {
		case downstream[j]:
			m.end(j, Skipped, "upstream_failed")
		case m.g.Policy() == dag.Stop:
			m.end(j, Skipped, "dag_stopped")
		}
	}
}

// ready reports a waiting node whose parents all succeeded.
func (m *machine) ready(i int) bool {
	if m.s.Nodes[i].Phase != Waiting {
		return false
	}
	for _, p := range m.g.Parents(i) {
		if m.s.Nodes[p].Phase != Succeeded {
			return false
		}
	}
	return true
}

// finishIfDone ends the DAG run when no node is waiting or under way.
func (m *machine) finishIfDone() {
	if m.s.Status != StatusRunning {
		return
	}
	status, reason := StatusSucceeded, ""
	for _, n := range m.s.Nodes {
		switch {
		case n.Phase == Waiting || n.Phase.Active():
			return
		case n.Phase == TimedOut:
			status, reason = StatusTimedOut, "node_timeout"
		case n.Phase != Succeeded && status == StatusSucceeded:
			status, reason = StatusFailed, "node_failed"
		}
	}
	m.s.Status = status
	m.s.EndedAt = m.now
	m.emit("", status.DagState(), "", reason)
	m.out = append(m.out, Finish{Status: status})
}

func (m *machine) tick() {
	for i, n := range m.s.Nodes {
		if !n.Phase.Active() || n.Deadline.IsZero() || m.now.Before(n.Deadline) {
			continue
		}
		m.s.Stuck = true
		m.end(i, TimedOut, "node_timeout")
		m.applyPolicy(i)
	}
	if !m.changed {
		m.ignore("no_deadline_passed")
		return
	}
	m.finishIfDone()
}

func (m *machine) resume() error {
	rerun := m.failed()
	if len(rerun) == 0 {
		return fmt.Errorf("resume dag run %s: %w", m.s.DagRunID, ErrNothingToResume)
	}
	m.s.Resumes++
	m.s.Stuck = false
	m.changed = true
	if m.s.Status != StatusRunning {
		m.s.Status = StatusRunning
		m.s.EndedAt = time.Time{}
		m.emit("", sundialv1.DagState_DAG_STATE_RUNNING, "", "")
	}
	for i := range m.s.Nodes {
		if n := &m.s.Nodes[i]; n.Phase == Skipped {
			n.Phase = Waiting
			n.Reason = ""
			n.EndedAt = time.Time{}
		}
	}
	for _, i := range rerun {
		m.start(i)
	}
	for i := range m.s.Nodes {
		if m.ready(i) {
			m.start(i)
		}
	}
	return nil
}

func (m *machine) enqueued(in Enqueued) {
	i, ok := m.g.Index(in.Node)
	if !ok {
		m.ignore("unknown_node")
		return
	}
	n := &m.s.Nodes[i]
	if n.Phase != Starting || n.Gen != in.Gen {
		m.ignore("not_starting")
		return
	}
	n.Phase = Running
	m.changed = true
}

func (m *machine) startFailed(in StartFailed) {
	i, ok := m.g.Index(in.Node)
	if !ok {
		m.ignore("unknown_node")
		return
	}
	n := &m.s.Nodes[i]
	if n.Phase != Starting || n.Gen != in.Gen {
		m.ignore("not_starting")
		return
	}
	m.end(i, Failed, in.Reason)
	m.applyPolicy(i)
	m.finishIfDone()
}

func (m *machine) published(in Published) {
	done := make(map[uint64]bool, len(in.Seqs))
	for _, seq := range in.Seqs {
		done[seq] = true
	}
	var keep []Event
	for _, e := range m.s.Outbox {
		if !done[e.Seq] {
			keep = append(keep, e)
		}
	}
	if len(keep) == len(m.s.Outbox) {
		m.ignore("already_published")
		return
	}
	m.s.Outbox = keep
	m.changed = true
}

// rank orders the states of one attempt that the machine records.
func rank(s sundialv1.RunState) int {
	switch s {
	case sundialv1.RunState_RUN_STATE_STARTED:
		return 1
	case sundialv1.RunState_RUN_STATE_RETRYING:
		return 2
	}
	return 0
}
