package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/jobspec"
	"github.com/sundialhq/sundial/operator"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Limits of PlanDag.
const (
	// planDagRuns is how many of a DAG's newest runs a plan looks at.
	planDagRuns = 20
)

// Kinds of DagNodeChange.change and DagEdgeChange.change.
const (
	changeAdded   = "added"
	changeRemoved = "removed"
	changeChanged = "changed"
)

// dagProblems are the reasons ApplyDag refuses spec, each naming its
// field, in the order it checks them: a value shown redacted that has no
// stored value to keep (before is the definition in force, nil for none),
// then the engine's rules (dag.Compile: ids, cycles, unknown parents,
// owner teams), then the jobs its nodes name. It returns the compiled
// graph when there is none. KeepRedactedDag fills spec's redacted values
// in place, as an apply does.
func (s *DagService) dagProblems(ctx context.Context, spec, before *sundialv1.DagSpec) (*dag.Graph, []dag.FieldError, error) {
	if errs := jobspec.KeepRedactedDag(spec, before); len(errs) > 0 {
		return nil, errs, nil
	}
	g, errs := dag.Compile(spec, dag.Options{})
	if len(errs) > 0 {
		return nil, errs, nil
	}
	errs, err := s.checkNodeJobs(ctx, spec)
	if err != nil || len(errs) > 0 {
		return nil, errs, err
	}
	return g, nil, nil
}

// PlanDag implements apiv1connect.DagServiceHandler: what ApplyDag would
// do with the same definition, with nothing produced.
func (s *DagService) PlanDag(ctx context.Context, req *connect.Request[apiv1.PlanDagRequest]) (*connect.Response[apiv1.PlanDagResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	spec := m.GetSpec()
	switch {
	case spec == nil:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("spec: required"))
	case spec.GetOwnerTeam() == "":
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("spec.owner_team: required, as it decides who may see and change the definition"))
	case m.GetNextFires() > maxPlanFires:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("next_fires %d: at most %d", m.GetNextFires(), maxPlanFires))
	}
	before, beforeRev, err := s.dagInForce(ctx, p, spec.GetId())
	if err != nil {
		return nil, err
	}
	if !p.Allows(spec.GetOwnerTeam(), auth.RoleOperator) {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("plan DAG %s: needs the operator role in team %q; the caller is %s of team %q", spec.GetId(), spec.GetOwnerTeam(), p.Role, p.Team))
	}
	if err := checkExpectedRevision(m.ExpectedRevision, before != nil, beforeRev); err != nil {
		return nil, err
	}
	g, problems, err := s.dagProblems(ctx, spec, before)
	if err != nil {
		return nil, err
	}
	out := &apiv1.PlanDagResponse{Created: before == nil, Revision: beforeRev}
	if len(problems) > 0 {
		for _, e := range problems {
			out.Errors = append(out.Errors, &sundialv1.FieldError{Field: e.Field, Reason: e.Reason})
		}
		return connect.NewResponse(out), nil
	}
	out.Changes, out.Nodes, out.Edges = dagChanges(before, spec)
	for _, t := range operator.NextFires(spec.GetSchedule(), spec.GetPaused(), s.cfg.Now(), int(cmp.Or(m.GetNextFires(), defaultPlanFires))) {
		out.NextFires = append(out.NextFires, timestamppb.New(t))
	}
	if before != nil {
		if out.Runs, err = s.runImpacts(ctx, p, spec.GetId(), g); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(out), nil
}

// runImpacts says, for each of the DAG's newest runs that is running or
// did not succeed, whether a resume could take the definition g. A run of
// a team p may not see (one of an earlier DAG of the same id) is left out,
// as GetDagRun hides it. Without a store of DAG runs there is nothing to
// say.
func (s *DagService) runImpacts(ctx context.Context, p auth.Principal, dagID string, g *dag.Graph) ([]*apiv1.DagRunImpact, error) {
	runs, ok := s.cfg.Store.(DagRunLister)
	if !ok {
		return nil, nil
	}
	rows, err := runs.ListDagRuns(ctx, dagID, planDagRuns)
	if err != nil {
		return nil, storeError("list DAG runs", err)
	}
	var out []*apiv1.DagRunImpact
	for _, r := range rows {
		if !r.Active && r.Status == dagrun.StatusSucceeded.String() {
			continue
		}
		run, err := s.visibleDagRun(ctx, p, r.ID)
		if connect.CodeOf(err) == connect.CodeNotFound {
			continue // gone since the listing, or another team's
		}
		if err != nil {
			return nil, err
		}
		imp, err := runImpact(run, g)
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, err)
		}
		out = append(out, imp)
	}
	return out, nil
}

