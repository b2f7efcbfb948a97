package loadgen

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sundialhq/sundial/internal/lifecycle"
)

// Headers the runners send with every HTTP attempt (see
// sundial.v1.HttpTarget).
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerJobID          = "Sundial-Job-Id"
	headerFencingToken   = "Sundial-Fencing-Token"
	headerAttempt        = "Sundial-Attempt"
	// headerReplayed is set on the answer to a request whose key was
	// already applied.
	headerReplayed = "Idempotent-Replayed"
)

// DefaultEffectDuration is how long applying one effect takes by default:
// long enough that two executions of one run at the same time overlap.
const DefaultEffectDuration = 10 * time.Millisecond

// DownstreamConfig configures a Downstream.
type DownstreamConfig struct {
	// EffectDuration is how long applying one effect takes (the time
	// between the request being taken and the key being recorded as
	// applied). Default DefaultEffectDuration; negative: instantaneous.
	EffectDuration time.Duration
	// Effect, if set, applies the effect instead of waiting EffectDuration
	// (tests use it to hold an effect in flight). It is called without the
	// downstream's lock.
	Effect func(ctx context.Context, key string)
}

// keyState is what the Downstream knows of one idempotency key.
type keyState struct {
	applied bool // an application finished: the key's effect is done
	// applications counts the times the effect was applied (more than one
	// is a duplicate effect); sameAttempt is set when two overlapping
	// applications carried the same attempt number.
	applications uint32
	sameAttempt  bool
	attempts     []string // attempt numbers of the applications under way
	replays      uint32
}

// Downstream is the counting HTTP server the workload's jobs call. It
// models a downstream that honours the Idempotency-Key (the run id), as
// the design expects of every target:
//
//   - the first request with a key applies the effect, which takes
//     EffectDuration, then records the key as applied;
//   - a request whose key is already applied is answered as a replay (2xx,
//     header Idempotent-Replayed: true) without applying anything: a
//     redelivery, harmless by design;
//   - a request whose key is still being applied by another request in
//     flight applies the effect again: the downstream cannot tell it from a
//     new one, so this is a duplicate effect. Only two executions of one
//     run at the same time do this, which the runners' leases and fencing
//     must prevent.
//
// An effect that has started always completes, even if its caller goes
// away (a runner killed mid-call): the effect happened, only the answer is
// lost. The Downstream also notes, per job, requests whose fencing token is
// lower than one already seen: a holder acting after a later holder
// started.
type Downstream struct {
	cfg DownstreamConfig

	mu      sync.Mutex
	keys    map[string]*keyState
	fence   map[string]int64
	stale   int64
	missing int64
	total   int64

	life lifecycle.Lifecycle
	ln   net.Listener // set by Start
}

// NewDownstream returns a Downstream that is not serving yet; ServeHTTP may
// be used directly (tests) or Start serves it on an address.
func NewDownstream(cfg DownstreamConfig) *Downstream {
	cfg.EffectDuration = cmp.Or(cfg.EffectDuration, DefaultEffectDuration)
	return &Downstream{cfg: cfg, keys: map[string]*keyState{}, fence: map[string]int64{}}
}

// ServeHTTP takes one request.
func (d *Downstream) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	key := req.Header.Get(headerIdempotencyKey)
	if key == "" {
		d.mu.Lock()
		d.missing++
		d.mu.Unlock()
		http.Error(w, "Idempotency-Key is required", http.StatusBadRequest)
		return
	}
	token, _ := strconv.ParseInt(req.Header.Get(headerFencingToken), 10, 64)
	job := req.Header.Get(headerJobID)
	attempt := req.Header.Get(headerAttempt)

	d.mu.Lock()
	d.total++
	if token > 0 && job != "" {
		if token < d.fence[job] {
			d.stale++
		} else {
			d.fence[job] = token
		}
	}
	s := d.keys[key]
	if s == nil {
		s = &keyState{}
		d.keys[key] = s
	}
	if s.applied {
		s.replays++
		d.mu.Unlock()
		w.Header().Set(headerReplayed, "true")
		w.WriteHeader(http.StatusOK)
		return
	}
	// Not applied yet: if another request is applying it right now, the
	// downstream cannot know, and the effect is applied a second time.
	for _, a := range s.attempts {
		if a == attempt {
			s.sameAttempt = true
		}
	}
	s.applications++
	s.attempts = append(s.attempts, attempt)
	d.mu.Unlock()

	d.apply(context.WithoutCancel(req.Context()), key)

	d.mu.Lock()
	s.applied = true
	for i, a := range s.attempts {
		if a == attempt {
			s.attempts = append(s.attempts[:i], s.attempts[i+1:]...)
			break
		}
	}
	if len(s.attempts) == 0 {
		s.attempts = nil // a million keys: keep only what is in flight
	}
	d.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// apply applies the effect of key: cfg.Effect, or a wait of
