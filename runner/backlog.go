package runner

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/commit"
	"github.com/sundialhq/sundial/runner/priority"
)

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// partState is the runner's bookkeeping of one assigned partition. gen tells
// the records of this assignment from those of an earlier assignment of the
// same partition, whose completions no longer count.
type partState struct {
	tracker *commit.Partition
	gen     uint64
	paused  bool
}

// record is a fetched run waiting for or held by a worker.
type record struct {
	rec   *kgo.Record
	tp    tp
	gen   uint64
	level int
	// run is the decoded run, nil when the record does not decode
	// (process reports it); team is its owning team, its lane in the queue.
	run  *sundialv1.Run
	team string
	// backoff is the wait before the record was last put back in its
	// queue (retryLater); it doubles with every return.
	backoff time.Duration
	// routed is set when a router chose this runner for the run: it is
	// executed here, not routed again.
	routed bool
	// received is when the runner fetched the record (RunEvent's
	// received_time).
	received time.Time
}

// backlog holds what the runner fetched and has not finished: the
// bookkeeping of each assigned partition (its offsets, commit.Partition) and
// the priority queues the workers take from, under one lock. It pauses a
// priority's topic or a partition that holds too many records and resumes
// it at half (pauseChange), so that memory is bounded whatever the backlog.
// The methods named ...Locked are called with mu held.
type backlog struct {
	cfg *Config
	log *slog.Logger
	m   *metrics
	// consumer is the group consumer whose fetches are paused; set by
	// Runner.start before the loops start.
	consumer *kgo.Client
	notify   chan struct{} // a record was queued; capacity 1

	// mu guards everything below it.
	mu           sync.Mutex
	parts        map[tp]*partState
	gen          uint64
	queues       *priority.Queues[*record]
	pausedTopics map[string]bool
	// killed is written under mu and read without it on the hot path.
	killed atomic.Bool
}

func newBacklog(cfg *Config, log *slog.Logger, m *metrics, q *priority.Queues[*record]) *backlog {
	return &backlog{cfg: cfg, log: log, m: m, notify: make(chan struct{}, 1),
		parts: map[tp]*partState{}, queues: q, pausedTopics: map[string]bool{}}
}

// reset empties the backlog for a new run of the Runner: what an earlier run
// fetched, queued or paused belongs to a group membership that has ended.
func (b *backlog) reset(q *priority.Queues[*record]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.parts = map[tp]*partState{}
	b.queues = q
	b.pausedTopics = map[string]bool{}
	b.killed.Store(false)
}

// kill marks the runner killed (a crash, for tests): nothing more is
// finished, queued or committed.
func (b *backlog) kill() {
	b.mu.Lock()
	b.killed.Store(true)
	b.mu.Unlock()
}

// add tracks the fetched records and queues them, but for those route
// says ask for an executor, which it returns for the routers. level is the
// queue of a topic's records. It returns how many it queued.
func (b *backlog) add(fetched []*record, level func(topic string) int, route func(*record) bool) (toRoute []*record, queued int) {
	now := b.cfg.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, fr := range fetched {
		rec := fr.rec
		key := tp{rec.Topic, rec.Partition}
		ps := b.parts[key]
		if ps == nil {
			// Assigned without the callback having run (cannot happen
			// with OnPartitionsAssigned set, kept for safety).
			ps = b.newPartLocked(key)
		}
		if !ps.tracker.Add(rec.Offset) {
			continue
		}
		fr.tp, fr.gen, fr.level = key, ps.gen, level(rec.Topic)
		if route(fr) {
			toRoute = append(toRoute, fr)
			continue
		}
		b.queues.PushGroup(fr.level, fr.team, fr, now)
		queued++
	}
	b.adjustPausesLocked()
	return toRoute, queued
}

// assign starts the bookkeeping of assigned partitions.
func (b *backlog) assign(assigned map[string][]int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for topic, ps := range assigned {
		for _, p := range ps {
			b.newPartLocked(tp{topic, p})
		}
	}
}

