package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/consume"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/startoffsets"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// wakeBuffer is how many wake-ups may wait for a shard's owner before the
// poll loop waits for it.
const wakeBuffer = 1024

// Dispatcher owns a share of the shards (through the consumer group of
// sundial.shards) and fires their due entries. Create it with New, then
// Start; Stop leaves the group, draining each owned shard.
type Dispatcher struct {
	cfg Config
	m   *metrics
	log *slog.Logger
	// observe, if set, sees every acknowledged run (tests).
	observe func(runs []*sundialv1.Run, acked time.Time)

	life lifecycle.Lifecycle

	// Set by Start before the group client exists, read by its callbacks.
	cluster store.ClusterConfig
	jobs    *jobCache   // job definitions read ahead, kept current by the jobs feed
	next    *nextWriter // stores the owners' next occurrences (nextwriter.go)
	firers  *firers     // runs the owners' firings (firers.go)

	mu     sync.Mutex
	owners map[int32]*owner
	// aborted: the dispatcher is being dropped as if it crashed (tests):
	// partitions are given up without committing or advancing anything.
	// Start clears it.
	aborted bool
	wg      sync.WaitGroup

	// The start of shard partitions the group has no committed offset
	// for (see startUncommitted).
	readSince time.Time // wake-ups stamped from then on are read
	shardsID  [16]byte  // the topic id of sundial.shards
	startMu   sync.Mutex
	startCl   *kgo.Client // the client that fetched the group's offsets
	noCommit  []int32     // shard partitions just fetched without a commit
}

// New checks the configuration and registers the metrics.
func New(cfg Config) (*Dispatcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("dispatcher metrics: %w", err)
	}
	return &Dispatcher{
		cfg:    cfg,
		m:      m,
		log:    cfg.Logger.With("component", "dispatcher", "instance", cfg.InstanceID),
		owners: map[int32]*owner{},
	}, nil
}

// Start reads the cluster's shard count, checks that sundial.shards has one
// partition per shard, and joins the dispatchers' consumer group. Shards are
// claimed and dispatched as the group assigns them. ctx bounds the start
// only. A stopped Dispatcher may be started again.
func (d *Dispatcher) Start(ctx context.Context) error {
	if err := d.life.Start(ctx, d.start); err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	return nil
}

func (d *Dispatcher) start(ctx context.Context, run *lifecycle.Run) error {
	cluster, err := d.cfg.Store.GetClusterConfig(ctx)
	if err != nil {
		return fmt.Errorf("read the shard count: %w", err)
	}
	d.cluster = cluster

	topic := d.cfg.Topics.Shards()
	// The topic is checked, and what the group's callbacks use is set,
	// before the group client exists: it joins the group at once.
	shardsID, err := checkShardsTopic(ctx, slices.Clone(d.cfg.Kafka), topic, cluster.Shards)
	if err != nil {
		return err
	}
	d.shardsID = shardsID
	d.readSince = d.cfg.Now().Add(-d.cfg.CatchUpHorizon)
	d.jobs = newJobCache(d.cfg.Store, d.cfg.Now, d.cfg.JobFeedMaxLag, d.m)
	d.mu.Lock()
	d.aborted = false
	d.mu.Unlock()
	run.OnStop(func() { d.log.Info("dispatcher stopped") })
	// The feed starts first and stops last: owners read the job cache it
	// keeps current until they have drained.
	feed, err := startJobFeed(slices.Clone(d.cfg.Kafka),
		d.cfg.Topics.JobsStatus(), d.jobs, d.cfg.Now, d.cfg.JobFeedReplay, d.m, d.log)
	if err != nil {
		return err
	}
	run.OnStop(feed.Stop)
	// The writer of next occurrences and the firing goroutines stop after
	// every owner has drained (leave, registered below, runs first) and
	// before the feed.
	d.next = startNextWriter(ctx, d.cfg.Store, d.cfg.FireTimeout, nextWriters, nextGather)
	run.OnStop(d.next.Stop)
	d.firers = newFirers(firerIdle)
	run.OnStop(d.firers.Stop)
	opts := append([]kgo.Opt{
		kgo.ConsumerGroup(d.cfg.GroupID),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.OnPartitionsAssigned(d.assigned),
		kgo.OnPartitionsRevoked(d.revoked),
		kgo.OnPartitionsLost(d.lost),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(d.cfg.WatermarkInterval),
		kgo.SessionTimeout(d.cfg.SessionTimeout),
		kgo.HeartbeatInterval(d.cfg.HeartbeatInterval),
		// A partition without a committed offset (a new group, or a
		// shard that never had a wake-up resolved) is read from the
		// wake-ups of the last CatchUpHorizon: older entries are beyond
		// any catch-up anyway, and a group id changed on a long-running
		// installation does not fire a week of wake-ups again. Such
		// partitions are placed by offsetsFetched and startUncommitted
		// (kgo's AfterMilli reset can skip a wake-up appended while it
		// looks the offsets up); the reset offset below only serves the
		// other resets (an offset out of range).
		kgo.OnOffsetsFetched(d.offsetsFetched),
		kgo.AdjustFetchOffsetsFn(d.startUncommitted),
		kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(d.readSince.UnixMilli())),
		kgo.FetchMaxWait(time.Second),
		kgo.ProducerLinger(produceLinger),
		// A run record that is not delivered within FireTimeout fails its
		// firing, which is retried (same run id), instead of waiting without
		// bound. An idempotent producer cannot fail a record whose request
		// may have reached the broker, though, and with no broker dialable
		// such a record waits until Close: the firing's wait for it ends
		// with the firing's context instead (boundedProducer).
		kgo.RecordDeliveryTimeout(d.cfg.FireTimeout),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	}, d.cfg.Kafka...)
	if d.cfg.GroupInstanceID != "" {
		opts = append(opts, kgo.InstanceID(d.cfg.GroupInstanceID))
	}
	opts = append(opts, d.cfg.GroupClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	run.OnStop(func() { d.leave(cl) })
	run.Go(func(ctx context.Context) { d.poll(ctx, cl) })
	d.log.Info("dispatcher started", "shards", cluster.Shards, "group", d.cfg.GroupID, "lookahead", d.cfg.Lookahead)
	return nil
}