// EffectDuration.
func (d *Downstream) apply(ctx context.Context, key string) {
	if d.cfg.Effect != nil {
		d.cfg.Effect(ctx, key)
		return
	}
	if d.cfg.EffectDuration > 0 {
		t := time.NewTimer(d.cfg.EffectDuration)
		defer t.Stop()
		<-t.C
	}
}

// Start serves on addr ("127.0.0.1:0" picks a port) until Stop.
func (d *Downstream) Start(ctx context.Context, addr string) error {
	err := d.life.Start(ctx, func(ctx context.Context, run *lifecycle.Run) error {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		d.ln = ln
		srv := &http.Server{Handler: d, ReadHeaderTimeout: 5 * time.Second}
		// Serve only fails when the listener does; Stop reports nothing
		// more useful.
		run.Go(func(context.Context) { _ = srv.Serve(ln) })
		// Close ends Serve at once, without waiting for the requests in
		// progress.
		run.Go(func(ctx context.Context) {
			<-ctx.Done()
			_ = srv.Close()
		})
		return nil
	})
	if err != nil {
		return fmt.Errorf("downstream: %w", err)
	}
	return nil
}

// URL is the address jobs call; valid after Start.
func (d *Downstream) URL() string { return "http://" + d.ln.Addr().String() + "/effect" }

// Stop closes the server and its connections and waits for it. Safe
// before Start and more than once.
func (d *Downstream) Stop() { d.life.Stop() }

// Effects are the downstream's counts.
type Effects struct {
	// Requests that carried an idempotency key.
	Requests int64 `json:"requests"`
	// Keys: distinct idempotency keys whose effect was applied.
	Keys int64 `json:"keys"`
	// EffectDurationMs is how long one effect took to apply.
	EffectDurationMs float64 `json:"effect_duration_ms"`
	// Redeliveries: requests whose key was already applied, answered as a
	// replay without applying the effect again (a run delivered or retried
	// again after its effect: at-least-once delivery, absorbed by the key).
	Redeliveries int64 `json:"redeliveries"`
	// RedeliveredKeys: distinct keys that had at least one redelivery.
	RedeliveredKeys int64 `json:"redelivered_keys"`
	// DuplicateEffects: keys whose effect was applied more than once: a
	// request arrived while another request with the key was still being
	// applied, so the downstream could not recognise it (two executions of
	// one run at the same time).
	DuplicateEffects int64 `json:"duplicate_effects"`
	// DuplicateSameAttempt: of the duplicate effects, keys where the
	// overlapping requests carried the same attempt (Sundial-Attempt): two
	// executions of one attempt, or one execution sending its request twice.
	DuplicateSameAttempt int64 `json:"duplicate_same_attempt"`
	// StaleFencing: requests whose fencing token was below the highest
	// already seen for their job.
	StaleFencing int64 `json:"stale_fencing"`
	// MissingKey: requests without an idempotency key (refused).
	MissingKey int64 `json:"missing_key"`
}

// Effects returns the counts so far.
func (d *Downstream) Effects() Effects {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := Effects{Requests: d.total, StaleFencing: d.stale, MissingKey: d.missing,
		EffectDurationMs: float64(max(d.cfg.EffectDuration, 0)) / float64(time.Millisecond)}
	if d.cfg.Effect != nil {
		e.EffectDurationMs = 0
	}
	for _, s := range d.keys {
		if s.applications > 0 {
			e.Keys++
		}
		if s.applications > 1 {
			e.DuplicateEffects++
			if s.sameAttempt {
				e.DuplicateSameAttempt++
			}
		}
		if s.replays > 0 {
			e.Redeliveries += int64(s.replays)
			e.RedeliveredKeys++
		}
	}
	return e
}