// committable returns the watermark of every partition that moved since
// its last commit, none once the runner was killed.
func (b *backlog) committable() map[string]map[int32]kgo.EpochOffset {
	b.mu.Lock()
	defer b.mu.Unlock()
	offsets := map[string]map[int32]kgo.EpochOffset{}
	if b.killed.Load() {
		return offsets
	}
	for key, ps := range b.parts {
		if off, ok := ps.tracker.Committable(); ok {
			if offsets[key.topic] == nil {
				offsets[key.topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[key.topic][key.partition] = kgo.EpochOffset{Epoch: -1, Offset: off}
		}
	}
	return offsets
}

// markCommitted records the offsets the broker accepted in resp.
func (b *backlog) markCommitted(offsets map[string]map[int32]kgo.EpochOffset, resp *kmsg.OffsetCommitResponse) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				b.m.commitErrors.Inc()
				b.log.Warn("offset commit refused", "topic", t.Topic, "partition", p.Partition, "code", p.ErrorCode)
				continue
			}
			if st := b.parts[tp{t.Topic, p.Partition}]; st != nil {
				st.tracker.MarkCommitted(offsets[t.Topic][p.Partition].Offset)
			}
		}
	}
}

// wake tells an idle worker that a record was queued.
func (b *backlog) wake() {
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

// newPartLocked starts the bookkeeping of partition key under a new
// generation.
func (b *backlog) newPartLocked(key tp) *partState {
	b.gen++
	ps := &partState{tracker: commit.NewPartition(), gen: b.gen}
	b.parts[key] = ps
	return ps
}

// pauseStep is what becomes of a paused or fetching topic or partition.
type pauseStep int

const (
	keepAsIs pauseStep = iota
	pauseNow
	resumeNow
)

// pauseChange decides whether a topic or partition holding n records, paused
// or not, pauses (at bound) or resumes (at half of bound). It does no I/O.
func pauseChange(paused bool, n, bound int) pauseStep {
	switch {
	case !paused && n >= bound:
		return pauseNow
	case paused && n <= bound/2:
		return resumeNow
	}
	return keepAsIs
}

// adjustPausesLocked pauses a priority's topic whose queue is full and a
// partition whose tracked offsets reached the bound, and resumes them at
// half, so that memory is bounded whatever the backlog.
func (b *backlog) adjustPausesLocked() {
	for i, p := range topics.Priorities() {
		name := b.cfg.Topics.Runs(p)
		b.m.queuedBy[i].Set(float64(b.queues.Len(i)))
		// A team's runs beyond TeamQueueCapacity do not count: one team's
		// herd must not pause the topic for the others.
		n := b.queues.CappedLen(i, b.cfg.TeamQueueCapacity)
		switch pauseChange(b.pausedTopics[name], n, b.cfg.QueueCapacity) {
		case pauseNow:
			b.pausedTopics[name] = true
			b.consumer.PauseFetchTopics(name)
		case resumeNow:
			delete(b.pausedTopics, name)
			b.consumer.ResumeFetchTopics(name)
		case keepAsIs:
		}
	}
	for key, ps := range b.parts {
		n := ps.tracker.Pending()
		switch pauseChange(ps.paused, n, b.cfg.MaxPendingPerPartition) {
		case pauseNow:
			ps.paused = true
			b.consumer.PauseFetchPartitions(map[string][]int32{key.topic: {key.partition}})
			b.log.Info("partition paused: its commit watermark is held by an unfinished run", "topic", key.topic, "partition", key.partition, "pending", n)
		case resumeNow:
			ps.paused = false
			b.consumer.ResumeFetchPartitions(map[string][]int32{key.topic: {key.partition}})
		case keepAsIs:
		}
	}
}

// next blocks until a queued record is available or ctx ends (nil).
func (b *backlog) next(ctx context.Context) *record {
	for {
		b.mu.Lock()
		var rec *record
		var ok bool
		if b.cfg.PoolBlocking == BlockingFIFO {
			rec, _, ok = b.queues.PopOldest()
		} else {
			rec, _, ok = b.queues.Pop(b.cfg.Now())
		}
		more := b.queues.Size() > 0
		if ok {
			b.adjustPausesLocked()
		}
		b.mu.Unlock()
		if ok {
			if more {
				b.wake() // pass the baton to another idle worker
			}
			return rec
		}
		select {
		case <-ctx.Done():
			return nil
		case <-b.notify:
		}
	}
}

// requeue puts rec back in its queue and wakes a worker, unless the runner
// was killed or no longer owns rec's partition as when rec was fetched.
func (b *backlog) requeue(rec *record) {
	b.mu.Lock()
	ps := b.parts[rec.tp]
	ok := !b.killed.Load() && ps != nil && ps.gen == rec.gen
	if ok {
		b.queues.PushGroup(rec.level, rec.team, rec, b.cfg.Now())
		b.adjustPausesLocked()
	}
	b.mu.Unlock()
	if ok {
		b.wake()
	}
}

// owns reports whether rec's partition is still assigned as it was when rec
// was fetched, and the runner was not killed.
func (b *backlog) owns(rec *record) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	ps := b.parts[rec.tp]
	return !b.killed.Load() && ps != nil && ps.gen == rec.gen
}

