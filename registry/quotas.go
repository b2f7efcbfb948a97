package registry

import (
	"context"
	"fmt"
	"sync"

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
	// creates holds one lock per team with a max_jobs: a create of such a
	// team counts its jobs, stores the job and indexes it under the lock,
	// so the creates this registry handles at once (a bulk apply) each
	// count the ones before them. One entry per team ever limited.
	creates sync.Map // team -> *sync.Mutex
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
// always pass. For a create of a limited team it takes the team's create
// lock and returns its unlock, which the caller calls once the job is
// stored and indexed (or refused): the creates of one team that this
// registry handles at once are thus counted one after the other, and a
// bulk apply cannot pass the limit. unlock is never nil; calling it again
// does nothing. See package quota for what remains between registries.
//
// A create is refused only after the limit has been read through from the
// store (the cache may be TTL old), so a limit just raised applies to the
// next definition.
func (r *Registry) checkMaxJobs(ctx context.Context, spec *sundialv1.JobSpec, exists bool) (fe jobspec.FieldError, over bool, unlock func(), err error) {
	unlock = func() {}
	if r.quotas == nil || exists {
		return jobspec.FieldError{}, false, unlock, nil
	}
	team := spec.GetOwnerTeam()
	var q quota.Quota
	if err := r.retry(ctx, "read_quota", func() (err error) {
		q, err = r.quotas.cache.Get(ctx, team)
		return err
	}); err != nil {
		return jobspec.FieldError{}, false, unlock, err
	}
	if q.MaxJobs == 0 {
		return jobspec.FieldError{}, false, unlock, nil
	}
	l, _ := r.quotas.creates.LoadOrStore(team, &sync.Mutex{})
	mu := l.(*sync.Mutex)
	mu.Lock()
	unlock = sync.OnceFunc(mu.Unlock)
	var n int
	if err := r.retry(ctx, "count_team_jobs", func() (err error) {
		n, err = r.quotas.store.CountTeamJobs(ctx, team)
		return err
	}); err != nil {
		unlock()
		return jobspec.FieldError{}, false, func() {}, err
	}
	if n < q.MaxJobs {
		return jobspec.FieldError{}, false, unlock, nil
	}
	if err := r.retry(ctx, "read_quota", func() (err error) {
		q, err = r.quotas.cache.GetFresh(ctx, team)
		return err
	}); err != nil {
		unlock()
		return jobspec.FieldError{}, false, func() {}, err
	}
	if q.MaxJobs == 0 || n < q.MaxJobs {
		return jobspec.FieldError{}, false, unlock, nil
	}
	unlock()
	r.metrics.quotaRejections.WithLabelValues("max_jobs").Inc()
	return jobspec.FieldError{
		Field:  "owner_team",
		Reason: fmt.Sprintf("team %s has %d of %d jobs (quota max_jobs)", team, n, q.MaxJobs),
	}, true, func() {}, nil
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
