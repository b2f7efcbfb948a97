package dagrun

import (
	"encoding/json"
	"fmt"
	"time"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// codecVersion is the version of the stored form; Unmarshal refuses others.
const codecVersion = 1

// The stored form: JSON with short names and times as UTC unix
// milliseconds (0 for none), so that a 10,000-node state stays compact and
// an operator can still read it.
type wireState struct {
	V        int        `json:"v"`
	DagRunID string     `json:"run"`
	DagID    string     `json:"dag"`
	Due      int64      `json:"due"`
	Status   string     `json:"status"`
	Stuck    bool       `json:"stuck,omitempty"`
	Created  int64      `json:"created"`
	Ended    int64      `json:"ended,omitempty"`
	Resumes  int        `json:"resumes,omitempty"`
	Seq      uint64     `json:"seq"`
	Nodes    []wireNode `json:"nodes"`
	Outbox   []wireEvt  `json:"outbox,omitempty"`
	// Def is State.Definition (base64 in JSON).
	Def []byte `json:"def,omitempty"`
}

type wireNode struct {
	ID       string `json:"id"`
	Phase    string `json:"p"`
	Gen      int    `json:"g,omitempty"`
	Started  int64  `json:"s,omitempty"`
	Deadline int64  `json:"d,omitempty"`
	Ended    int64  `json:"e,omitempty"`
	Attempt  int    `json:"a,omitempty"`
	RunState int32  `json:"rs,omitempty"`
	Reason   string `json:"r,omitempty"`
}

type wireEvt struct {
	Seq    uint64 `json:"seq"`
	Node   string `json:"node,omitempty"`
	State  int32  `json:"state"`
	Time   int64  `json:"t"`
	RunID  string `json:"run,omitempty"`
	Reason string `json:"r,omitempty"`
}

func toMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Marshal returns the stored form of s. Times keep millisecond precision.
func Marshal(s State) ([]byte, error) {
	w := wireState{
		V: codecVersion, DagRunID: s.DagRunID, DagID: s.DagID, Due: toMs(s.Due), Status: s.Status.String(),
		Stuck: s.Stuck, Created: toMs(s.CreatedAt), Ended: toMs(s.EndedAt), Resumes: s.Resumes, Seq: s.Seq,
		Nodes: make([]wireNode, len(s.Nodes)), Def: s.Definition,
	}
	for i, n := range s.Nodes {
		w.Nodes[i] = wireNode{
			ID: n.ID, Phase: n.Phase.String(), Gen: n.Gen, Started: toMs(n.StartedAt), Deadline: toMs(n.Deadline),
			Ended: toMs(n.EndedAt), Attempt: n.Attempt, RunState: int32(n.RunState), Reason: n.Reason,
		}
	}
	for _, e := range s.Outbox {
		w.Outbox = append(w.Outbox, wireEvt{Seq: e.Seq, Node: e.Node, State: int32(e.State), Time: toMs(e.Time), RunID: e.RunID, Reason: e.Reason})
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encode state of dag run %s: %w", s.DagRunID, err)
	}
	return b, nil
}

// Unmarshal reads the stored form of a state.
func Unmarshal(b []byte) (State, error) {
	var w wireState
	if err := json.Unmarshal(b, &w); err != nil {
		return State{}, fmt.Errorf("decode dag run state: %w", err)
	}
	if w.V != codecVersion {
		return State{}, fmt.Errorf("decode dag run state %s: version %d, this build reads %d", w.DagRunID, w.V, codecVersion)
	}
	status, err := ParseStatus(w.Status)
	if err != nil {
		return State{}, fmt.Errorf("decode dag run state %s: %w", w.DagRunID, err)
	}
	s := State{
		DagRunID: w.DagRunID, DagID: w.DagID, Due: fromMs(w.Due), Status: status, Stuck: w.Stuck,
		CreatedAt: fromMs(w.Created), EndedAt: fromMs(w.Ended), Resumes: w.Resumes, Seq: w.Seq,
		Nodes: make([]Node, len(w.Nodes)), Definition: w.Def,
	}
	for i, n := range w.Nodes {
		p, err := ParsePhase(n.Phase)
		if err != nil {
			return State{}, fmt.Errorf("decode dag run state %s node %q: %w", w.DagRunID, n.ID, err)
		}
		s.Nodes[i] = Node{
			ID: n.ID, Phase: p, Gen: n.Gen, StartedAt: fromMs(n.Started), Deadline: fromMs(n.Deadline),
			EndedAt: fromMs(n.Ended), Attempt: n.Attempt, RunState: sundialv1.RunState(n.RunState), Reason: n.Reason,
		}
	}
	for _, e := range w.Outbox {
		s.Outbox = append(s.Outbox, Event{Seq: e.Seq, Node: e.Node, State: sundialv1.DagState(e.State), Time: fromMs(e.Time), RunID: e.RunID, Reason: e.Reason})
	}
	return s, nil
}
