package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Headers the runners send with every HTTP attempt (see
// sundial.v1.HttpTarget).
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerJobID          = "Sundial-Job-Id"
	headerFencingToken   = "Sundial-Fencing-Token"
	headerAttempt        = "Sundial-Attempt"
)

// Downstream is the counting HTTP server the workload's jobs call: it
// applies each request's effect (counts it) by its Idempotency-Key, the run
// id, so that a key applied more than once is a duplicate effect. It also
// notes, per job, requests whose fencing token is lower than one already
// seen: a holder acting after a later holder started.
type Downstream struct {
	mu      sync.Mutex
	applied map[string]uint32
	// perAttempt counts applications of (key, attempt): a key applied twice
	// in one attempt was sent twice by one execution or executed twice; in
	// two attempts, the runner retried after a failure it could not tell
	// from a lost response.
	perAttempt map[string]uint32
	fence      map[string]int64
	stale      int64
	missing    int64
	total      int64

	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// NewDownstream returns a Downstream that is not serving yet; ServeHTTP may
// be used directly (tests) or Start serves it on an address.
func NewDownstream() *Downstream {
	return &Downstream{applied: map[string]uint32{}, perAttempt: map[string]uint32{}, fence: map[string]int64{}}
}

// ServeHTTP applies one request.
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
	d.mu.Lock()
	d.total++
	d.applied[key]++
	d.perAttempt[key+"#"+req.Header.Get(headerAttempt)]++
	if token > 0 && job != "" {
		if token < d.fence[job] {
			d.stale++
		} else {
			d.fence[job] = token
		}
	}
	d.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// Start serves on addr ("127.0.0.1:0" picks a port) until Stop.
func (d *Downstream) Start(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("downstream: listen on %s: %w", addr, err)
	}
	d.ln = ln
	d.srv = &http.Server{Handler: d, ReadHeaderTimeout: 5 * time.Second}
	d.done = make(chan struct{})
	go func() {
		defer close(d.done)
		if err := d.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // Serve only fails when the listener does; Stop reports nothing more useful
		}
	}()
	return nil
}

// URL is the address jobs call; valid after Start.
func (d *Downstream) URL() string { return "http://" + d.ln.Addr().String() + "/effect" }

// Stop closes the server and its connections and waits for it. Safe
// before Start.
func (d *Downstream) Stop() {
	if d.srv == nil {
		return
	}
	_ = d.srv.Close()
	<-d.done
}

// Effects are the downstream's counts.
type Effects struct {
	// Requests that carried an idempotency key.
	Requests int64 `json:"requests"`
	// Keys: distinct idempotency keys applied.
	Keys int64 `json:"keys"`
	// DuplicateEffects: keys applied more than once.
	DuplicateEffects int64 `json:"duplicate_effects"`
	// DuplicateSameAttempt: keys applied more than once within one attempt
	// (Sundial-Attempt header): a request sent twice by one execution (an
	// HTTP client retrying) or two executions of the attempt.
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
	e := Effects{Requests: d.total, Keys: int64(len(d.applied)), StaleFencing: d.stale, MissingKey: d.missing}
	for _, n := range d.applied {
		if n > 1 {
			e.DuplicateEffects++
		}
	}
	seen := map[string]bool{}
	for ka, n := range d.perAttempt {
		if n > 1 {
			key := ka[:strings.LastIndexByte(ka, '#')]
			if !seen[key] {
				seen[key] = true
				e.DuplicateSameAttempt++
			}
		}
	}
	return e
}
