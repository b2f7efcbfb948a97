package dag

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Bounds of a DAG definition.
const (
	// DefaultMaxNodes is the default bound of the number of nodes. The
	// state of a DAG run is one row holding every node, so the bound keeps
	// that row well under a Cassandra cell's practical size.
	DefaultMaxNodes = 10_000
	// MaxNodeIDLength is the longest node id.
	MaxNodeIDLength = 100
	// MaxNodeTimeout bounds DagNode.timeout.
	MaxNodeTimeout = 7 * 24 * time.Hour
)

// Options bound a definition. The zero value means the defaults.
type Options struct {
	// Limits bounds the fields a DAG shares with job definitions and the
	// inline jobs; the zero value means registry's defaults.
	Limits jobspec.Limits
	// MaxNodes bounds the number of nodes; default DefaultMaxNodes.
	MaxNodes int
}

var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// Validate returns every problem of a definition; nil means valid.
func Validate(spec *sundialv1.DagSpec, opts Options) []FieldError {
	_, errs := Compile(spec, opts)
	return errs
}

// Compile validates a definition and returns its graph, or every problem
// found (see the package doc), in the order of the definition's fields.
// The spec is not modified; the graph keeps a copy.
func Compile(spec *sundialv1.DagSpec, opts Options) (*Graph, []FieldError) {
	opts.MaxNodes = cmp.Or(opts.MaxNodes, DefaultMaxNodes)
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if spec == nil {
		add("record", "no DAG definition")
		return nil, errs
	}
	spec = proto.Clone(spec).(*sundialv1.DagSpec)
	if r := jobspec.CheckEncodedSize(spec); r != "" {
		add("record", "%s", r)
	}

	// The fields a DAG shares with a job are checked by the job rules.
	shared := opts.Limits.ValidateSpec(&sundialv1.JobSpec{
		Id:          spec.GetId(),
		OwnerTeam:   spec.GetOwnerTeam(),
		Labels:      spec.GetLabels(),
		Description: spec.GetDescription(),
		Schedule:    spec.GetSchedule(),
	})
	idOK := true
	if strings.Contains(spec.GetId(), "/") {
		idOK = false
		add("id", "%q: must not contain %q, reserved for the jobs of DAG inline nodes (<dag id>/<node id>)", spec.GetId(), "/")
	}
	for _, fe := range shared {
		top := fe.Field
		if i := strings.IndexAny(top, ".["); i >= 0 {
			top = top[:i]
		}
		switch top {
		case "id":
			idOK = false
			errs = append(errs, fe)
		case "owner_team", "labels", "description", "schedule":
			errs = append(errs, fe)
		}
	}

	nodes := spec.GetNodes()
	switch {
	case len(nodes) == 0:
		add("nodes", "required: at least one node")
	case len(nodes) > opts.MaxNodes:
		add("nodes", "%d nodes, at most %d allowed", len(nodes), opts.MaxNodes)
		return nil, errs // do not spend time on a definition this large
	}

	g := &Graph{
		id:        spec.GetId(),
		ownerTeam: spec.GetOwnerTeam(),
		nodes:     make([]Node, len(nodes)),
		index:     make(map[string]int, len(nodes)),
		parents:   make([][]int, len(nodes)),
		children:  make([][]int, len(nodes)),
		spec:      spec,
	}
	for i, n := range nodes {
		field := fmt.Sprintf("nodes[%d]", i)
		id := n.GetId()
		switch {
		case id == "":
			add(field+".id", "required: the node id, unique in the DAG")
		case len(id) > MaxNodeIDLength:
			add(field+".id", "%d characters, at most %d allowed", len(id), MaxNodeIDLength)
		case !nodeIDPattern.MatchString(id):
			add(field+".id", "%q has characters outside [A-Za-z0-9._-]", id)
		default:
			if first, dup := g.index[id]; dup {
				add(field+".id", "duplicate node id %q: nodes[%d] has it already", id, first)
			} else {
				g.index[id] = i
			}
		}
		g.nodes[i] = Node{ID: id}
		switch job := n.GetJob().(type) {
		case *sundialv1.DagNode_JobId:
			switch r := jobspec.CheckID(job.JobId); {
			case r != "":
				add(field+".job_id", "%s", r)
			case strings.Contains(job.JobId, "/"):
				add(field+".job_id", "%q: a registered job's id has no %q; <dag id>/<node id> is the job of a DAG inline node, which no other node can run", job.JobId, "/")
			}
			g.nodes[i].JobID = job.JobId
		case *sundialv1.DagNode_Inline:
			g.nodes[i].Inline, g.nodes[i].JobID = inline(&errs, opts, field, spec, id, idOK, job.Inline)
			if g.nodes[i].Inline != nil {
				n.Job = &sundialv1.DagNode_Inline{Inline: g.nodes[i].Inline}
			}
		default:
			add(field+".job", "required: set job_id (a registered job) or inline (a job defined here)")
		}
		if d := n.GetTimeout(); d != nil {
			got, reason := checkDuration(d, MaxNodeTimeout)
			if reason != "" {
				add(field+".timeout", "%s", reason)
			}
			g.nodes[i].Timeout = got
		}
	}

	// Edges, once every node id is known.
	for i, n := range nodes {
		listed := map[string]int{}
		for j, p := range n.GetParents() {
			field := fmt.Sprintf("nodes[%d].parents[%d]", i, j)
			pi, known := g.index[p]
			switch {
			case p == n.GetId() && p != "":
				add(field, "self-edge: node %q lists itself as a parent", p)
			case !known:
				add(field, "unknown node %q", p)
			default:
				if k, dup := listed[p]; dup {
					add(field, "parent %q is listed twice (also parents[%d])", p, k)
					continue
				}
				listed[p] = j
				if g.index[n.GetId()] != i {
					continue // a duplicate node id: its edges mean nothing
				}
				g.parents[i] = append(g.parents[i], pi)
			}
		}
	}
	for i := range g.nodes {
		for _, p := range g.parents[i] {
			g.children[p] = append(g.children[p], i)
		}
	}
	for _, c := range cycles(g) {
		names := make([]string, len(c))
		for k, n := range c {
			names[k] = g.nodes[n].ID
		}
		add("nodes", "cycle %s (each node is a parent of the next): a DAG must be acyclic", strings.Join(names, " -> "))
	}

	switch p := spec.GetFailurePolicy(); p {
	case sundialv1.DagFailurePolicy_DAG_FAILURE_POLICY_UNSPECIFIED, sundialv1.DagFailurePolicy_DAG_FAILURE_POLICY_STOP:
		g.policy = Stop
	case sundialv1.DagFailurePolicy_DAG_FAILURE_POLICY_CONTINUE_INDEPENDENT:
		g.policy = ContinueIndependent
	default:
		add("failure_policy", "unknown policy %d: want DAG_FAILURE_POLICY_STOP or DAG_FAILURE_POLICY_CONTINUE_INDEPENDENT", int32(p))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return g, nil
}

// inline checks an inline job and returns it with its id and owner filled
// in, or nil when it cannot be used.
func inline(errs *[]FieldError, opts Options, field string, spec *sundialv1.DagSpec, nodeID string, dagIDOK bool, job *sundialv1.JobSpec) (*sundialv1.JobSpec, string) {
	field += ".inline"
	if job == nil {
		*errs = append(*errs, FieldError{Field: field, Reason: "required: the job to run"})
		return nil, ""
	}
	job = proto.Clone(job).(*sundialv1.JobSpec)
	want := InlineJobID(spec.GetId(), nodeID)
	switch job.GetId() {
	case "", want:
		job.Id = want
	default:
		*errs = append(*errs, FieldError{Field: field + ".id", Reason: fmt.Sprintf("%q: leave it empty or set it to %q (dag id/node id)", job.GetId(), want)})
	}
	switch job.GetOwnerTeam() {
	case "", spec.GetOwnerTeam():
		job.OwnerTeam = spec.GetOwnerTeam()
	default:
		if spec.GetOwnerTeam() != "" { // else reported for the DAG
			*errs = append(*errs, FieldError{Field: field + ".owner_team", Reason: fmt.Sprintf(
				"%q: leave it empty or set it to %q, the DAG's owner_team: a DAG's node runs belong to the DAG's team", job.GetOwnerTeam(), spec.GetOwnerTeam())})
		}
		job.OwnerTeam = spec.GetOwnerTeam()
	}
	if job.GetSchedule() != nil {
		*errs = append(*errs, FieldError{Field: field + ".schedule", Reason: "must be unset: the DAG decides when its nodes run"})
		job.Schedule = nil
	}
	for _, fe := range opts.Limits.ValidateInline(job) {
		if fe.Field == "owner_team" {
			continue // the DAG's: reported once, for the DAG
		}
		if fe.Field == "id" && (!dagIDOK || nodeID == "") {
			continue // reported for the DAG or the node
		}
		*errs = append(*errs, FieldError{Field: field + "." + fe.Field, Reason: fe.Reason})
	}
	return job, job.GetId()
}

// checkDuration reads a positive duration of whole milliseconds.
func checkDuration(d interface {
	CheckValid() error
	AsDuration() time.Duration
	GetSeconds() int64
}, maxD time.Duration) (time.Duration, string) {
	if err := d.CheckValid(); err != nil {
		return 0, fmt.Sprintf("invalid duration: %v", err)
	}
	if d.GetSeconds() > int64(maxD/time.Second)+1 {
		return 0, fmt.Sprintf("%ds, at most %s allowed", d.GetSeconds(), maxD)
	}
	got := d.AsDuration()
	switch {
	case got <= 0:
		return 0, fmt.Sprintf("must be positive, got %s", got)
	case got%time.Millisecond != 0:
		return 0, fmt.Sprintf("%s: must be whole milliseconds", got)
	case got > maxD:
		return 0, fmt.Sprintf("%s: at most %s allowed", got, maxD)
	}
	return got, ""
}

// cycles returns one cycle per strongly connected component of more than
// one node: the shortest path from the component's first node (in
// definition order) back to itself along parent -> child edges. Self-edges
// are not edges of the graph; they are reported on their own.
func cycles(g *Graph) [][]int {
	comp := scc(g)
	first := map[int]int{} // component -> its first node
	size := map[int]int{}
	for n, c := range comp {
		if _, ok := first[c]; !ok {
			first[c] = n
		}
		size[c]++
	}
	var out [][]int
	for n := range g.nodes {
		c := comp[n]
		if first[c] != n || size[c] < 2 {
			continue
		}
		// Breadth-first from n, inside the component, back to n.
		prev := map[int]int{}
		queue := []int{n}
		found := -1
		for len(queue) > 0 && found < 0 {
			cur := queue[0]
			queue = queue[1:]
			for _, ch := range g.children[cur] {
				if comp[ch] != c {
					continue
				}
				if ch == n {
					found = cur
					break
				}
				if _, seen := prev[ch]; !seen {
					prev[ch] = cur
					queue = append(queue, ch)
				}
			}
		}
		path := []int{n}
		for cur := found; cur != n; cur = prev[cur] {
			path = append(path, cur)
		}
		path = append(path, n)
		// path is n, last, ..., second, n: reverse the middle.
		for i, j := 1, len(path)-2; i < j; i, j = i+1, j-1 {
			path[i], path[j] = path[j], path[i]
		}
		out = append(out, path)
	}
	return out
}

// scc labels each node with its strongly connected component (Tarjan's
// algorithm, iterative so that a long chain cannot exhaust the stack).
func scc(g *Graph) []int {
	n := len(g.nodes)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	comp := make([]int, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	next, comps := 0, 0
	type frame struct{ node, edge int }
	for root := range n {
		if index[root] >= 0 {
			continue
		}
		call := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.node
			if f.edge < len(g.children[v]) {
				w := g.children[v][f.edge]
				f.edge++
				switch {
				case index[w] < 0:
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, 0})
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			if low[v] == index[v] {
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp[w] = comps
					if w == v {
						break
					}
				}
				comps++
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				u := call[len(call)-1].node
				low[u] = min(low[u], low[v])
			}
		}
	}
	return comp
}
