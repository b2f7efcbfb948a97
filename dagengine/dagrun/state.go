package dagrun

import (
	"fmt"
	"strconv"
	"time"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Phase is the state of one node in a DAG run.
type Phase uint8

// Node phases; see the package doc for the transitions.
const (
	// Waiting: some parent has not succeeded yet.
	Waiting Phase = iota + 1
	// Starting: the engine decided to start the node; its run is not yet
	// known to be enqueued.
	Starting
	// Running: the node's run is enqueued (or already executing).
	Running
	// Succeeded: the node's run succeeded. Terminal.
	Succeeded
	// Failed: the node's run ended DEAD or SKIPPED, or its job was not
	// found. Terminal until a resume.
	Failed
	// Cancelled: the node's run was cancelled. Terminal until a resume.
	Cancelled
	// TimedOut: the node passed its deadline (stuck). Terminal until a
	// resume.
	TimedOut
	// Skipped: the node was never started because of a failure. Terminal
	// until a resume.
	Skipped
)

var phaseNames = [...]string{"", "waiting", "starting", "running", "succeeded", "failed", "cancelled", "timed_out", "skipped"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) && p > 0 {
		return phaseNames[p]
	}
	return "Phase(" + strconv.Itoa(int(p)) + ")"
}

// ParsePhase is the inverse of Phase.String.
func ParsePhase(s string) (Phase, error) {
	for i, n := range phaseNames {
		if i > 0 && n == s {
			return Phase(i), nil
		}
	}
	return 0, fmt.Errorf("unknown node phase %q", s)
}

// Active reports a node whose run is under way: Starting or Running.
func (p Phase) Active() bool { return p == Starting || p == Running }

// Failure reports a node that failed: Failed, Cancelled or TimedOut. These
// are the nodes a resume reruns.
func (p Phase) Failure() bool { return p == Failed || p == Cancelled || p == TimedOut }

// Ended reports a terminal phase.
func (p Phase) Ended() bool { return p == Succeeded || p == Skipped || p.Failure() }

// DagState is the phase as it travels in a DagRunEvent.
func (p Phase) DagState() sundialv1.DagState {
	switch p {
	case Starting, Running:
		return sundialv1.DagState_DAG_STATE_RUNNING
	case Succeeded:
		return sundialv1.DagState_DAG_STATE_SUCCEEDED
	case Failed:
		return sundialv1.DagState_DAG_STATE_FAILED
	case Cancelled:
		return sundialv1.DagState_DAG_STATE_CANCELLED
	case TimedOut:
		return sundialv1.DagState_DAG_STATE_TIMED_OUT
	case Skipped:
		return sundialv1.DagState_DAG_STATE_SKIPPED
	}
	return sundialv1.DagState_DAG_STATE_UNSPECIFIED
}

// Status is the state of a whole DAG run.
type Status uint8

// DAG run statuses.
const (
	// StatusRunning: some node is waiting, starting or running.
	StatusRunning Status = iota + 1
	// StatusSucceeded: every node succeeded.
	StatusSucceeded
	// StatusFailed: every node ended, and some failed.
	StatusFailed
	// StatusTimedOut: every node ended, and some timed out.
	StatusTimedOut
)

var statusNames = [...]string{"", "running", "succeeded", "failed", "timed_out"}

