package dag

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// FieldError is one bad value of a definition; see jobspec.FieldError.
type FieldError = jobspec.FieldError

// Policy is what a DAG run does when a node fails.
type Policy int

// Failure policies (sundialv1.DagFailurePolicy).
const (
	// Stop starts no further node after a failure: nodes already running
	// finish, the nodes not started are skipped, and the DAG run fails.
	Stop Policy = iota + 1
	// ContinueIndependent skips only the nodes that depend, directly or
	// not, on the failed node, and keeps running the others.
	ContinueIndependent
)

func (p Policy) String() string {
	switch p {
	case Stop:
		return "stop"
	case ContinueIndependent:
		return "continue_independent"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Node is one node of a Graph.
type Node struct {
	// ID is the node id, unique in the DAG.
	ID string
	// JobID is the job the node runs: a registered job's id, or for an
	// inline job dag id + "/" + node id.
	JobID string
	// Inline is the inline job with its id and owner_team filled in; nil
	// for a registered job. Never modify it.
	Inline *sundialv1.JobSpec
	// Timeout bounds the node from its start to its run's end, across
	// retries; 0 means no bound.
	Timeout time.Duration
}

// Graph is a valid DAG. It is immutable and safe for concurrent use.
type Graph struct {
	id        string
	ownerTeam string
	policy    Policy
	nodes     []Node
	index     map[string]int
	parents   [][]int
	children  [][]int
	spec      *sundialv1.DagSpec
}

// ID returns the DAG id.
func (g *Graph) ID() string { return g.id }

// OwnerTeam returns the team that owns the DAG.
func (g *Graph) OwnerTeam() string { return g.ownerTeam }

// Policy returns the failure policy, never unspecified.
func (g *Graph) Policy() Policy { return g.policy }

// Len returns the number of nodes.
func (g *Graph) Len() int { return len(g.nodes) }

// Node returns node i, in definition order.
func (g *Graph) Node(i int) Node { return g.nodes[i] }

// Index returns the position of the node with the given id.
func (g *Graph) Index(id string) (int, bool) {
	i, ok := g.index[id]
	return i, ok
}

// Parents returns the positions of node i's parents, in the order listed.
// The slice is shared: do not modify it.
func (g *Graph) Parents(i int) []int { return g.parents[i] }

// Children returns the positions of the nodes that list node i as a parent,
// in definition order. The slice is shared: do not modify it.
func (g *Graph) Children(i int) []int { return g.children[i] }

// Spec returns the definition the graph was compiled from. Never modify it.
func (g *Graph) Spec() *sundialv1.DagSpec { return g.spec }

// Descendants returns the positions of every node that depends on node i,
// directly or not, in definition order.
func (g *Graph) Descendants(i int) []int {
	seen := make([]bool, len(g.nodes))
	stack := append([]int(nil), g.children[i]...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		stack = append(stack, g.children[n]...)
	}
	var out []int
	for n, s := range seen {
		if s {
			out = append(out, n)
		}
	}
	return out
}

// InlineJobID returns the id of the inline job of a node.
func InlineJobID(dagID, nodeID string) string { return dagID + "/" + nodeID }

// Marshal returns the definition's deterministic binary encoding, the form
// stored with the DAG and snapshotted into each DAG run.
func Marshal(spec *sundialv1.DagSpec) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode DAG %q: %w", spec.GetId(), err)
	}
	return b, nil
}

// Unmarshal compiles a stored definition (see Marshal). A stored definition
// was valid when it was stored; it is checked again all the same, so a rule
// added since then is reported rather than ignored.
func Unmarshal(b []byte, opts Options) (*Graph, error) {
	spec := &sundialv1.DagSpec{}
	if err := proto.Unmarshal(b, spec); err != nil {
		return nil, fmt.Errorf("decode stored DAG: %w", err)
	}
	g, errs := Compile(spec, opts)
	if len(errs) > 0 {
		return nil, &ValidationError{DagID: spec.GetId(), Errors: errs}
	}
	return g, nil
}

// ValidationError is a definition with at least one bad value.
type ValidationError struct {
	DagID  string
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	s := fmt.Sprintf("DAG %q is invalid:", e.DagID)
	for _, fe := range e.Errors {
		s += "\n  " + fe.Error()
	}
	return s
}
