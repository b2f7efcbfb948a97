package operator

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/client"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// PauseResult is the outcome of Pause or Resume.
type PauseResult struct {
	// Changed is false when the job already was in the asked state;
	// nothing was produced then.
	Changed bool
	Receipt client.Receipt
	// Status is the registry's answer.
	Status *sundialv1.JobStatus
}

// Pause pauses a job: it produces the definition in force with paused set
// and waits for the registry's answer. While paused, the job's schedule
// fires nothing and its pending retries, deferrals, triggers and DAG nodes
// are held (package dispatcher).
func (o *Operator) Pause(ctx context.Context, jobID string) (PauseResult, error) {
	return o.setPaused(ctx, "pause", jobID, true)
}

// Resume resumes a paused job: its held entries fire, late, and the
// occurrences that fell due while it was paused follow its misfire policy.
func (o *Operator) Resume(ctx context.Context, jobID string) (PauseResult, error) {
	return o.setPaused(ctx, "resume", jobID, false)
}

// setPaused produces the definition in force of jobID with paused set to
// paused. A definition with a producer revision gets the next one, which
// the registry requires of a changed definition; a change produced by
// someone else between the read and the produce is then refused rather
// than overwritten.
func (o *Operator) setPaused(ctx context.Context, action, jobID string, paused bool) (PauseResult, error) {
	if err := o.need(action, map[string]bool{"Jobs": o.cfg.Jobs != nil, "Producer": o.cfg.Producer != nil}); err != nil {
		return PauseResult{}, err
	}
	_, spec, err := o.job(ctx, jobID)
	if err != nil {
		return PauseResult{}, err
	}
	if spec.GetPaused() == paused {
		return PauseResult{}, nil
	}
	spec = proto.Clone(spec).(*sundialv1.JobSpec)
	spec.Paused = paused
	if spec.Revision != nil {
		spec.Revision = proto.Uint64(spec.GetRevision() + 1)
	}
	r, err := o.cfg.Producer.Apply(ctx, spec)
	if err != nil {
		return PauseResult{}, fmt.Errorf("%s job %q: %w", action, jobID, err)
	}
	res := PauseResult{Changed: true, Receipt: r}
	statuses, err := o.cfg.Producer.WaitStatus(ctx, r)
	if err != nil {
		return res, fmt.Errorf("%s job %q: produced at %s[%d]@%d, no answer from the registry: %w", action, jobID, r.Topic, r.Partition, r.Offset, err)
	}
	res.Status = statuses[0]
	if res.Status.GetOutcome() == sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED {
		return res, fmt.Errorf("%s job %q: %w: %w", action, jobID, ErrRejected, client.FieldErrors(res.Status))
	}
	o.record(ctx, Action{Kind: action, JobID: jobID, Team: spec.GetOwnerTeam(), Detail: fmt.Sprintf("revision %d", r.Offset)})
	return res, nil
}

func decodeSpec(b []byte) (*sundialv1.JobSpec, error) {
	spec := &sundialv1.JobSpec{}
	if err := proto.Unmarshal(b, spec); err != nil {
		return nil, err
	}
	return spec, nil
}
