package logtail

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fields of a stream entry.
const (
	fieldLines   = "l" // a JSON array of the lines, oldest first
	fieldDropped = "d" // lines left out within the chunk's time
	fieldEnd     = "e" // "1" on the attempt's last entry
)

// ShipperConfig configures a Shipper.
type ShipperConfig struct {
	// Redis receives the streams. Required.
	Redis redis.UniversalClient
	// KeyPrefix starts every stream's key: the runner's key prefix.
	KeyPrefix string
	// Bounds bound what is shipped; zero fields are the defaults.
	Bounds Bounds
	// Logger receives the failed writes; nil discards.
	Logger *slog.Logger
}

// Shipper writes the log lines of a runner's running attempts to Redis.
// Its Run is its one goroutine; Tails are opened and closed by the
// attempts.
type Shipper struct {
	cfg ShipperConfig

	mu    sync.Mutex
	dirty map[*Tail]struct{} // tails with something to write
}

// NewShipper returns a Shipper, or cfg's errors.
func NewShipper(cfg ShipperConfig) (*Shipper, error) {
	var errs []error
	if cfg.Redis == nil {
		errs = append(errs, errors.New("log tail shipper: redis: required"))
	}
	errs = append(errs, cfg.Bounds.Validate())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg.Bounds = cfg.Bounds.WithDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Shipper{cfg: cfg, dirty: map[*Tail]struct{}{}}, nil
}

// Open returns the Tail of one attempt. A nil Shipper returns a nil
// Tail, whose methods do nothing.
func (s *Shipper) Open(jobID, runID string, attempt uint32) *Tail {
	if s == nil {
		return nil
	}
	return &Tail{s: s, jobID: jobID, runID: runID, attempt: attempt, pending: NewPending(s.cfg.Bounds)}
}

// Run writes what the attempts logged every Bounds.Every until ctx ends,
// then once more, so that the ends of the attempts that finished before
// are written.
func (s *Shipper) Run(ctx context.Context) {
	tick := time.NewTicker(s.cfg.Bounds.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			s.Flush(last)
			cancel()
			return
		case <-tick.C:
			s.Flush(ctx)
		}
	}
}

// Flush writes every Tail with something new in one pipelined round
// trip. A failure is logged: those lines are lost to the tails (never to
// the attempts' final events).
func (s *Shipper) Flush(ctx context.Context) {
	s.mu.Lock()
	tails := s.dirty
	if len(tails) == 0 {
		s.mu.Unlock()
		return
	}
	s.dirty = map[*Tail]struct{}{}
	s.mu.Unlock()
	pipe := s.cfg.Redis.Pipeline()
	n := 0
	for t := range tails {
		e, ok := t.take()
		if !ok {
			continue
		}
		key := Key(s.cfg.KeyPrefix, t.jobID, t.runID, t.attempt)
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, MaxLen: MaxEntries, Approx: true, Values: e.values()})
		pipe.PExpire(ctx, key, s.cfg.Bounds.Retain)
		n++
	}
	if n == 0 {
		return
	}
	if _, err := pipe.Exec(ctx); err != nil {
		s.cfg.Logger.Warn("log tail: write failed; live tails miss these lines (the final logs keep them)", "attempts", n, "err", err)
	}
}

func (s *Shipper) mark(t *Tail) {
	s.mu.Lock()
	s.dirty[t] = struct{}{}
	s.mu.Unlock()
}

// Tail is what one attempt ships of its log. A nil Tail does nothing.
type Tail struct {
	s *Shipper
	// The attempt's stream key is made from these when something is
	// written, off the attempt's path: most attempts log nothing.
	jobID, runID string
	attempt      uint32

	mu      sync.Mutex
	pending Pending
	marked  bool // in s.dirty
	wrote   bool // an entry was taken
	closed  bool // the attempt ended
	done    bool // the end was taken
}

// Line ships one line the attempt logged, within the Bounds; it never
// waits on Redis.
func (t *Tail) Line(line string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.pending.Add(line)
	t.markLocked()
}

// Skipped counts n lines the attempt logged that were left out before
// they reached the Tail (a team's worker's own bounds, the same as the
// Tail's): the tail reports them as dropped.
func (t *Tail) Skipped(n int64) {
	if t == nil || n <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.pending.Skip(n)
	t.markLocked()
}

// Close says the attempt ended: its last lines and its end are written
// with the Shipper's next write. An attempt that shipped nothing writes
// nothing. Lines after Close are ignored.
func (t *Tail) Close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.closed = true
	if t.wrote || !t.pending.Empty() {
		t.markLocked()
	}
}

func (t *Tail) markLocked() {
	if !t.marked {
		t.marked = true
		t.s.mark(t)
	}
}

// entry is one stream entry.
type entry struct {
	lines   []string
	dropped int64
	end     bool
}

// take returns the entry to write and resets the pending chunk; false
// when there is nothing to write.
func (t *Tail) take() (entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.marked = false
	end := t.closed && !t.done
	if t.pending.Empty() && !end {
		return entry{}, false
	}
	e := entry{end: end}
	e.lines, e.dropped = t.pending.Take()
	t.done = t.done || e.end
	t.wrote = true
	return e, true
}

func (e entry) values() []any {
	v := make([]any, 0, 6)
	if len(e.lines) > 0 {
		b, _ := json.Marshal(e.lines) // []string always encodes
		v = append(v, fieldLines, string(b))
	}
	if e.dropped > 0 {
		v = append(v, fieldDropped, strconv.FormatInt(e.dropped, 10))
	}
	if e.end {
		v = append(v, fieldEnd, "1")
	}
	return v
}