// produceLinger is how long the dispatcher's producer waits for more
// records before it sends a produce request: the run records and ENQUEUED
// events of the firings of every owned shard that fall due within it share
// one request. It adds at most this much to a run's dispatch latency. With
// no linger, at 200 firings/s, a run's record and its ENQUEUED event cost
// 1.42 produce requests (docs/architecture.md, "The work of one run").
const produceLinger = 5 * time.Millisecond

// checkShardsTopic refuses to start when sundial.shards does not have one
// partition per shard: owning a partition would not mean owning a shard.
// It returns the topic's id. It uses a client of its own, made with opts.
func checkShardsTopic(ctx context.Context, opts []kgo.Opt, topic string, shards int) ([16]byte, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return [16]byte{}, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return [16]byte{}, fmt.Errorf("read metadata of %s: %w", topic, err)
	}
	t, ok := md.Topics[topic]
	switch {
	case !ok:
		return [16]byte{}, fmt.Errorf("topic %s does not exist (run sundial migrate)", topic)
	case t.Err != nil:
		return [16]byte{}, fmt.Errorf("topic %s: %w (run sundial migrate)", topic, t.Err)
	case len(t.Partitions) != shards:
		return [16]byte{}, fmt.Errorf("topic %s has %d partitions, the cluster %d shards: they must be equal", topic, len(t.Partitions), shards)
	}
	return t.ID, nil
}

// offsetsFetched notes the shard partitions just assigned that the group
// has no committed offset for (the coordinator answers -1), for
// startUncommitted. franz-go calls the two one after the other, in the same
// goroutine, after fetching the group's offsets of newly assigned
// partitions.
func (d *Dispatcher) offsetsFetched(_ context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	topic := d.cfg.Topics.Shards()
	var none []int32
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			if t.Topic != topic && (t.Topic != "" || t.TopicID != d.shardsID) {
				continue
			}
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Offset < 0 {
					none = append(none, p.Partition)
				}
			}
		}
	}
	d.startMu.Lock()
	d.startCl, d.noCommit = cl, none
	d.startMu.Unlock()
	return nil
}

