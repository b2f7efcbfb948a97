// Package leasing decides, through Redis, which runner may execute a run.
//
// A runner that consumed a run from Kafka calls Store.Acquire before it does
// anything with it. The lease it gets is one of the job's concurrency slots,
// held for that run, with a fencing token; while the run executes, a Keeper
// renews the lease; at the end the runner calls Store.Complete (the effect
// happened) or Store.Release (it did not: retry, cancellation).
//
// # Who is authoritative
//
// Redis is authoritative for who holds a slot: a holder is whoever the Lua
// scripts recorded, and each script reads and writes the job's keys
// atomically, on the Redis server's clock (TIME). No runner's memory or clock
// decides who holds a slot.
//
// The fencing token orders holders. Every acquire of a job's slots takes the
// next value of the job's counter (INCR), so a later holder always has a
// larger token than an earlier one, across runs and across lease expiries.
// The counter never expires.
//
// The dedupe mark is authoritative for "this run's effect happened". Complete
// writes it, atomically with freeing the slot, and only for the live holder;
// Acquire refuses a run whose mark exists (ErrAlreadyDone). The mark lives
// for Config.DoneRetention, which must cover how long a run can be redelivered.
//
// # Fencing tokens downstream
//
// A lease is a promise with a deadline, not a lock: a holder paused by GC or
// a slow network can act after its lease ended and another holder started.
// Where the downstream can check, the runner passes the token along with the
// run id (as a header next to the Idempotency-Key); a downstream that
// remembers the largest token per job refuses writes with a smaller one. The
// run id itself is the idempotency key: a downstream that deduplicates on it
// absorbs a duplicate execution that leasing could not prevent.
//
// # How long a lease may be trusted
//
// The server expires a lease TTL after the acquire or renewal reached it. The
// holder cannot know when that was, only when it sent the call, which was
// earlier. So the holder trusts its lease until
//
//	Lease.TrustedUntil() = start of the acquire or renewal call + TTL - Margin
//
// measured from when the call started, never from when the reply came back
// (a slow reply would otherwise stretch the trust past the server's expiry).
// Margin absorbs differing clock rates and pauses of the holder. A Keeper
// renews at TTL/3 after each renewal started and cancels the execution's
// context at TrustedUntil if no renewal succeeded by then, whether or not a
// renewal call is still hanging.
//
// A Keeper follows internal/lifecycle: Stop ends the renewals, returns once
// the renewal goroutine has exited, cancels the execution's context with
// ErrKeeperStopped, is idempotent and safe before Start. It leaves the lease
// to its caller (Complete or Release), so a stopped Keeper may be started
// again while the lease is trusted, with a new execution context.
//
// # When Redis dies
//
// Renewals fail, and every running execution is cancelled at its lease's
// TrustedUntil; no new lease can be taken, so no run starts. What a restart
// brings back depends on persistence. With AOF (appendfsync everysec or
// always), slots, counters and dedupe marks survive, up to the last fsync. Without
// persistence the marks and counters are gone: a redelivered run that had
// completed can execute again, and tokens restart from 1. Such duplicates are
// caught downstream by the idempotency key (the run id); run Redis with AOF
// to keep them rare. A failover to a replica that missed the last writes has
// the same effect for those writes. Under Sentinel, the old master also keeps
// taking writes from clients that have not yet followed the switch, until
// Sentinel turns it into a replica, which drops them: a lease taken in that
// window can vanish and its token be handed out again.
//
// # When the holder dies
//
// Its lease is not renewed and expires TTL after its last renewal. The next
// Acquire on the job removes expired holders before counting slots, so a
// slot leaked by a dead holder comes back after at most TTL, with no sweeper.
// Kafka redelivers the run, because its offset was never committed, and the
// new holder gets a larger token.
//
// # One slot per run, and overlap
//
// A run holds at most one slot. Acquire of a run that already holds one fails
// with ErrRunHeld (a redelivery while the first delivery still executes); the
// runner tries again later rather than executing. When the job's limit is
// reached Acquire fails with a *NoSlotError naming the holders, and the
// runner applies the job's overlap policy. For "replace" it calls Revoke on
// them: each revoked holder's next renewal fails and its Keeper cancels the
// execution, while its slot stays taken until the revoked lease would have
// expired, because the old execution may still be running until its holder
// notices. Only then does the replacement get the slot.
//
// Every call is safe to repeat after a connection error (see IsRetryable):
// an acquire carries a nonce so that its own retry gets back the lease it
// took, and a complete recognises the dedupe mark it wrote.
//
// # A restarted holder
//
// A store with a Holder (the runner's id) puts it and its Incarnation in
// every acquire's nonce. A run held under an earlier incarnation of the same
// holder is taken over at once by the later one, with a larger fencing token:
// a runner SIGKILLed and restarted under its id resumes the runs it was
// executing without waiting for their leases to expire. Any other holder
// still gets ErrRunHeld until the TTL has passed. The earlier incarnation's
// renewals and completes then fail with ErrLeaseLost, and a call it still
// makes carries the smaller token.
//
// # Pipelines
//
// AcquireBatch and CompleteBatch send many calls in one pipelined round
// trip. A Batcher does the same for calls made by many goroutines at once
// (Acquire, Renew, Complete, Release; Batcher.NewKeeper makes a Keeper that
// renews through it, so the renewals of many long runs share pipelines):
// a call that finds fewer than its pipelines (DefaultPipelines, 4) out is
// sent alone at once; the calls that arrive while they are all out go
// together in the next one (no timer). The scripts and replies are the same
// as one call at a time; a pipeline's calls are decided one after the other
// in arrival order, and calls in different pipelines were in flight at the
// same time, so neither waited for the other's outcome.
//
// # Keys and Redis Cluster
//
// All keys of a job share the hash tag {job id}:
//
//	<prefix>{<job>}:slots         sorted set, run id -> expiry (ms, server clock)
//	<prefix>{<job>}:holders       hash, run id -> token and acquire nonce
//	<prefix>{<job>}:fence         the job's last fencing token
//	<prefix>{<job>}:done:<run>    dedupe mark, the completing token
//
// so every script touches one cluster slot. An acquire may also name the
// caller's own keys of that slot (Request.Flags): the script reports
// whether each exists, with the lease (Lease.Flagged) or with the holders
// of a full job (NoSlotError.Flagged), so a marker the caller must check
// when it asks for a run's lease (the runner's cancel, replace and suspend
// markers) costs no round trip of its own.
// Team slots (teamslots.go) bound
// the runs of a team that execute at once; their key has the team's own tag,
//
//	<prefix>{team:<team>}:team-slots    sorted set, run id -> expiry (ms)
//
// and they only count: the job's lease still decides who executes a run.
// A runner takes the team slot before the job's lease and releases it when
// the attempt ends; it renews its team slots every TTL/3, so those of a dead
// runner come back after TTL. The runs a team starts per minute
// (teamrate.go, quota max_runs_per_minute) are counted in the same tag,
//
//	<prefix>{team:<team>}:team-rate     sorted set, run id -> window
//
// where a window is the server's time in ms divided by one minute; one
// script drops earlier windows, checks the limit and counts the run, so
// runners racing for the last place cannot both take it, and a run counted
// in the window already passes again without counting twice.
// Job ids must not contain braces.
// The scripts are called by SHA1 digest (EVALSHA) and loaded again when Redis
// answers NOSCRIPT. Redis 5 or later is required (scripts that write after
// reading TIME).
//
// # Dependencies
//
// github.com/redis/go-redis/v9 is the Redis client (single node, Sentinel and
// Cluster behind redis.UniversalClient). The tests use
// github.com/alicebob/miniredis/v2 to run the same conformance suite against
// the in-process Redis of the embedded mode, and go.uber.org/goleak.
package leasing
