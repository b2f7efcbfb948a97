package dag_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/dagengine/dag"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// node builds a node running a registered job named after it.
func node(id string, parents ...string) *sundialv1.DagNode {
	return &sundialv1.DagNode{Id: id, Job: &sundialv1.DagNode_JobId{JobId: "job." + id}, Parents: parents}
}

func spec(nodes ...*sundialv1.DagNode) *sundialv1.DagSpec {
	return &sundialv1.DagSpec{Id: "data.etl", OwnerTeam: "data", Nodes: nodes}
}

func fields(errs []dag.FieldError) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Field + ": " + e.Reason
	}
	return out
}

func TestCompileRejects(t *testing.T) {
	t.Parallel()
	inlineHTTP := func(mut func(*sundialv1.JobSpec)) *sundialv1.DagNode {
		js := &sundialv1.JobSpec{Target: &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{Url: "https://example.com/x"}}}}
		if mut != nil {
			mut(js)
		}
		return &sundialv1.DagNode{Id: "in", Job: &sundialv1.DagNode_Inline{Inline: js}}
	}
	tests := []struct {
		name string
		spec *sundialv1.DagSpec
		want []string // each a substring of one error, in order
	}{
		{"nil", nil, []string{"record: no DAG definition"}},
		{"no nodes", spec(), []string{"nodes: required"}},
		{"three-cycle", spec(node("a", "c"), node("b", "a"), node("c", "b")),
			[]string{"nodes: cycle a -> b -> c -> a"}},
		{"two cycles and a root", spec(node("r"), node("x", "y", "r"), node("y", "x"), node("p", "q"), node("q", "p")),
			[]string{"nodes: cycle x -> y -> x", "nodes: cycle p -> q -> p"}},
		{"shortest cycle through the first node", spec(node("a", "d", "b"), node("b", "a"), node("c", "b"), node("d", "c")),
			[]string{"nodes: cycle a -> b -> a"}},
		{"self-edge", spec(node("a"), node("b", "a", "b")),
			[]string{`nodes[1].parents[1]: self-edge: node "b" lists itself as a parent`}},
		{"unknown parent", spec(node("a"), node("b", "zz")),
			[]string{`nodes[1].parents[0]: unknown node "zz"`}},
		{"parent twice", spec(node("a"), node("b", "a", "a")),
			[]string{`nodes[1].parents[1]: parent "a" is listed twice (also parents[0])`}},
		{"duplicate node id", spec(node("a"), node("b"), node("a")),
			[]string{`nodes[2].id: duplicate node id "a": nodes[0] has it already`}},
		{"bad node id", spec(node("a b"), node(strings.Repeat("n", 101)), &sundialv1.DagNode{Job: &sundialv1.DagNode_JobId{JobId: "j"}}),
			[]string{`nodes[0].id: "a b" has characters`, "nodes[1].id: 101 characters", "nodes[2].id: required"}},
		{"no job", spec(&sundialv1.DagNode{Id: "a"}), []string{"nodes[0].job: required"}},
		{"bad job id", spec(&sundialv1.DagNode{Id: "a", Job: &sundialv1.DagNode_JobId{JobId: "x@1"}}), []string{`nodes[0].job_id: must not contain "@"`}},
		{"job id of an inline node", spec(&sundialv1.DagNode{Id: "a", Job: &sundialv1.DagNode_JobId{JobId: "team-b.dagx/n"}}),
			[]string{`nodes[0].job_id: "team-b.dagx/n": a registered job's id has no "/"`}},
		{"dag id with a slash", &sundialv1.DagSpec{Id: "data.etl/x", OwnerTeam: "data", Nodes: []*sundialv1.DagNode{node("a")}},
			[]string{`id: "data.etl/x": must not contain "/", reserved for the jobs of DAG inline nodes`}},
		{"timeout", spec(&sundialv1.DagNode{Id: "a", Job: &sundialv1.DagNode_JobId{JobId: "j"}, Timeout: durationpb.New(-time.Second)}),
			[]string{"nodes[0].timeout: must be positive"}},
		{"inline with schedule and bad id", spec(inlineHTTP(func(js *sundialv1.JobSpec) {
			js.Id = "other"
			js.Schedule = &sundialv1.Schedule{Kind: &sundialv1.Schedule_Immediate{Immediate: &sundialv1.Immediate{}}, TimeZone: "UTC"}
		})), []string{`nodes[0].inline.id: "other": leave it empty or set it to "data.etl/in"`, "nodes[0].inline.schedule: must be unset"}},
		{"inline job rules", spec(inlineHTTP(func(js *sundialv1.JobSpec) { js.Target = nil })), []string{"nodes[0].inline.target"}},
		{"dag fields", &sundialv1.DagSpec{Id: "a@b", Nodes: []*sundialv1.DagNode{node("a")}, FailurePolicy: 9,
			Schedule: &sundialv1.Schedule{Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "nope"}}, TimeZone: "UTC"}},
			[]string{"id: must not contain", "owner_team: required", "schedule.", "failure_policy: unknown policy 9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, errs := dag.Compile(tt.spec, dag.Options{})
			assert.Nil(t, g)
			got := fields(errs)
			require.GreaterOrEqual(t, len(got), len(tt.want), "errors: %q", got)
			i := 0
			for _, w := range tt.want {
				for i < len(got) && !strings.Contains(got[i], w) {
					i++
				}
				require.Less(t, i, len(got), "want an error containing %q, in order, among %q", w, got)
				i++
			}
		})
	}
}