// startUncommitted starts each shard partition without a committed offset
// at the offset startoffsets.Since finds for readSince instead of kgo's
// AfterMilli reset: that reset looks the partition up by time and, finding
// no wake-up from readSince on, falls back on the partition's end, looked up
// alongside; a wake-up appended between the two lookups would be skipped
// for good, and with it the firing of an entry written into a window
// already loaded. Since looks the ends up first. The offsets carry no
// leader epoch: they are not a consumed position to validate. The lookup
// is retried until it succeeds or the group session ends (ctx).
func (d *Dispatcher) startUncommitted(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	topic := d.cfg.Topics.Shards()
	d.startMu.Lock()
	cl, none := d.startCl, d.noCommit
	d.noCommit = nil
	d.startMu.Unlock()
	parts := offsets[topic]
	var todo []int32
	for _, p := range none {
		if _, ok := parts[p]; ok {
			todo = append(todo, p)
		}
	}
	if len(todo) == 0 || cl == nil {
		return offsets, nil
	}
	var starts map[int32]int64
	err := backoff.Retry(ctx, backoff.Config{
		Min: 100 * time.Millisecond,
		Max: 2 * time.Second,
		OnRetry: func(err error) {
			d.log.Warn("finding where to read the wake-ups of newly assigned shards; retrying", "err", err)
		},
	}, func() (err error) {
		starts, err = startoffsets.Since(ctx, kadm.NewClient(cl), topic, d.readSince)
		return err
	})
	if err != nil { // the session ended; the group assigns the shards again
		return nil, fmt.Errorf("find where to read the wake-ups of shards %v: %w", todo, err)
	}
	for _, p := range todo {
		if o, ok := starts[p]; ok {
			parts[p] = kgo.NewOffset().At(o)
		}
	}
	return offsets, nil
}

// Stop leaves the group: every owned shard is drained (firings in progress
// finish), its wake-up offsets committed and its watermark advanced, so the
// dispatchers that take the shards over start where this one stopped. Safe
// to call more than once and before Start; it returns once the poll loop,
// every owner and the jobs feed have exited.
func (d *Dispatcher) Stop() { d.life.Stop() }

// leave runs in Stop once the poll loop has exited: it leaves the group
// (gracefully, or as a crash when aborted), closes the client and waits
// for every owner.
func (d *Dispatcher) leave(cl *kgo.Client) {
	d.mu.Lock()
	aborted := d.aborted
	d.mu.Unlock()
	if aborted {
		// A leave with a cancelled context sends no LeaveGroup request;
		// Close then finds the group already left.
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		_ = cl.LeaveGroupContext(gone)
		cl.Close()
		d.stopOwners(d.takeAllOwners(), true)
		d.wg.Wait()
		return
	}
	// Leaving runs revoked(), which drains every owner (bounded by
	// DrainTimeout, FireTimeout and the commit's timeout), then sends
	// LeaveGroup. During a broker outage that request could be retried for
	// a long time; a leave later than the session timeout is pointless
	// (the group has dropped the member by then), so it is bounded. Close
	// then finds the group left.
	// A static member leaves too (consume.LeaveStatic): a stop is not a
	// crash, and its shards should not wait the session timeout for a
	// restart. Close fails the run records still buffered.
	leave, cancel := context.WithTimeout(context.Background(), d.cfg.DrainTimeout+d.cfg.FireTimeout+d.cfg.SessionTimeout)
	if err := consume.LeaveStatic(leave, cl, d.cfg.GroupID, d.cfg.GroupInstanceID); err != nil {
		d.log.Warn("leaving the group failed; the group drops this member after the session timeout", "err", err)
	}
	cancel()
	d.stopOwners(d.takeAllOwners(), true)
	d.wg.Wait()
}

// abort drops the dispatcher as if its process died: it stops heartbeating
// without leaving the group, commits nothing and advances no watermark, so
// the group notices only after the session timeout. For tests.
func (d *Dispatcher) abort() {
	d.mu.Lock()
	d.aborted = true
	d.mu.Unlock()
	d.life.Stop()
}

// poll reads wake-up records and hands each to its shard's owner.
func (d *Dispatcher) poll(ctx context.Context, cl *kgo.Client) {
	for {
		fs := cl.PollRecords(ctx, 4096)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			d.log.Warn("fetch error", "topic", topic, "partition", p, "err", err)
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			d.mu.Lock()
			o := d.owners[p.Partition]
			d.mu.Unlock()
			if o == nil {
				return // revoked meanwhile; the next owner reads these again
			}
			for _, rec := range p.Records {
				select {
				case o.wake <- rec:
				case <-o.quit:
					return
				case <-ctx.Done():
					return
				}
			}
		})
	}
}

// assigned starts an owner for each newly assigned shard. An owner's context
// keeps ctx's values but not its end: the owner ends when its shard is
// revoked or lost, or the dispatcher stops.
func (d *Dispatcher) assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	topic := d.cfg.Topics.Shards()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.aborted {
		return
	}
	for _, p := range assigned[topic] {
		if d.owners[p] != nil {
			continue
		}
		ownerCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		shard := p
		o := &owner{
			shard:   int(p),
			cfg:     d.cfg,
			store:   d.cfg.Store,
			jobs:    d.jobs,
			next:    d.next,
			firers:  d.firers,
			prod:    boundedProducer{cl},
			topics:  d.cfg.Topics,
			m:       d.m,
			log:     d.log.With("shard", p),
			created: d.cluster.CreatedAt,
			observe: d.observe,
			share:   d.share,
			mark: func(offset int64, leaderEpoch int32) {
				cl.MarkCommitOffsets(map[string]map[int32]kgo.EpochOffset{topic: {shard: {Epoch: leaderEpoch, Offset: offset}}})
			},
			wake:   make(chan *kgo.Record, wakeBuffer),
			cancel: cancel,
			quit:   ownerCtx.Done(),
			done:   make(chan struct{}),
		}
		d.owners[p] = o
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			o.run(ownerCtx)
		}()
	}
}

