package logtail

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults of Bounds.
const (
	DefaultEvery        = time.Second
	DefaultChunkBytes   = 16 << 10
	DefaultAttemptBytes = 1 << 20
	DefaultRetain       = 10 * time.Minute
)

// MaxEntries is about how many entries a stream keeps (Redis trims it
// approximately): the oldest chunks of a long attempt go first.
const MaxEntries = 4096

// Bounds bound what a runner ships of one attempt's log. The zero value
// is the defaults.
type Bounds struct {
	// Every is how often the shipper writes what the attempts logged: at
	// most one stream entry per attempt per Every, and how late a tail
	// shows a line. Default DefaultEvery.
	Every time.Duration
	// ChunkBytes bounds one entry of one attempt (what it logged within
	// one Every): lines past it until the next write are counted as
	// dropped. With Every, the rate of one attempt's tail: ChunkBytes per
	// Every. Default DefaultChunkBytes.
	ChunkBytes int
	// AttemptBytes bounds what is shipped of one attempt in all; lines
	// past it are counted, not shipped. Default DefaultAttemptBytes.
	AttemptBytes int
	// Retain is how long Redis keeps an attempt's log after its last
	// write; a tail of an attempt whose runner died ends then at the
	// latest. Default DefaultRetain.
	Retain time.Duration
}

// Validate reports every bad value.
func (b Bounds) Validate() error {
	var errs []error
	if b.Every < 0 {
		errs = append(errs, fmt.Errorf("log tail: every %v: must not be negative", b.Every))
	}
	if b.ChunkBytes < 0 {
		errs = append(errs, fmt.Errorf("log tail: chunk bytes %d: must not be negative", b.ChunkBytes))
	}
	if b.AttemptBytes < 0 {
		errs = append(errs, fmt.Errorf("log tail: attempt bytes %d: must not be negative", b.AttemptBytes))
	}
	if b.Retain < 0 {
		errs = append(errs, fmt.Errorf("log tail: retain %v: must not be negative", b.Retain))
	}
	if b.Retain > 0 && b.Retain < cmp.Or(b.Every, DefaultEvery) {
		errs = append(errs, fmt.Errorf("log tail: retain %v: must be at least every (%v)", b.Retain, cmp.Or(b.Every, DefaultEvery)))
	}
	return errors.Join(errs...)
}

// WithDefaults returns b with every zero field set to its default.
func (b Bounds) WithDefaults() Bounds {
	b.Every = cmp.Or(b.Every, DefaultEvery)
	b.ChunkBytes = cmp.Or(b.ChunkBytes, DefaultChunkBytes)
	b.AttemptBytes = cmp.Or(b.AttemptBytes, DefaultAttemptBytes)
	b.Retain = cmp.Or(b.Retain, DefaultRetain)
	return b
}

// admit decides whether a line of n bytes is shipped, given the bytes
// already in the pending chunk and shipped in all: it is when both stay
// within their bounds. A line is counted with its newline.
func admit(b Bounds, chunk, shipped, n int) bool {
	n++
	return chunk+n <= b.ChunkBytes && shipped+n <= b.AttemptBytes
}

// Pending is what one attempt logged since its last chunk was taken,
// within Bounds: the lines admitted and the count of those left out. A
// Tail keeps one before it writes to Redis; a team's worker (package
// worker) keeps one per attempt before it sends the lines to the worker
// gateway, so that both bound an attempt's log by the same rule. Not safe
// for concurrent use: its owner locks. The zero value admits nothing; use
// NewPending.
type Pending struct {
	bounds  Bounds
	lines   []string
	chunk   int   // bytes of lines
	shipped int   // bytes admitted in all, taken or not
	dropped int64 // lines left out since the last Take
}

// NewPending returns an empty Pending bounded by b (zero fields are the
// defaults).
func NewPending(b Bounds) Pending { return Pending{bounds: b.WithDefaults()} }

// Add keeps line when it fits the bounds, and counts it as left out
// otherwise.
func (p *Pending) Add(line string) {
	if admit(p.bounds, p.chunk, p.shipped, len(line)) {
		p.lines = append(p.lines, line)
		p.chunk += len(line) + 1
		p.shipped += len(line) + 1
		return
	}
	p.Skip(1)
}

// Skip counts n lines left out before they reached p (a worker's own
// bounds); the count saturates rather than wraps.
func (p *Pending) Skip(n int64) {
	if n <= 0 {
		return
	}
	if p.dropped > math.MaxInt64-n {
		p.dropped = math.MaxInt64
		return
	}
	p.dropped += n
}

// Empty reports whether nothing is pending: no line and no count.
func (p *Pending) Empty() bool { return len(p.lines) == 0 && p.dropped == 0 }

// Take returns the pending lines and the count of those left out, and
// starts the next chunk; what was admitted in all still counts toward
// Bounds.AttemptBytes.
func (p *Pending) Take() (lines []string, dropped int64) {
	lines, dropped = p.lines, p.dropped
	p.lines, p.chunk, p.dropped = nil, 0, 0
	return lines, dropped
}