// runImpact is what the definition g means for the stored run r: the
// resume rule of dagengine.Runs.Resume, which adopts a definition only if
// it is dag.Compatible with the one the run follows.
func runImpact(r storedDagRun, g *dag.Graph) (*apiv1.DagRunImpact, error) {
	old, errs := dag.Compile(r.spec, dag.Options{})
	if len(errs) > 0 {
		return nil, fmt.Errorf("DAG run %q: the definition it follows does not compile: %w", r.row.ID, &dag.ValidationError{DagID: r.row.DagID, Errors: errs})
	}
	imp := &apiv1.DagRunImpact{DagRunId: r.row.ID, Status: r.row.Status, Active: r.row.Active, Resumable: r.state.Resumable(), SameShape: true}
	if err := dag.Compatible(old, g); err != nil {
		imp.SameShape, imp.Reason = false, err.Error()
	}
	return imp, nil
}

// dagChanges is the diff of a DAG definition against the one in force
// (before, nil for none): its own fields, by the audit trail's rule
// (audit.Diff, secret values redacted), then its nodes by id, then its
// dependencies.
func dagChanges(before, after *sundialv1.DagSpec) ([]*apiv1.FieldChange, []*apiv1.DagNodeChange, []*apiv1.DagEdgeChange) {
	var fields []audit.Change
	for _, c := range audit.Diff(before, after) {
		if c.Field != "nodes" {
			fields = append(fields, c)
		}
	}
	old := map[string]*sundialv1.DagNode{}
	for _, n := range before.GetNodes() {
		old[n.GetId()] = n
	}
	var nodes []*apiv1.DagNodeChange
	seen := map[string]bool{}
	for _, n := range after.GetNodes() {
		seen[n.GetId()] = true
		was, ok := old[n.GetId()]
		if !ok {
			nodes = append(nodes, &apiv1.DagNodeChange{NodeId: n.GetId(), Change: changeAdded})
			continue
		}
		var cs []audit.Change
		for _, c := range audit.Diff(was, n) {
			if c.Field != "parents" {
				cs = append(cs, c)
			}
		}
		if len(cs) > 0 {
			nodes = append(nodes, &apiv1.DagNodeChange{NodeId: n.GetId(), Change: changeChanged, Fields: fieldChanges(cs)})
		}
	}
	for _, n := range before.GetNodes() {
		if !seen[n.GetId()] {
			nodes = append(nodes, &apiv1.DagNodeChange{NodeId: n.GetId(), Change: changeRemoved})
		}
	}
	was, now := edgesOf(before), edgesOf(after)
	var edges []*apiv1.DagEdgeChange
	for _, e := range now {
		if !slices.Contains(was, e) {
			edges = append(edges, &apiv1.DagEdgeChange{Parent: e[0], Child: e[1], Change: changeAdded})
		}
	}
	for _, e := range was {
		if !slices.Contains(now, e) {
			edges = append(edges, &apiv1.DagEdgeChange{Parent: e[0], Child: e[1], Change: changeRemoved})
		}
	}
	return fieldChanges(fields), nodes, edges
}

// edgesOf lists spec's dependencies as (parent, child), sorted.
func edgesOf(spec *sundialv1.DagSpec) [][2]string {
	var out [][2]string
	for _, n := range spec.GetNodes() {
		for _, p := range n.GetParents() {
			out = append(out, [2]string{p, n.GetId()})
		}
	}
	slices.SortFunc(out, func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	})
	return slices.Compact(out)
}
