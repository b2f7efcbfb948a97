package registry

import (
	"context"
	"fmt"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/quota"
)

// quotas is the registry's side of package quota: the max_jobs check and
// the per-team job index.
type quotas struct {
	store  quota.Store
	cache  *quota.Cache
	tracks *group[quota.TeamJob, struct{}]
}

// newQuotas returns the registry's quotas over st. The index changes of
// the definitions handled at once go to the store together (a group, as
// upserts do): one per definition would be a read and a write of their
// own, costing the node more than the rest of the definition's
// registration.
func newQuotas(st quota.Store, cache *quota.Cache) *quotas {
	return &quotas{store: st, cache: cache, tracks: newGroup(upsertCalls, upsertJobs,
		func(ctx context.Context, moves []quota.TeamJob) ([]struct{}, error) {
			if err := st.TrackTeamJobs(ctx, moves); err != nil {
				return nil, err
			}
			return make([]struct{}, len(moves)), nil
		})}
}

// checkMaxJobs refuses a definition that would create a job of a team that
// already has its max_jobs. Updates of a job the store holds (exists)
// always pass. See package quota for the bound on overshoot under
// concurrent creates.
func (r *Registry) checkMaxJobs(ctx context.Context, spec *sundialv1.JobSpec, exists bool) (jobspec.FieldError, bool, error) {
	if r.quotas == nil {
		return jobspec.FieldError{}, false, nil
	}
	team := spec.GetOwnerTeam()
	var q quota.Quota
	if err := r.retry(ctx, "read_quota", func() (err error) {
		q, err = r.quotas.cache.Get(ctx, team)
		return err
	}); err != nil {
		return jobspec.FieldError{}, false, err
	}
	if q.MaxJobs == 0 {
		return jobspec.FieldError{}, false, nil
	}
	if exists {
		return jobspec.FieldError{}, false, nil
	}
	var n int
	if err := r.retry(ctx, "count_team_jobs", func() (err error) {
		n, err = r.quotas.store.CountTeamJobs(ctx, team)
		return err
	}); err != nil {
		return jobspec.FieldError{}, false, err
	}
	if n < q.MaxJobs {
		return jobspec.FieldError{}, false, nil
	}
	r.metrics.quotaRejections.WithLabelValues("max_jobs").Inc()
	return jobspec.FieldError{
		Field:  "owner_team",
		Reason: fmt.Sprintf("team %s has %d of %d jobs (quota max_jobs)", team, n, q.MaxJobs),
	}, true, nil
}

// trackJob indexes a stored job under its team, at the record's offset.
func (r *Registry) trackJob(ctx context.Context, spec *sundialv1.JobSpec, offset int64) error {
	if r.quotas == nil {
		return nil
	}
	return r.retry(ctx, "index_team_job", func() error {
		_, err := r.quotas.tracks.do(ctx, quota.TeamJob{Team: spec.GetOwnerTeam(), JobID: spec.GetId(), Revision: offset})
		return err
	})
}

// untrackJob removes a deleted job from its team's index.
func (r *Registry) untrackJob(ctx context.Context, id string, offset int64) error {
	if r.quotas == nil {
		return nil
	}
	return r.retry(ctx, "index_team_job", func() error {
		return r.quotas.store.UntrackTeamJob(ctx, id, offset)
	})
}
