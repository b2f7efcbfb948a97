package dispatcher

// offsetTracker follows the wake-up records of one partition of
// sundial.shards and says up to which offset all of them are resolved (their
// entry fired, or found to lie beyond the loaded window). Only that prefix may
// be committed: a wake-up for an entry behind the watermark is the only trace
// of that entry, so committing past it before it fired would lose it in a
// crash. Offsets may arrive more than once (a redelivery after a rebalance);
// each arrival is resolved once.
type offsetTracker struct {
	// unresolved counts the arrivals of each offset not yet resolved, with
	// the leader epoch of the record.
	unresolved map[int64]pendingOffset
	// last is the highest offset seen and its leader epoch.
	last      int64
	lastEpoch int32
	seen      bool
}

type pendingOffset struct {
	count int
	epoch int32
}

func newOffsetTracker() offsetTracker {
	return offsetTracker{unresolved: map[int64]pendingOffset{}}
}

func (t *offsetTracker) add(offset int64, leaderEpoch int32) {
	p := t.unresolved[offset]
	p.count++
	p.epoch = leaderEpoch
	t.unresolved[offset] = p
	if !t.seen || offset > t.last {
		t.last, t.lastEpoch, t.seen = offset, leaderEpoch, true
	}
}

func (t *offsetTracker) resolve(offset int64) {
	p, ok := t.unresolved[offset]
	if !ok {
		return
	}
	if p.count--; p.count == 0 {
		delete(t.unresolved, offset)
		return
	}
	t.unresolved[offset] = p
}

// commitPoint returns the next offset to consume after the resolved prefix:
// the lowest unresolved offset, or one past the highest seen.
func (t *offsetTracker) commitPoint() (int64, int32, bool) {
	if !t.seen {
		return 0, 0, false
	}
	offset, epoch := t.last+1, t.lastEpoch
	for o, p := range t.unresolved {
		if o < offset {
			offset, epoch = o, p.epoch
		}
	}
	return offset, epoch, true
}