func TestCompileGraph(t *testing.T) {
	t.Parallel()
	// A diamond: a -> (b, c) -> d, and an independent e.
	g, errs := dag.Compile(spec(node("a"), node("b", "a"), node("c", "a"), node("d", "c", "b"), node("e")), dag.Options{})
	require.Empty(t, errs)
	assert.Equal(t, "data.etl", g.ID())
	assert.Equal(t, dag.Stop, g.Policy(), "unspecified means stop")
	require.Equal(t, 5, g.Len())
	d, ok := g.Index("d")
	require.True(t, ok)
	assert.Equal(t, []int{2, 1}, g.Parents(d), "in the order listed")
	assert.Equal(t, []int{1, 2}, g.Children(0))
	assert.Equal(t, []int{1, 2, 3}, g.Descendants(0))
	assert.Empty(t, g.Descendants(4))
	assert.Equal(t, "job.d", g.Node(d).JobID)
}

func TestCompileFillsInlineJob(t *testing.T) {
	t.Parallel()
	s := spec(&sundialv1.DagNode{Id: "load", Timeout: durationpb.New(90 * time.Second), Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}},
	}}})
	s.FailurePolicy = sundialv1.DagFailurePolicy_DAG_FAILURE_POLICY_CONTINUE_INDEPENDENT
	before := proto.Clone(s)
	g, errs := dag.Compile(s, dag.Options{})
	require.Empty(t, errs, fields(errs))
	assert.True(t, proto.Equal(before, s), "the caller's spec is not modified")
	n := g.Node(0)
	assert.Equal(t, "data.etl/load", n.JobID)
	assert.Equal(t, "data.etl/load", n.Inline.GetId())
	assert.Equal(t, "data", n.Inline.GetOwnerTeam())
	assert.Equal(t, 90*time.Second, n.Timeout)
	assert.Equal(t, dag.ContinueIndependent, g.Policy())

	// The stored form compiles to the same graph.
	b, err := dag.Marshal(g.Spec())
	require.NoError(t, err)
	again, err := dag.Unmarshal(b, dag.Options{})
	require.NoError(t, err)
	assert.Equal(t, "data.etl/load", again.Node(0).Inline.GetId())
}

