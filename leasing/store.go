package leasing

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store takes, renews and gives back leases on runs. It holds no goroutines
// and no per-run state: Redis holds all of it. A Store is safe for concurrent
// use.
type Store struct {
	cfg     Config
	scripts scripts
}

// New returns a Store over cfg.Client. It does no I/O; the scripts are loaded
// by Load or on first use.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg.withDefaults(), scripts: newScripts()}, nil
}

// Load loads the scripts into Redis (SCRIPT LOAD; on a cluster client, into
// every primary). Calling it at start-up saves one round trip on first use;
// the store loads a script again by itself whenever Redis answers NOSCRIPT
// (after a restart, a failover or SCRIPT FLUSH).
func (s *Store) Load(ctx context.Context) error {
	for _, sc := range s.scripts.all() {
		if err := s.load(ctx, sc); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) load(ctx context.Context, sc *script) error {
	sha, err := s.cfg.Client.ScriptLoad(ctx, sc.src).Result()
	if err != nil {
		return fmt.Errorf("leasing: load script %s: %w", sc.name, err)
	}
	if sha != sc.sha {
		return fmt.Errorf("leasing: load script %s: Redis digest %s, expected %s", sc.name, sha, sc.sha)
	}
	return nil
}

// eval calls sc by digest, loading it once if Redis does not have it. A
// NOSCRIPT reply means the script did not run, so calling again is safe.
func (s *Store) eval(ctx context.Context, sc *script, c call) (any, error) {
	v, err := s.cfg.Client.EvalSha(ctx, sc.sha, c.keys, c.args...).Result()
	if isNoScript(err) {
		if err := s.load(ctx, sc); err != nil {
			return nil, err
		}
		v, err = s.cfg.Client.EvalSha(ctx, sc.sha, c.keys, c.args...).Result()
	}
	return v, err
}

// call is one invocation of a script. A nil *call in a batch is skipped.
type call struct {
	keys []string
	args []any
}

// evalBatch sends the calls of sc in one pipeline and returns each one's
// reply and error, index for index; skipped calls get neither.
func (s *Store) evalBatch(ctx context.Context, sc *script, calls []*call) ([]any, []error) {
	sc2 := make([]scriptCall, len(calls))
	for i, c := range calls {
		sc2[i] = scriptCall{sc: sc, c: c}
	}
	return s.evalPipeline(ctx, sc2)
}

// scriptCall is one call of one script in a pipeline of several scripts.
type scriptCall struct {
	sc *script
	c  *call
}

// evalPipeline sends the calls in one pipeline, in order, and returns each
// one's reply and error, index for index; calls with a nil call are skipped.
// Calls answered NOSCRIPT did not run: their scripts are loaded and they are
// sent once more.
func (s *Store) evalPipeline(ctx context.Context, calls []scriptCall) ([]any, []error) {
	vals := make([]any, len(calls))
	errs := make([]error, len(calls))
	pending := make([]int, 0, len(calls))
	for i, c := range calls {
		if c.c != nil {
			pending = append(pending, i)
		}
	}
	for attempt := 0; len(pending) > 0; attempt++ {
		pipe := s.cfg.Client.Pipeline()
		cmds := make([]*redis.Cmd, len(pending))
		for j, i := range pending {
			cmds[j] = pipe.EvalSha(ctx, calls[i].sc.sha, calls[i].c.keys, calls[i].c.args...)
		}
		// Exec reports the first failed command; every command's own error is
		// read below.
		_, _ = pipe.Exec(ctx)
		var again []int
		missing := map[*script]error{}
		for j, i := range pending {
			vals[i], errs[i] = cmds[j].Result()
			if attempt == 0 && isNoScript(errs[i]) {
				again = append(again, i)
				missing[calls[i].sc] = nil
			}
		}
		for sc := range missing {
			missing[sc] = s.load(ctx, sc)
		}
		pending = pending[:0]
		for _, i := range again {
			if err := missing[calls[i].sc]; err != nil {
				errs[i] = err
				continue
			}
			pending = append(pending, i)
		}
	}
	return vals, errs
}

func (s *Store) slotsKey(jobID string) string   { return s.cfg.KeyPrefix + "{" + jobID + "}:slots" }
func (s *Store) holdersKey(jobID string) string { return s.cfg.KeyPrefix + "{" + jobID + "}:holders" }
func (s *Store) fenceKey(jobID string) string   { return s.cfg.KeyPrefix + "{" + jobID + "}:fence" }
func (s *Store) doneKey(jobID, runID string) string {
	return s.cfg.KeyPrefix + "{" + jobID + "}:done:" + runID
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func (s *Store) acquireCall(r Request) *call {
	keys := []string{s.slotsKey(r.JobID), s.holdersKey(r.JobID), s.fenceKey(r.JobID), s.doneKey(r.JobID, r.RunID)}
	keys = append(keys, r.Flags...)
	return &call{
		keys: keys,
		// The nonce lets a retried acquire (go-redis retries a command whose
		// connection failed) find the slot it took before the failure.
		args: []any{r.RunID, r.limit(), ms(s.cfg.TTL), s.nonce()},
	}
}

// nonce is an acquire's own mark: random, after the holder and its
// incarnation when the store has a Holder ("<holder>/<incarnation>/<random>"),
// which acquire.lua reads to let a restarted holder take over its runs.
func (s *Store) nonce() string {
	n := strconv.FormatUint(rand.Uint64(), 36)
	if s.cfg.Holder == "" {
		return n
	}
	return s.cfg.Holder + "/" + strconv.FormatInt(s.cfg.Incarnation, 10) + "/" + n
}

// Acquire takes a concurrency slot of req.JobID for req.RunID. It fails with
// ErrAlreadyDone when the run's dedupe mark exists, ErrRunHeld when the run
// already holds a slot, and a *NoSlotError (errors.Is ErrNoSlot) when the
// job's limit is reached. Slots whose holders stopped renewing are reclaimed
// first.
func (s *Store) Acquire(ctx context.Context, req Request) (Lease, error) {
	if err := req.validate(); err != nil {
		return Lease{}, err
	}
	start := s.cfg.Now()
	v, err := s.eval(ctx, s.scripts.acquire, *s.acquireCall(req))
	if err != nil {
		return Lease{}, fmt.Errorf("leasing: acquire job %s run %s: %w", req.JobID, req.RunID, err)
	}
	return s.acquired(req, start, v)
}

// AcquireResult is the outcome of one request of AcquireBatch.
type AcquireResult struct {
	Lease Lease
	Err   error
}

// AcquireBatch is Acquire for many requests in one pipelined round trip. The
// requests are decided one after the other, in order, so two requests for
// the same run get one lease and one ErrRunHeld. Result i belongs to reqs[i].
func (s *Store) AcquireBatch(ctx context.Context, reqs []Request) []AcquireResult {
	out := make([]AcquireResult, len(reqs))
	calls := make([]*call, len(reqs))
	for i, r := range reqs {
		if err := r.validate(); err != nil {
			out[i].Err = err
			continue
		}
		calls[i] = s.acquireCall(r)
	}
	start := s.cfg.Now()
	vals, errs := s.evalBatch(ctx, s.scripts.acquire, calls)
	for i, r := range reqs {
		if calls[i] == nil {
			continue
		}
		if errs[i] != nil {
			out[i].Err = fmt.Errorf("leasing: acquire job %s run %s: %w", r.JobID, r.RunID, errs[i])
			continue
		}
		out[i].Lease, out[i].Err = s.acquired(r, start, vals[i])
	}
	return out
}

func (s *Store) acquired(r Request, start time.Time, v any) (Lease, error) {
	reply, _ := v.([]any)
	if len(reply) >= 2 {
		if code, _ := reply[0].(int64); code == 1 {
			if token, ok := reply[1].(int64); ok {
				return Lease{
					JobID: r.JobID, RunID: r.RunID, Token: token,
					AcquiredAt: start, TTL: s.cfg.TTL, Margin: s.cfg.Margin,
					Flagged: flagsOf(r, reply[2:]),
				}, nil
			}
		}
		switch reason, _ := reply[1].(string); reason {
		case "done":
			return Lease{}, fmt.Errorf("job %s run %s: %w", r.JobID, r.RunID, ErrAlreadyDone)
		case "held":
			return Lease{}, fmt.Errorf("job %s run %s: %w", r.JobID, r.RunID, ErrRunHeld)
		case "full":
			e := &NoSlotError{JobID: r.JobID, Limit: r.limit()}
			if len(reply) < 3 {
				break
			}
			flags, _ := reply[2].([]any)
			e.Flagged = flagsOf(r, flags)
			for _, h := range reply[3:] {
				if id, ok := h.(string); ok {
					e.Holders = append(e.Holders, id)
				}
			}
			return Lease{}, e
		}
	}
	return Lease{}, fmt.Errorf("leasing: acquire job %s run %s: unexpected reply %v", r.JobID, r.RunID, v)
}

// Renew extends l by the store's TTL from now on the server. It fails with
// ErrLeaseLost when l is no longer the run's live holder. The returned lease
// has AcquiredAt set to when this call started.
func (s *Store) Renew(ctx context.Context, l Lease) (Lease, error) {
	if err := validateLease(l); err != nil {
		return Lease{}, err
	}
	start := s.cfg.Now()
	v, err := s.eval(ctx, s.scripts.renew, *s.renewCall(l))
	return s.renewed(l, start, v, err)
}

func (s *Store) renewCall(l Lease) *call {
	return &call{
		keys: []string{s.slotsKey(l.JobID), s.holdersKey(l.JobID)},
		args: []any{l.RunID, l.Token, ms(s.cfg.TTL)},
	}
}

// renewed reads a renew script's reply: l extended from start, when the
// call began.
func (s *Store) renewed(l Lease, start time.Time, v any, err error) (Lease, error) {
	if err := s.held("renew", l, v, err); err != nil {
		return Lease{}, err
	}
	l.AcquiredAt, l.TTL, l.Margin = start, s.cfg.TTL, s.cfg.Margin
	return l, nil
}

func (s *Store) completeCall(l Lease) *call {
	return &call{
		keys: []string{s.slotsKey(l.JobID), s.holdersKey(l.JobID), s.doneKey(l.JobID, l.RunID)},
		args: []any{l.RunID, l.Token, ms(s.cfg.DoneRetention)},
	}
}

// Complete records that l's run took effect (its dedupe mark, kept for
// DoneRetention) and frees its slot, in one step. It fails with ErrLeaseLost
// when l is not the run's live holder; then nothing is written. Completing
// the same lease again succeeds.
func (s *Store) Complete(ctx context.Context, l Lease) error {
	if err := validateLease(l); err != nil {
		return err
	}
	v, err := s.eval(ctx, s.scripts.complete, *s.completeCall(l))
	return s.held("complete", l, v, err)
}

// CompleteBatch is Complete for many leases in one pipelined round trip.
// Error i belongs to leases[i].
func (s *Store) CompleteBatch(ctx context.Context, leases []Lease) []error {
	out := make([]error, len(leases))
	calls := make([]*call, len(leases))
	for i, l := range leases {
		if out[i] = validateLease(l); out[i] == nil {
			calls[i] = s.completeCall(l)
		}
	}
	vals, errs := s.evalBatch(ctx, s.scripts.complete, calls)
	for i, l := range leases {
		if calls[i] != nil {
			out[i] = s.held("complete", l, vals[i], errs[i])
		}
	}
	return out
}

// Release frees l's slot without marking the run done, so a retry or another
// delivery may execute it. It fails with ErrLeaseLost when l is not the run's
// live holder.
func (s *Store) Release(ctx context.Context, l Lease) error {
	if err := validateLease(l); err != nil {
		return err
	}
	v, err := s.eval(ctx, s.scripts.release, *s.releaseCall(l))
	return s.held("release", l, v, err)
}

func (s *Store) releaseCall(l Lease) *call {
	return &call{
		keys: []string{s.slotsKey(l.JobID), s.holdersKey(l.JobID)},
		args: []any{l.RunID, l.Token},
	}
}

// Revoke takes the lease of runID away from its holder, for the overlap
// policy "replace". The holder's next renewal or completion fails with
// ErrLeaseLost, so its Keeper cancels the execution. The slot itself stays
// taken until the revoked lease would have expired: until then the old
// execution may still be running on a holder that has not noticed. Revoke
// reports whether there was a holder to revoke.
func (s *Store) Revoke(ctx context.Context, jobID, runID string) (bool, error) {
	if err := validateJobID(jobID); err != nil {
		return false, fmt.Errorf("leasing: revoke: %w", err)
	}
	n, err := s.cfg.Client.HDel(ctx, s.holdersKey(jobID), runID).Result()
	if err != nil {
		return false, fmt.Errorf("leasing: revoke job %s run %s: %w", jobID, runID, err)
	}
	return n > 0, nil
}

// held turns the 1/0 reply of renew, complete and release into an error.
func (s *Store) held(op string, l Lease, v any, err error) error {
	if err != nil {
		return fmt.Errorf("leasing: %s job %s run %s: %w", op, l.JobID, l.RunID, err)
	}
	switch n, _ := v.(int64); n {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("%s job %s run %s token %d: %w", op, l.JobID, l.RunID, l.Token, ErrLeaseLost)
	}
	return fmt.Errorf("leasing: %s job %s run %s: unexpected reply %v", op, l.JobID, l.RunID, v)
}

// flagsOf reads the script's flagged replies, one per request flag (1 when
// the key exists); nil for a request without flags.
func flagsOf(r Request, reply []any) []bool {
	if len(r.Flags) == 0 {
		return nil
	}
	flagged := make([]bool, len(r.Flags))
	for i := range flagged {
		if i < len(reply) {
			f, _ := reply[i].(int64)
			flagged[i] = f == 1
		}
	}
	return flagged
}
