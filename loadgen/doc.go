// Package loadgen defines job definitions the way a platform team would and
// measures what Sundial does with them.
//
// A Plan (NewPlan) is a pure description of a workload: N jobs (up to
// 1,000,000) with job ids "<prefix>-<index>", and either a steady mix of
// schedule kinds whose trigger rate is a set value, or a herd of one-offs
// all due at one instant. In a steady plan the interval jobs share one
// period P with their phases spread evenly over it (rate = N/P), the cron
// jobs ("S M * * * *", seconds field first) fire once an hour at a second of
// their own, and the one-off ("at") jobs are spread evenly over the measured
// window; P is solved so that the kinds together make the planned rate.
//
// The Generator registers the plan through the project's Go client (package
// client: validated, keyed by job id, acknowledged by Kafka), counts the
// registry's answers, and reads sundial.events and the run topics into a
// Recorder. The Downstream is the HTTP server the jobs call.
//
// # The downstream
//
// The design hands the run id to the downstream as its idempotency key and
// counts on the downstream to honour it: delivery is at least once, the
// effect is once. The Downstream is such a downstream. Applying an effect
// takes a set time (DownstreamConfig.EffectDuration, default 10ms), after
// which the key is recorded as applied. A request whose key is already
// applied is answered 200 with Idempotent-Replayed: true and changes
// nothing (a redelivery). A request whose key is still being applied by
// another request cannot be recognised, so it applies the effect a second
// time: a duplicate effect. That only happens when two executions of one
// run overlap, which the runners' leases and fencing tokens must prevent;
// a runner killed mid-call and its run delivered again later is a
// redelivery, not a duplicate.
//
// # What is measured
//
// The definitions are the bench's (bench/README.md, "Reading a report"):
//
//   - Trigger latency of a run: its first start of attempt 1 (the runner
//     holds the lease and starts the execution) minus the attempt's due
//     time: the started_time of the first event that carries one, STARTED
//     or the outcome of a run too short for its runner to produce STARTED
//     (runner.Config.StartedDelay), or a STARTED event's time. Open loop: a backlog shows up as latency.
//   - Dispatch latency: the run record's broker timestamp minus its due
//     time. The bench creates its run topics with
//     message.timestamp.type=LogAppendTime, so the timestamp is the moment
//     the broker appended (and, with one in-sync replica, acknowledged) the
//     record; with CreateTime it is the producer's clock just before the
//     send, a slight underestimate. Counters says which it was.
//   - Lost: runs that the plan makes due in the measured window, computed by
//     the plan's own arithmetic (not the scheduler's schedule package), that
//     never started, counted after a drain period.
//   - Duplicate executions: runs with more than one execution of the same
//     attempt. An execution is identified by (attempt, fencing token,
//     runner): events are published at least once, so the same STARTED
//     event read twice, or a STARTED and the outcome of its execution, are
//     one execution, while two leases on one run are two. An execution
//     whose runner died before it produced STARTED or an outcome is not
//     seen (its STARTED waits up to the runner's StartedDelay).
//   - Duplicate effects: idempotency keys (run ids) the Downstream applied
//     more than once, which with a downstream honouring the key means two
//     requests of one run applied at the same time. Redeliveries (requests
//     answered as replays) are reported beside them; they cost nothing.
//
// # Invariants
//
//   - Latencies are recorded in HDR histograms (microseconds, 1µs to 1h,
//     three significant digits); a value outside is clamped and a start
//     before the due time is counted (EarlyStarts), never dropped.
//   - Only runs of the plan's prefix are counted; anything else on the
//     topics is counted as foreign and ignored.
//   - The Recorder and the Plan do no I/O, so the counting logic is tested
//     without backends.
//
// # Dependencies
//
// github.com/HdrHistogram/hdrhistogram-go keeps latency distributions with
// bounded relative error at any percentile; franz-go reads the topics.
package loadgen