func TestCompileLongChainAndWideFanOut(t *testing.T) {
	t.Parallel()
	// A 10,000-node chain closed into a cycle: the cycle search must not
	// recurse once per node, and the path names every node.
	const n = 10_000
	nodes := make([]*sundialv1.DagNode, n)
	for i := range n {
		nodes[i] = node(fmt.Sprintf("n%d", i), fmt.Sprintf("n%d", (i+n-1)%n))
	}
	_, errs := dag.Compile(spec(nodes...), dag.Options{})
	require.Len(t, errs, 1)
	assert.True(t, strings.HasPrefix(errs[0].Reason, "cycle n0 -> n1 -> n2 -> "), errs[0].Reason[:40])
	assert.Contains(t, errs[0].Reason, "n9999 -> n0 (")

	_, errs = dag.Compile(spec(append(nodes, node("one-too-many"))...), dag.Options{})
	require.Len(t, errs, 1)
	assert.Equal(t, "nodes: 10001 nodes, at most 10000 allowed", errs[0].Error())
}

func TestDecode(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile("../../proto/sundial/v1/testdata/dagspec/nightly-etl.json")
	require.NoError(t, err)
	tests := []struct {
		name        string
		key         []byte
		value       []byte
		contentType string
		want        []string
		tombstone   bool
	}{
		{name: "example", key: []byte("data.daily-etl"), value: example, contentType: "application/json"},
		{name: "tombstone", key: []byte("data.daily-etl"), tombstone: true},
		{name: "tombstone without key", tombstone: true, want: []string{"key: missing"}},
		{name: "key differs", key: []byte("other"), value: example, contentType: "application/json",
			want: []string{`id: "data.daily-etl" differs from the record key "other"`}},
		{name: "json without header", key: []byte("data.daily-etl"), value: example,
			want: []string{"record: decode DagSpec as protobuf (the value looks like JSON"}},
		{name: "bad content type", key: []byte("k"), value: []byte("x"), contentType: "text/plain", want: []string{"content_type: unsupported content type"}},
		{name: "empty value", key: []byte("k"), value: []byte{}, want: []string{"record: empty value"}},
		{name: "unknown json field", key: []byte("k"), value: []byte(`{"id":"k","nodez":[]}`), contentType: "application/json", want: []string{"record: decode DagSpec as JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			value := tt.value
			if tt.tombstone {
				value = nil
			}
			d, errs := dag.Decode(tt.key, value, tt.contentType, dag.Options{})
			assert.Equal(t, tt.tombstone, d.Tombstone)
			got := fields(errs)
			require.Len(t, got, len(tt.want), "errors: %q", got)
			for i, w := range tt.want {
				assert.Contains(t, got[i], w)
			}
			if len(tt.want) == 0 && !tt.tombstone {
				require.NotNil(t, d.Graph)
				assert.Equal(t, 4, d.Graph.Len())
				assert.Equal(t, sundialv1.EncodingJSON, d.Encoding)
			}
		})
	}
}

