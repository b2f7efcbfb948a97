package dispatcher

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// errResumed: a held entry's job was resumed while the entry was being
// held; the firing is tried again and fires it.
var errResumed = errors.New("the job was resumed while its entry was being held")

// jobPaused says whether the job of a retry or DAG entry that carries its
// run is paused. A job that is not found or deleted is not: such an entry
// fires as it always has, since its run carries everything it needs.
func (o *owner) jobPaused(ctx context.Context, e store.DueEntry) (bool, error) {
	job, _, err := o.readJob(ctx, e)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read job %q: %w", e.JobID, err)
	case job.Deleted:
		return false, nil
	}
	return specPaused(job.Spec), nil
}

func specPaused(b []byte) bool {
	spec := &sundialv1.JobSpec{}
	return proto.Unmarshal(b, spec) == nil && spec.GetPaused()
}

// hold moves an entry of a paused job into the job's held set, where the
// registry finds it when the job is resumed.
//
// The registry stores the resumed definition before it reads the held set,
// and hold writes the entry before it reads the job again from the store: so
// either the registry's read finds the entry, or the read here finds the job
// resumed. In that case the entry is taken back and the firing fails, to be
// tried again (it then fires); should the registry also have moved it, both
// fire it under the same run id, which runners deduplicate.
func (o *owner) hold(ctx context.Context, e store.DueEntry) error {
	if err := o.store.HoldDue(ctx, e); err != nil {
		return fmt.Errorf("hold entry %s of paused job %q: %w", e.RunID, e.JobID, err)
	}
	job, err := o.store.GetJob(ctx, e.JobID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read job %q after holding %s: %w", e.JobID, e.RunID, err)
	}
	if err == nil && !job.Deleted && !specPaused(job.Spec) {
		if o.jobs != nil {
			o.jobs.invalidate(e.JobID)
		}
		if err := o.store.DeleteHeld(ctx, e.Key()); err != nil {
			return fmt.Errorf("take back held entry %s: %w", e.RunID, err)
		}
		return fmt.Errorf("%w: job %q, entry %s", errResumed, e.JobID, e.RunID)
	}
	o.log.Debug("entry held: its job is paused", "run_id", e.RunID, "kind", e.Kind)
	return nil
}
