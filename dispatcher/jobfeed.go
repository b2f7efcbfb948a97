package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/backoff"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// feedInterval is how often the jobs feed checks that it has read
// sundial.jobs.status to the end, which is how fresh it says it is.
const feedInterval = 100 * time.Millisecond

// jobFeed follows sundial.jobs.status and drops from the job cache every job
// the registry answered a record for (stored a change, or found none: the
// key is all it looks at, so it needs no decoding and a needless drop costs
// one read). The registry answers a record after storing what it changed, so
// a job dropped on its answer is read again with the change.
//
// Freshness: the feed lists the topic's end offsets at t0, reads up to them,
// and then declares fresh = t0: every answer acknowledged before t0 lay below
// those offsets and has been applied.
//
// Where it starts: at the first offsets stamped at or after since = start
// minus the replay (Config.JobFeedReplay), so its first catch-up reads the
// answers of the replay and the change log starts at since, not at the
// dispatcher's start. Every record stamped at or after since lies at or
// after those offsets (Kafka finds the earliest such offset), and a change
// after a snapshot's CheckedAt is answered after it, so a snapshot checked
// since since (plus the skew allowance) may be trusted by a dispatcher that
// has just started: a restart does not turn a minute of firings into store
// reads. The topic is compacted, which removes an answer only when a later
// one of the same job, of a revision at least as high, is kept.
type jobFeed struct {
	cl     *kgo.Client
	adm    *kadm.Client
	topic  string
	cache  *jobCache
	now    func() time.Time
	since  time.Time
	m      *metrics
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
	stop   sync.Once
}

// startJobFeed starts following topic from the answers of the last replay.
// Its client has opts (the seed brokers and the dispatcher's Config.Kafka)
// and consumes no group. Stop ends it.
func startJobFeed(opts []kgo.Opt, topic string, cache *jobCache, now func() time.Time, replay time.Duration, m *metrics, log *slog.Logger) (*jobFeed, error) {
	cl, err := kgo.NewClient(append(opts, kgo.FetchMaxWait(feedInterval))...)
	if err != nil {
		return nil, fmt.Errorf("jobs feed: kafka client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &jobFeed{cl: cl, adm: kadm.NewClient(cl), topic: topic, cache: cache, now: now, since: now().Add(-replay),
		m: m, log: log, cancel: cancel, done: make(chan struct{})}
	go f.run(ctx)
	return f, nil
}

// Stop ends the feed and the cache's background reads, and waits for them;
// safe to call more than once.
func (f *jobFeed) Stop() {
	f.stop.Do(func() {
		f.cancel()
		<-f.done
		f.cl.Close()
		f.cache.close()
	})
}

func (f *jobFeed) run(ctx context.Context) {
	defer close(f.done)
	pos := map[int32]int64{} // next offset to read, per partition consumed
	retry := backoff.New(feedInterval, 5*time.Second)
	var swept time.Time
	for {
		t0 := f.now()
		err := f.catchUp(ctx, pos)
		if ctx.Err() != nil {
			return
		}
		wait := feedInterval
		if err != nil {
			f.log.Warn("jobs feed behind; firings read their jobs from the store meanwhile", "topic", f.topic, "err", err)
			wait = retry.Next()
		} else {
			f.cache.setFresh(t0, f.since)
			retry.Reset()
		}
		now := f.now()
		if now.Sub(swept) >= time.Second {
			f.cache.sweep(now)
			swept = now
		}
		if fresh := f.cache.freshness(); !fresh.IsZero() {
			f.m.jobFeedLag.Set(now.Sub(fresh).Seconds())
		}
		if !backoff.Sleep(ctx, wait) {
			return
		}
	}
}

// catchUp lists the end offsets and reads every partition up to them,
// giving up after a few seconds (the next round lists again).
func (f *jobFeed) catchUp(ctx context.Context, pos map[int32]int64) error {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	listed, err := f.adm.ListEndOffsets(lctx, f.topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	var replayed kadm.ListedOffsets
	if len(pos) == 0 {
		// The first round starts each partition at the answers of the
		// replay; a partition added later is read from its start.
		replayed, err = f.adm.ListOffsetsAfterMilli(lctx, f.since.UnixMilli(), f.topic)
		if err == nil {
			err = replayed.Error()
		}
		if err != nil {
			return fmt.Errorf("list the offsets of the replay: %w", err)
		}
	}
	ends := map[int32]int64{}
	add := map[int32]kgo.Offset{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Topic != f.topic {
			return
		}
		ends[o.Partition] = o.Offset
		if _, ok := pos[o.Partition]; !ok {
			// A partition missing from the replay's listing, or listed
			// with no offset, is read from its start: more than the
			// replay, never less.
			var start int64
			if r, ok := replayed.Lookup(f.topic, o.Partition); ok && r.Offset >= 0 {
				start = min(r.Offset, o.Offset)
			}
			pos[o.Partition] = start
			add[o.Partition] = kgo.NewOffset().At(start)
		}
	})
	if len(ends) == 0 {
		return fmt.Errorf("topic %s has no partitions", f.topic)
	}
	if len(add) > 0 {
		f.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{f.topic: add})
	}
	behind := func() bool {
		for p, end := range ends {
			if pos[p] < end {
				return true
			}
		}
		return false
	}
	for behind() {
		fs := f.cl.PollFetches(lctx)
		if lctx.Err() != nil {
			return fmt.Errorf("read to the end offsets: %w", lctx.Err())
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				ferr = err
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic != f.topic {
				return
			}
			f.cache.invalidate(string(r.Key))
			if rev, ok := answeredRevision(r); ok {
				f.cache.changed(string(r.Key), rev)
			}
			pos[r.Partition] = max(pos[r.Partition], r.Offset+1)
		})
		if ferr != nil {
			f.log.Debug("jobs feed fetch error", "err", ferr)
		}
	}
	return nil
}

// answeredRevision returns the revision a status record answers for (the
// offset of the definition or tombstone in sundial.jobs), when it may stand
// for a change of the stored job that a snapshot older than it must not
// outlive (snapshots.go):
//
//   - every accepted outcome but CREATED, UNCHANGED included, since a
//     registry that stored a change and died before answering answers it as
//     UNCHANGED when it processes the record again;
//   - not CREATED: the store found no row of the job, and a tombstone's own
//     answer (DELETED) covers an earlier incarnation, so no live snapshot is
//     older; a bulk registration of a million new jobs thus costs the log
//     nothing;
//   - a record not accepted (rejected, stale) stands for a change past its
//     revision: an earlier attempt at it may have written its first
//     occurrence before dying, and that entry must not be trusted.
//
// A record that does not decode counts as a change newer than any revision,
// so the job's snapshots are not trusted.
func answeredRevision(r *kgo.Record) (int64, bool) {
	var ct string
	for _, h := range r.Headers {
		if h.Key == sundialv1.HeaderContentType {
			ct = string(h.Value)
		}
	}
	st := &sundialv1.JobStatus{}
	if err := sundialv1.Decode(ct, r.Value, st); err != nil || st.GetSource() == nil {
		return math.MaxInt64, true
	}
	rev := st.GetSource().GetOffset()
	switch {
	case !st.GetAccepted():
		return rev + 1, true
	case st.GetOutcome() == sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED:
		return 0, false
	}
	return rev, true
}
