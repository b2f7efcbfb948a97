package dagengine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// errJobNotFound: a node's registered job does not exist, is deleted, does
// not decode, or belongs to another team than the DAG's. The cases are one
// error, with one text, so that a DAG learns nothing of other teams' jobs.
var errJobNotFound = errors.New("job not found")

// jobNotFound is errJobNotFound for one job id and team; its text is
// dag.JobNotFound's.
func jobNotFound(jobID, team string) error {
	return notFoundError(dag.JobNotFound(jobID, team))
}

type notFoundError string

func (e notFoundError) Error() string        { return string(e) }
func (e notFoundError) Is(target error) bool { return target == errJobNotFound }

// jobDef is the definition a node runs.
type jobDef struct {
	spec     *sundialv1.JobSpec
	revision int64
}

// job returns the definition of node i: its inline job, or its registered
// job read from the store (cached in jobs for one round of work). A
// registered job runs only for its own team: its STORED owner_team must be
// the DAG's, read when the node starts, since definitions arrive by Kafka
// as well as through the API and a job may change hands after the DAG was
// applied.
func (r *Runs) job(ctx context.Context, l *loaded, i int, jobs map[string]*jobDef) (*jobDef, error) {
	node := l.g.Node(i)
	if node.Inline != nil {
		return &jobDef{spec: node.Inline}, nil
	}
	team := l.g.OwnerTeam()
	if d, ok := jobs[node.JobID]; ok {
		if d == nil {
			return nil, jobNotFound(node.JobID, team)
		}
		return d, nil
	}
	j, err := r.cfg.Store.GetJob(ctx, node.JobID)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && j.Deleted):
		jobs[node.JobID] = nil
		return nil, jobNotFound(node.JobID, team)
	case err != nil:
		return nil, fmt.Errorf("dag run %s node %s: read job %q: %w", l.row.ID, node.ID, node.JobID, err)
	}
	spec := &sundialv1.JobSpec{}
	if err := proto.Unmarshal(j.Spec, spec); err != nil {
		r.cfg.Logger.Error("stored job definition does not decode; the node fails", "job", node.JobID, "err", err)
		jobs[node.JobID] = nil
		return nil, jobNotFound(node.JobID, team)
	}
	if !dag.MayRunJob(spec.GetOwnerTeam(), team) {
		jobs[node.JobID] = nil
		return nil, jobNotFound(node.JobID, team)
	}
	d := &jobDef{spec: spec, revision: j.Revision}
	jobs[node.JobID] = d
	return d, nil
}

// nodeEntry returns the due entry that starts node i's current generation:
// a KindDAG entry of the node's job, due when the engine decided to start
// the node, carrying the Run to emit. Its key (due, job id, kind, run id)
// depends only on the stored state, so enqueueing it again after a crash
// rewrites the same entry.
func (r *Runs) nodeEntry(ctx context.Context, l *loaded, st *dagrun.State, i int, jobs map[string]*jobDef) (store.DueEntry, error) {
	n := st.Nodes[i]
	node := l.g.Node(i)
	def, err := r.job(ctx, l, i, jobs)
	if err != nil {
		return store.DueEntry{}, err
	}
	due := store.Truncate(n.StartedAt)
	runID := n.RunID(st.DagRunID)
	run := buildRun(def, l.g.OwnerTeam(), node.JobID, runID, due, st.DagRunID, node.ID, r.cfg.Shards)
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(run)
	if err != nil {
		return store.DueEntry{}, fmt.Errorf("%w: encode run %s: %w", ErrPermanent, runID, err)
	}
	return store.DueEntry{
		Due:      due,
		JobID:    node.JobID,
		Kind:     store.KindDAG,
		RunID:    runID,
		Attempt:  1,
		Revision: max(def.revision, 0),
		Payload:  payload,
	}, nil
}

// buildRun snapshots a job definition into the Run of a node, as the
// dispatcher does for scheduled runs. The run is owned by the DAG's team,
// whatever the definition says: job checks that the two agree.
func buildRun(def *jobDef, team, jobID, runID string, due time.Time, dagRunID, nodeID string, shards int) *sundialv1.Run {
	spec := def.spec
	dueTS := timestamppb.New(store.Truncate(due))
	timeout := spec.GetTimeout()
	if timeout == nil {
		timeout = durationpb.New(jobspec.DefaultTimeout)
	}
	return &sundialv1.Run{
		RunId:            runID,
		JobId:            jobID,
		DueTime:          dueTS,
		Attempt:          1,
		AttemptDueTime:   dueTS,
		Priority:         cmp.Or(spec.GetPriority(), sundialv1.Priority_PRIORITY_DEFAULT),
		Origin:           sundialv1.RunOrigin_RUN_ORIGIN_DAG,
		DefinitionOffset: def.revision,
		OwnerTeam:        team,
		Labels:           spec.GetLabels(),
		Payload:          spec.GetPayload(),
		Target:           spec.GetTarget(),
		Timeout:          timeout,
		Retry:            spec.GetRetry(),
		ConcurrencyLimit: spec.GetConcurrencyLimit(),
		OverlapPolicy:    spec.GetOverlapPolicy(),
		QueueDelay:       spec.GetQueueDelay(),
		Pool:             spec.GetPool(),
		Routing:          spec.GetRouting(),
		DagRunId:         dagRunID,
		DagNodeId:        nodeID,
		Shard:            uint32(store.ShardOf(jobID, shards)),
	}
}