func (s Status) String() string {
	if int(s) < len(statusNames) && s > 0 {
		return statusNames[s]
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// ParseStatus is the inverse of Status.String.
func ParseStatus(s string) (Status, error) {
	for i, n := range statusNames {
		if i > 0 && n == s {
			return Status(i), nil
		}
	}
	return 0, fmt.Errorf("unknown DAG run status %q", s)
}

// DagState is the status as it travels in a DagRunEvent.
func (s Status) DagState() sundialv1.DagState {
	switch s {
	case StatusRunning:
		return sundialv1.DagState_DAG_STATE_RUNNING
	case StatusSucceeded:
		return sundialv1.DagState_DAG_STATE_SUCCEEDED
	case StatusFailed:
		return sundialv1.DagState_DAG_STATE_FAILED
	case StatusTimedOut:
		return sundialv1.DagState_DAG_STATE_TIMED_OUT
	}
	return sundialv1.DagState_DAG_STATE_UNSPECIFIED
}

// Node is the state of one node in a DAG run.
type Node struct {
	// ID is the node id.
	ID    string
	Phase Phase
	// Gen counts the node's starts: 0 before the first, 1 for the first
	// run, g for the run after g-1 resumes. It names the run (NodeRunID).
	Gen int
	// StartedAt is when the engine decided to start the current
	// generation: its run's due time.
	StartedAt time.Time
	// Deadline is StartedAt plus the node's timeout; zero for none.
	Deadline time.Time
	// EndedAt is when the node reached its terminal phase.
	EndedAt time.Time
	// Attempt is the latest attempt of the run seen in an event.
	Attempt int
	// RunState is the latest state of the run seen in an event that
	// counted.
	RunState sundialv1.RunState
	// Reason says why a node failed or was skipped: "run_dead",
	// "run_skipped", "run_cancelled", "job_not_found", "node_timeout",
	// "upstream_failed", "dag_stopped".
	Reason string
}

// State is the state of one DAG run.
type State struct {
	// DagRunID is dag id + "@" + Due in UTC unix milliseconds.
	DagRunID string
	DagID    string
	Due      time.Time
	Status   Status
	// Stuck is set when a node timed out, and cleared by a resume.
	Stuck bool
	// CreatedAt is when the DAG run was started; EndedAt when it ended
	// (zero while running).
	CreatedAt time.Time
	EndedAt   time.Time
	// Resumes counts resumes.
	Resumes int
	// Nodes holds each node's state, in the order of the graph's nodes.
	Nodes []Node
	// Seq is the sequence number of the last event emitted.
	Seq uint64
	// Outbox holds the events emitted and not yet acknowledged as
	// published, in Seq order.
	Outbox []Event
	// Definition is the encoded DagSpec the run follows since its last
	// resume adopted the DAG's current definition (package dagengine,
	// Runs.Resume); nil: the one it was created with (the stored row's).
	Definition []byte
}

// Event is a DagRunEvent the machine emitted.
type Event struct {
	// Seq numbers the events of one DAG run from 1.
	Seq uint64
	// Node is the node id, empty for an event about the DAG run.
	Node  string
	State sundialv1.DagState
	Time  time.Time
	// RunID is the node's run id; empty for DAG run events.
	RunID  string
	Reason string
}

// RunID returns the id of a DAG run: dag id + "@" + due in UTC unix
// milliseconds.
func RunID(dagID string, due time.Time) string {
	return dagID + "@" + strconv.FormatInt(due.UnixMilli(), 10)
}

// NodeRunID returns the run id of generation gen of a node:
// dagRunID + "/" + nodeID for the first, with "#" + gen appended from the
// second on.
func NodeRunID(dagRunID, nodeID string, gen int) string {
	id := dagRunID + "/" + nodeID
	if gen > 1 {
		id += "#" + strconv.Itoa(gen)
	}
	return id
}

// RunID returns the run id of the node's current generation in the DAG run
// dagRunID, or "" when it never started.
func (n Node) RunID(dagRunID string) string {
	if n.Gen == 0 {
		return ""
	}
	return NodeRunID(dagRunID, n.ID, n.Gen)
}

// Active reports whether the DAG run is still running.
func (s *State) Active() bool { return s.Status == StatusRunning }

// Resumable reports whether a Resume would rerun a node: one failed, was
// cancelled or timed out.
func (s *State) Resumable() bool { return len(s.Failed()) > 0 }

// Failed returns the positions of the nodes that failed, were cancelled or
// timed out: those a Resume reruns.
func (s *State) Failed() []int {
	var out []int
	for i, n := range s.Nodes {
		if n.Phase.Failure() {
			out = append(out, i)
		}
	}
	return out
}

// Pending reports whether the state holds work not yet acknowledged: nodes
// Starting or events in the outbox.
func (s *State) Pending() bool {
	if len(s.Outbox) > 0 {
		return true
	}
	for _, n := range s.Nodes {
		if n.Phase == Starting {
			return true
		}
	}
	return false
}

// NextDeadline returns the earliest deadline of a node under way, or zero.
func (s *State) NextDeadline() time.Time {
	var next time.Time
	for _, n := range s.Nodes {
		if n.Phase.Active() && !n.Deadline.IsZero() && (next.IsZero() || n.Deadline.Before(next)) {
			next = n.Deadline
		}
	}
	return next
}

// Counts returns how many nodes are in each phase.
func (s *State) Counts() map[Phase]int {
	c := map[Phase]int{}
	for _, n := range s.Nodes {
		c[n.Phase]++
	}
	return c
}

// Clone returns a deep copy.
func (s State) Clone() State {
	s.Nodes = append([]Node(nil), s.Nodes...)
	s.Outbox = append([]Event(nil), s.Outbox...)
	return s
}
