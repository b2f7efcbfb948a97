// Package objective measures a job against its trigger-lag objective: the
// rule behind ListObjectives and the console's objective figures, in one
// home. It is pure: Parse reads the label, Assess judges the history
// records it is given at the now it is given, CauseOf names where one
// attempt lost its time. Reading the records, and bounding that reading,
// is the caller's (apiserver).
//
// # The objective
//
// A job states its objective in the label Label, written
// "p99 <= 2s over 7d" (or "p99<=2s/7d"): the share (the percentile) of its
// attempts due in the window ending now that must start within the lag of
// their due time. The start lag of an attempt is its start minus its due
// time (AttemptDue, a retry's or deferral's own due time, else Due); an
// attempt not started while scheduled or running counts its wait so far,
// so a stuck job breaches without waiting for its attempts to end. An
// attempt that ended without starting (skipped, cancelled) is not
// counted, nor one not due yet.
//
// # The budget
//
// The error budget is the late attempts the objective allows, (100 -
// percentile) % of those counted. Left is the share of it not spent: 1
// untouched, 0 spent, negative overspent; 1 with nothing counted (so a
// job with no attempts ranks as healthy, never as infinitely bad). The
// objective is met while the late attempts are within the budget.
//
// # Causes
//
// An attempt's timeline is due -> dispatched -> received -> started
// (package lateness names the steps). The cause of a late attempt is the
// step, of those whose both ends the history recorded, that took longest:
// the dispatcher of its shard (due -> dispatched), the runners' consumer
// lag on the runs topic (dispatched -> received), or the runner (received
// -> started: the pool's slots, the job's concurrency, the team's quota).
// An attempt still waiting waits in the first step it has not passed, up
// to now. With none of those times, the cause is unknown. GetRun and
// ListRuns answer it for each attempt (AttemptDetail.cause), which the
// console's run page shows.
package objective
