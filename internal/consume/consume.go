package consume

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/sundialhq/sundial/internal/backoff"
)

// Handler handles one record and returns the records to produce in answer
// (none is fine). It must not fail: transient errors are retried inside it
// until ctx ends, and a bad record becomes an answer saying so. When ctx
// ends the handler returns promptly; its answers are then discarded and the
// record is redelivered later.
type Handler func(ctx context.Context, rec *kgo.Record) []*kgo.Record

// GroupOptions returns the consumer options the client given to Run needs:
// the group and topics, manual commits and rebalances blocked during a poll.
// A group without committed offsets starts at the beginning of each
// partition: a registry must read every definition.
func GroupOptions(group string, topics ...string) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		Balancers(),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
}

// RegexGroupOptions is GroupOptions for the topics matching any of patterns
// (Go regular expressions) and none of exclude. Topics that appear later are
// picked up at the next metadata refresh, every refresh, and consumed from
// their start like the others.
func RegexGroupOptions(group string, refresh time.Duration, patterns, exclude []string) []kgo.Opt {
	opts := GroupOptions(group, patterns...)
	opts = append(opts, kgo.ConsumeRegex(), kgo.ConsumeExcludeTopics(exclude...), kgo.MetadataMaxAge(refresh))
	// The client refuses a max age below its min age (5 s by default):
	// a shorter refresh lowers both.
	if refresh < 5*time.Second {
		opts = append(opts, kgo.MetadataMinAge(refresh))
	}
	return opts
}

// Loop is one consumer's processing loop.
type Loop struct {
	// Client consumes (with GroupOptions) and produces the answers.
	Client *kgo.Client
	// Handle handles each record.
	Handle Handler
	// Concurrency is how many keys are handled at once.
	Concurrency int
	// MaxPoll bounds the records taken per poll.
	MaxPoll int
	// Backoff bounds the retries of answers and commits.
	Backoff backoff.Config
	// Logger receives errors worth a look.
	Logger *slog.Logger
	// OnCommitted, if set, is called with the number of records of each poll
	// whose offsets were committed.
	OnCommitted func(n int)
}

// Run polls and processes until ctx ends or the client is closed.
func (l *Loop) Run(ctx context.Context) {
	for {
		fetches := l.Client.PollRecords(ctx, l.MaxPoll)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			l.Client.AllowRebalance()
			return
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) {
				l.Logger.Warn("fetch failed; the client retries", "topic", topic, "partition", partition, "err", err)
			}
		})
		recs := fetches.Records()
		if len(recs) > 0 && l.process(ctx, recs) {
			l.commit(ctx, recs)
		}
		l.Client.AllowRebalance()
	}
}

// commitGrace bounds how long a commit may go on after ctx ended.
const commitGrace = 5 * time.Second

// commit commits the offsets of a poll whose answers are all out. A Stop
// that comes in between does not cancel it at once: the commit goes on for
// up to commitGrace, so that a graceful restart does not handle and answer
// those records a second time. The partitions cannot have moved meanwhile:
// the rebalance waits for this poll (BlockRebalanceOnPoll).
func (l *Loop) commit(ctx context.Context, recs []*kgo.Record) {
	commitCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(commitGrace, cancel)
		context.AfterFunc(commitCtx, func() { t.Stop() })
	})
	defer stop()
	err := CommitPoll(commitCtx, l.Client, l.Backoff, recs)
	if err != nil {
		l.Logger.Warn("commit failed; the poll's records will be handled again", "records", len(recs), "err", err)
		return
	}
	if l.OnCommitted != nil {
		l.OnCommitted(len(recs))
	}
}

// CommitPoll commits the offsets of recs, a poll taken with
// BlockRebalanceOnPoll, retrying with b until it succeeds, ctx ends, or
// the group says this member's generation is over (GenerationEnded). Such a
// commit can never succeed: the client rejoins only once the poll allows a
// rebalance, and the poll waits for the commit. It is abandoned instead, so
// that the caller allows the rebalance: a later commit covers the records if
// the member keeps their partitions, and their next owner handles them
// again if not, as after a crash.
func CommitPoll(ctx context.Context, cl *kgo.Client, b backoff.Config, recs []*kgo.Record) error {
	b.Permanent = GenerationEnded
	return backoff.Retry(ctx, b, func() error { return cl.CommitRecords(ctx, recs...) })
}

// GenerationEnded says whether a commit failed because the group no longer
// counts this member's generation: the member was dropped (its session
// expired while Kafka was away, or an operator removed it), fenced by
// another member with its instance id, or the group is rebalancing.
func GenerationEnded(err error) bool {
	for _, e := range []*kerr.Error{
		kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.RebalanceInProgress,
		kerr.FencedInstanceID, kerr.FencedMemberEpoch, kerr.StaleMemberEpoch,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// process handles recs and waits for their answers; false means ctx ended
// first and nothing may be committed.
func (l *Loop) process(ctx context.Context, recs []*kgo.Record) bool {
	type keyID struct {
		topic     string
		partition int32
		key       string
	}
	var order []keyID
	byKey := map[keyID][]*kgo.Record{}
	for _, r := range recs {
		k := keyID{r.Topic, r.Partition, string(r.Key)}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []*kgo.Record
	)
	produce := func(out *kgo.Record) {
		wg.Add(1)
		l.Client.Produce(ctx, out, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				failed = append(failed, r)
				mu.Unlock()
			}
		})
	}

	g := &errgroup.Group{}
	g.SetLimit(l.Concurrency)
	for _, k := range order {
		g.Go(func() error {
			for _, rec := range byKey[k] {
				if err := ctx.Err(); err != nil {
					return err // the poll will not be committed
				}
				for _, out := range l.Handle(ctx, rec) {
					produce(out)
				}
			}
			return nil
		})
	}
	_ = g.Wait() // only ctx ending fails a closure; checked below
	wg.Wait()
	if ctx.Err() != nil {
		return false
	}
	// Kafka refused some answers (after the client's own retries): produce
	// them again, one at a time, until it takes them or ctx ends.
	for _, r := range failed {
		err := backoff.Retry(ctx, l.Backoff, func() error {
			return l.Client.ProduceSync(ctx, r).FirstErr()
		})
		if err != nil {
			return false
		}
	}
	return true
}
