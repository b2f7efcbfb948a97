package commit

import "sort"

// Partition tracks the records of one partition from the moment they are
// handed out until the watermark passes them.
type Partition struct {
	// offs and done are the tracked records in offset order, from the first
	// unfinished one (or the last finished ones not yet popped) on.
	offs []int64
	done []bool
	// watermark is one past the highest offset below which every tracked
	// record has finished; -1 until a record finished.
	watermark int64
	// committed is the last watermark reported by MarkCommitted; -1 for none.
	committed int64
	// last is the highest offset added; -1 for none.
	last int64
}

// NewPartition returns an empty tracker.
func NewPartition() *Partition {
	return &Partition{watermark: -1, committed: -1, last: -1}
}

// Add starts tracking offset off. Offsets must be added in increasing order;
// an offset not above the highest one added (a record fetched twice) is not
// tracked and Add returns false: the caller must not process it again.
func (p *Partition) Add(off int64) bool {
	if off <= p.last || off < 0 {
		return false
	}
	p.last = off
	p.offs = append(p.offs, off)
	p.done = append(p.done, false)
	return true
}

// Done marks offset off finished and advances the watermark over every
// finished record at the front. It returns false when off is not tracked
// (never added, or already passed by the watermark).
func (p *Partition) Done(off int64) bool {
	i := sort.Search(len(p.offs), func(i int) bool { return p.offs[i] >= off })
	if i == len(p.offs) || p.offs[i] != off || p.done[i] {
		return false
	}
	p.done[i] = true
	n := 0
	for n < len(p.offs) && p.done[n] {
		n++
	}
	if n > 0 {
		p.watermark = p.offs[n-1] + 1
		// Shift instead of reslicing forever, so the backing array does not
		// keep every offset ever tracked.
		p.offs = append(p.offs[:0], p.offs[n:]...)
		p.done = append(p.done[:0], p.done[n:]...)
	}
	return true
}

// Committable returns the offset to commit, one past the last record of the
// finished prefix, and whether it is above the last committed one.
func (p *Partition) Committable() (int64, bool) {
	return p.watermark, p.watermark > p.committed
}

// MarkCommitted records that off was committed. An offset not above the last
// committed one is ignored, so a late acknowledgement cannot move it back.
func (p *Partition) MarkCommitted(off int64) {
	if off > p.committed {
		p.committed = off
	}
}

// Pending is how many offsets are tracked and not yet passed by the
// watermark: unfinished records plus finished ones behind an unfinished one.
func (p *Partition) Pending() int { return len(p.offs) }

// Unfinished is how many tracked records have not finished.
func (p *Partition) Unfinished() int {
	n := 0
	for _, d := range p.done {
		if !d {
			n++
		}
	}
	return n
}

// UnfinishedOffsets lists the tracked offsets that have not finished, for
// diagnostics.
func (p *Partition) UnfinishedOffsets() []int64 {
	var out []int64
	for i, d := range p.done {
		if !d {
			out = append(out, p.offs[i])
		}
	}
	return out
}
