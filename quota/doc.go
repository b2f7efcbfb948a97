// Package quota holds the per-team quotas of a Sundial cluster and the
// per-team job index the registry counts jobs with.
//
// # Quotas
//
// A Quota bounds one team: MaxJobs, the job definitions it may own, and
// MaxConcurrentRuns, the runs of its jobs that may execute at once. Zero
// means unlimited. A team without a row of its own gets the default row
// (team DefaultTeam, "*"), and a cluster without a default row has no
// limits. Store.Effective resolves that rule; it is the one place it lives.
//
// # Who enforces what
//
//   - MaxJobs is checked by the registry when a definition would create a
//     job (an id it does not hold, or holds deleted). Updates and deletes of
//     existing jobs always pass, so lowering a quota never strands a team's
//     jobs: the team is only stopped from adding new ones.
//   - MaxConcurrentRuns is enforced by the runners in Redis (package
//     leasing, team slots): a run over its team's quota is deferred, never
//     dropped and never counted as failed.
//
// # The job index, and its bound on overshoot
//
// A team's job count is the number of rows of its partition in the index
// (TrackTeamJob, UntrackTeamJob, CountTeamJobs; TrackTeamJobs applies the
// moves of many jobs in one call, as the registry does for the definitions
// it handles at once), not a counter: a counter increment is
// not idempotent, and the registry processes records at least once, so a
// redelivered record would count a job twice. An index row is a set member:
// writing it again changes nothing. Each write carries the revision of the
// definition that made it (its offset on sundial.jobs) as its write
// timestamp, so a replay of an older record can neither bring back a
// deleted job's row nor remove a newer one. A job that moves to another team
// leaves the old team's partition in the same call.
//
// The check reads the count, then the registry stores the job, then its
// row. A registry makes the three one step for the creates of a team with a
// max_jobs: it holds a lock of the team across them, so the creates it
// handles at once (a bulk apply) each count those before them, and one
// registry never lets a team pass MaxJobs. Registries do not share that
// lock: creates of one team handled at the same moment by several
// registries (the team's topic has several partitions) each see the count
// before the others' rows, so a team can exceed MaxJobs by at most the
// number of registries minus one; it never exceeds it through redelivery.
//
// A create is refused only after the limit was read again from the store
// (Cache.GetFresh), so a raised limit applies to the next definition; a
// lowered one within the cache's TTL.
//
// # Setting quotas
//
// Change is one change of a team's row (or the default's): the limits it
// names, the others kept. Change.Validate is the one check of a change,
// naming each bad field; Set applies it to the stored row, for the CLI
// (sundial quotas set, straight to the store) and the API
// (QuotaService.SetQuotas) alike. Diff says what a change changed, for the
// audit trail.
//
// # Reading quotas and usage
//
// Usages is the one reading of quotas with their usage (jobs in the index,
// team slots held in Redis): the CLI (sundial quotas list), the API server
// and the metrics (Collector, sundial_quota_limit and sundial_quota_usage)
// all call it. Cache serves the registry and the runners, which consult a
// quota for every definition or run and accept one stale by its TTL.
//
// # Implementations
//
// Memory (this package) and Cassandra (store/cassandra, table team_quotas
// and the index tables team_jobs and job_teams, migration 8) implement
// Store; package quotatest is the conformance suite both pass.
package quota