// FuzzDecode feeds arbitrary records to the decoder and validator: it must
// never panic, a valid result must be a consistent acyclic graph, and every
// rejection must name a field and a reason.
func FuzzDecode(f *testing.F) {
	example, err := os.ReadFile("../../proto/sundial/v1/testdata/dagspec/nightly-etl.json")
	require.NoError(f, err)
	f.Add([]byte("data.daily-etl"), example, "application/json")
	f.Add([]byte("etl"), []byte(`{"id":"etl","ownerTeam":"d","nodes":[{"id":"a","jobId":"j","parents":["b"]},{"id":"b","jobId":"j","parents":["a"]}]}`), "application/json")
	f.Add([]byte("etl"), []byte(`{"id":"etl","ownerTeam":"d","nodes":[{"id":"a","jobId":"j","parents":["a","zz"]}],"failurePolicy":7}`), "application/json")
	bin, err := dag.Marshal(spec(node("a"), node("b", "a"), node("c", "a"), node("d", "b", "c")))
	require.NoError(f, err)
	f.Add([]byte("etl"), bin, "")
	f.Add([]byte{0xff}, []byte{0x0a, 0x01}, "application/x-protobuf")
	f.Fuzz(func(t *testing.T, key, value []byte, contentType string) {
		d, errs := dag.Decode(key, value, contentType, dag.Options{MaxNodes: 200})
		for _, e := range errs {
			if e.Field == "" || e.Reason == "" {
				t.Fatalf("error without field or reason: %+v", e)
			}
		}
		if d.Graph == nil {
			return
		}
		if len(errs) > 0 {
			t.Fatalf("a graph despite errors %v", errs)
		}
		g := d.Graph
		// Kahn's algorithm must consume every node: the graph is acyclic.
		indeg := make([]int, g.Len())
		for i := range g.Len() {
			indeg[i] = len(g.Parents(i))
		}
		var ready []int
		for i, n := range indeg {
			if n == 0 {
				ready = append(ready, i)
			}
		}
		done := 0
		for len(ready) > 0 {
			i := ready[0]
			ready = ready[1:]
			done++
			for _, c := range g.Children(i) {
				if indeg[c]--; indeg[c] == 0 {
					ready = append(ready, c)
				}
			}
		}
		if done != g.Len() {
			t.Fatalf("accepted a cyclic graph: %d of %d nodes ordered", done, g.Len())
		}
		for i := range g.Len() {
			if got, ok := g.Index(g.Node(i).ID); !ok || got != i || g.Node(i).JobID == "" {
				t.Fatalf("node %d (%q) inconsistent", i, g.Node(i).ID)
			}
		}
	})
}

// TestInlineJobBelongsToTheDagsTeam: an inline job's owner_team is empty
// (filled with the DAG's) or the DAG's; naming another team is refused, so a
// DAG cannot charge its node runs (quota, dead letters) to another team.
func TestInlineJobBelongsToTheDagsTeam(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		dagTeam   string
		jobTeam   string
		wantTeam  string   // the inline job's owner when valid
		wantError []string // "field: reason" substrings, in order
	}{
		{"empty is the DAG's", "data", "", "data", nil},
		{"the DAG's", "data", "data", "data", nil},
		{"another team", "data", "payments", "", []string{
			`nodes[0].inline.owner_team: "payments": leave it empty or set it to "data", the DAG's owner_team`}},
		{"another team, case differs", "data", "Data", "", []string{`nodes[0].inline.owner_team: "Data"`}},
		{"DAG without owner: reported once, for the DAG", "", "payments", "", []string{"owner_team: required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &sundialv1.DagSpec{Id: "data.etl", OwnerTeam: tt.dagTeam, Nodes: []*sundialv1.DagNode{{Id: "in", Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
				OwnerTeam: tt.jobTeam,
				Target:    &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}},
			}}}}}
			g, errs := dag.Compile(s, dag.Options{})
			got := fields(errs)
			if tt.wantError == nil {
				require.Empty(t, got)
				assert.Equal(t, tt.wantTeam, g.Node(0).Inline.GetOwnerTeam())
				return
			}
			assert.Nil(t, g)
			require.Len(t, got, len(tt.wantError), "errors: %q", got)
			for i, w := range tt.wantError {
				assert.Contains(t, got[i], w)
			}
		})
	}
}

func TestMayRunJob(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		job, dag string
		want     bool
	}{
		{"data", "data", true},
		{"payments", "data", false},
		{"", "data", false},
		{"Data", "data", false},
		{"", "", false},
	} {
		assert.Equal(t, tt.want, dag.MayRunJob(tt.job, tt.dag), "job team %q, DAG team %q", tt.job, tt.dag)
	}
	assert.Equal(t, `job "b.secret" not found in team a`, dag.JobNotFound("b.secret", "a"))
}
