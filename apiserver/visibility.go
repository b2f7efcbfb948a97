package apiserver

// The run, dead-letter, watch and cluster services share one visibility
// rule, stated here because every handler of those services applies it:
//
//   - No principal in the context is Unauthenticated.
//   - A run belongs to the team that owns its job (JobSpec.owner_team, or
//     DagSpec.owner_team for a DAG's node runs). A run of another team is
//     NotFound, never PermissionDenied, so that a caller cannot learn which
//     run ids exist elsewhere; lists silently leave other teams' runs out.
//   - Acting (replaying dead runs) needs RoleOperator in the owning team.
//   - The cluster view names every team's shards and groups, so it is for
//     the cluster admin alone; others get PermissionDenied, which names no
//     team.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/auth"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// requireCaller returns the principal the interceptor put in ctx, or an
// Unauthenticated error.
func requireCaller(ctx context.Context) (auth.Principal, error) {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return auth.Principal{}, connect.NewError(connect.CodeUnauthenticated, errors.New("no credentials: send a bearer token"))
	}
	return p, nil
}

// notVisible is the answer for a missing object (a definition, a run, a
// DAG run) and for one the caller may not see alike, so that no answer
// tells another team's ids.
func notVisible(what, id string) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("%s %q: not found", what, id))
}

// internalError hides a backend failure's detail from the caller, who
// cannot act on it; the handler logs it.
func internalError(what string) error {
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s: backend unavailable, try again", what))
}

// JobReader reads job definitions; store.Jobs satisfies it.
type JobReader interface {
	GetJob(ctx context.Context, id string) (store.Job, error)
}

// DagRunReader reads DAG runs; store.DagRuns satisfies it.
type DagRunReader interface {
	GetDagRun(ctx context.Context, id string) (store.DagRun, error)
}

// jobSpec returns the stored definition of a job, tombstones included so
// that a deleted job's runs stay visible to its team. ok is false when the
// store has no such job.
func jobSpec(ctx context.Context, jobs JobReader, jobID string) (spec *sundialv1.JobSpec, job store.Job, ok bool, err error) {
	job, err = jobs.GetJob(ctx, jobID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, store.Job{}, false, nil
	}
	if err != nil {
		return nil, store.Job{}, false, fmt.Errorf("get job %s: %w", jobID, err)
	}
	spec = &sundialv1.JobSpec{}
	if err := proto.Unmarshal(job.Spec, spec); err != nil {
		return nil, store.Job{}, false, fmt.Errorf("decode job %s: %w", jobID, err)
	}
	return spec, job, true, nil
}

// dagRunSpec returns a DAG run's definition as snapshotted when it was
// created. ok is false when the store has no such run.
func dagRunSpec(ctx context.Context, runs DagRunReader, dagRunID string) (*sundialv1.DagSpec, bool, error) {
	run, err := runs.GetDagRun(ctx, dagRunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get DAG run %s: %w", dagRunID, err)
	}
	spec := &sundialv1.DagSpec{}
	if err := proto.Unmarshal(run.Spec, spec); err != nil {
		return nil, false, fmt.Errorf("decode DAG run %s: %w", dagRunID, err)
	}
	return spec, true, nil
}

// nodeJobID is the job a DAG node runs: its job_id, or dag id + "/" + node
// id for an inline job without an id of its own.
func nodeJobID(dag *sundialv1.DagSpec, n *sundialv1.DagNode) string {
	if id := n.GetJobId(); id != "" {
		return id
	}
	if id := n.GetInline().GetId(); id != "" {
		return id
	}
	return dag.GetId() + "/" + n.GetId()
}

// splitNodeRunID splits a DAG node's run id (dag run id + "/" + node id,
// with "#" + generation from the second) into the DAG run id and node id.
// ok is false for a run id that is not a node's.
func splitNodeRunID(runID string) (dagRunID, nodeID string, ok bool) {
	at := strings.LastIndexByte(runID, '@')
	if at < 0 {
		return "", "", false
	}
	slash := strings.IndexByte(runID[at:], '/')
	if slash < 0 {
		return "", "", false
	}
	dagRunID, nodeID = runID[:at+slash], runID[at+slash+1:]
	if i := strings.IndexByte(nodeID, '#'); i >= 0 {
		nodeID = nodeID[:i]
	}
	return dagRunID, nodeID, nodeID != ""
}