// revoked drains the owners of revoked shards and commits their wake-up
// offsets before the group hands the shards to another dispatcher.
func (d *Dispatcher) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	d.mu.Lock()
	aborted := d.aborted
	d.mu.Unlock()
	owners := d.takeOwners(revoked[d.cfg.Topics.Shards()])
	if len(owners) == 0 {
		return
	}
	d.stopOwners(owners, aborted)
	if aborted {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		d.log.Warn("cannot commit wake-up offsets of revoked shards; their wake-ups will be read again", "err", err)
	}
}

// lost stops the owners of shards lost without a revocation (the session
// expired): another dispatcher may own them already, so nothing is
// committed or advanced.
func (d *Dispatcher) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	d.stopOwners(d.takeOwners(lost[d.cfg.Topics.Shards()]), true)
}

// takeAllOwners removes every owner from the map and returns them.
func (d *Dispatcher) takeAllOwners() []*owner {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*owner
	for p, o := range d.owners {
		out = append(out, o)
		delete(d.owners, p)
	}
	return out
}

// takeOwners removes the owners of the partitions from the map and returns
// them. franz-go calls OnPartitionsRevoked at the end of every cooperative
// session, often with nothing revoked: an empty list takes nothing.
func (d *Dispatcher) takeOwners(partitions []int32) []*owner {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*owner
	for _, p := range partitions {
		if o := d.owners[p]; o != nil {
			out = append(out, o)
			delete(d.owners, p)
		}
	}
	return out
}

// boundedProducer produces records and waits for their acknowledgements no
// longer than ctx. kgo's ProduceSync waits for every promise, and an
// idempotent producer cannot fail a record whose request may have reached
// the broker, even when its context ends or its delivery timeout passes:
// with no broker dialable, only Close fails it. A firing waiting on such a
// record would then hold up its owner's drain, and the drain holds up the
// revocation, which Close waits for: a deadlock during a network cut or a
// broker outage. Here the wait ends with ctx, the firing fails (it is
// tried again, or fired again by the next owner, with the same run id) and
// the record is left to the client, which delivers it or fails it on
// Close.
type boundedProducer struct{ cl *kgo.Client }

func (p boundedProducer) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	acks := make(chan kgo.ProduceResult, len(rs)) // the promises never block
	for _, r := range rs {
		p.cl.Produce(ctx, r, func(r *kgo.Record, err error) { acks <- kgo.ProduceResult{Record: r, Err: err} })
	}
	out := make(kgo.ProduceResults, 0, len(rs))
	for len(out) < len(rs) {
		select {
		case res := <-acks:
			out = append(out, res)
		case <-ctx.Done():
			// The records not acknowledged yet still belong to the
			// client: the results carry the error only.
			err := fmt.Errorf("waiting for the acknowledgement of %d of %d records: %w", len(rs)-len(out), len(rs), ctx.Err())
			for len(out) < len(rs) {
				out = append(out, kgo.ProduceResult{Err: err})
			}
		}
	}
	return out
}

// share returns one shard's share of MaxFiring (at most MaxInflight) and
// of MaxHeld: an equal part for each shard owned.
func (d *Dispatcher) share() (inflight, held int) {
	d.mu.Lock()
	n := max(len(d.owners), 1)
	d.mu.Unlock()
	return min(max(d.cfg.MaxFiring/n, 1), d.cfg.MaxInflight), max(d.cfg.MaxHeld/n, 1)
}

// stopOwners stops owners in parallel and waits for all.
func (d *Dispatcher) stopOwners(owners []*owner, lost bool) {
	var wg sync.WaitGroup
	for _, o := range owners {
		wg.Go(func() { o.stop(lost) })
	}
	wg.Wait()
}

// Owned returns the shards this dispatcher currently owns (assigned by the
// group; the claim may still be in progress).
func (d *Dispatcher) Owned() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]int, 0, len(d.owners))
	for p := range d.owners {
		out = append(out, int(p))
	}
	return out
}