// finish marks rec's offset finished, so the watermark may pass it.
func (b *backlog) finish(rec *record) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.killed.Load() {
		return
	}
	ps := b.parts[rec.tp]
	if ps == nil || ps.gen != rec.gen {
		b.log.Debug("finished record of a revoked partition", "topic", rec.tp.topic, "partition", rec.tp.partition, "offset", rec.rec.Offset)
		return // the partition was revoked meanwhile; its new owner redoes it
	}
	if !ps.tracker.Done(rec.rec.Offset) {
		b.log.Warn("finished record was not tracked", "topic", rec.tp.topic, "partition", rec.tp.partition, "offset", rec.rec.Offset)
	}
	b.adjustPausesLocked()
}

func (b *backlog) dropPartitions(parts map[string][]int32, collect bool) map[string]map[int32]kgo.EpochOffset {
	b.mu.Lock()
	defer b.mu.Unlock()
	offsets := map[string]map[int32]kgo.EpochOffset{}
	gone := map[tp]uint64{}
	var resume map[string][]int32
	for topic, ps := range parts {
		for _, p := range ps {
			key := tp{topic, p}
			st := b.parts[key]
			if st == nil {
				continue
			}
			if collect {
				if off, ok := st.tracker.Committable(); ok {
					if offsets[topic] == nil {
						offsets[topic] = map[int32]kgo.EpochOffset{}
					}
					offsets[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: off}
				}
			}
			if st.paused {
				if resume == nil {
					resume = map[string][]int32{}
				}
				resume[topic] = append(resume[topic], p)
			}
			gone[key] = st.gen
			delete(b.parts, key)
		}
	}
	if resume != nil {
		b.consumer.ResumeFetchPartitions(resume)
	}
	b.queues.Remove(func(rec *record) bool {
		g, ok := gone[rec.tp]
		return ok && g == rec.gen
	})
	b.adjustPausesLocked()
	return offsets
}

// committedView returns each tracked partition's committable offset, for
// tests.
func (b *backlog) committedView() map[tp]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[tp]int64{}
	for k, ps := range b.parts {
		off, _ := ps.tracker.Committable()
		out[k] = off
	}
	return out
}

// debugState describes the queues and partitions, for test failures.
func (b *backlog) debugState() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := fmt.Sprintf("queued %d/%d/%d paused topics %v;", b.queues.Len(0), b.queues.Len(1), b.queues.Len(2), b.pausedTopics)
	var q []int64
	b.queues.Remove(func(rec *record) bool { q = append(q, rec.rec.Offset); return false })
	s += fmt.Sprintf(" queued offsets %v;", q)
	for k, ps := range b.parts {
		off, _ := ps.tracker.Committable()
		if ps.tracker.Pending() == 0 {
			continue
		}
		s += fmt.Sprintf(" %s/%d: pending %d unfinished %v watermark %d paused %v;", k.topic, k.partition, ps.tracker.Pending(), ps.tracker.UnfinishedOffsets(), off, ps.paused)
	}
	return s + fmt.Sprintf(" client paused %v", b.consumer.PauseFetchPartitions(nil))
}
