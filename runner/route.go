package runner

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/routing"
)

// Directory answers which executors are live, per pool (a
// *discovery.Directory).
type Directory interface {
	Live(pool string) []discovery.Member
	// All lists every member, the ones that left or expired included.
	All() []discovery.Member
}

// Reasons of the DEFERRED event of a routed run that found no executor.
const (
	reasonNoExecutor   = "no_executor"
	reasonWaitExecutor = "executor_not_live"
)

// newPicker seeds the routing Picker's RANDOM draws from the system's
// source: routing needs no reproducible sequence, and no global one.
func newPicker() *routing.Picker {
	var seed [16]byte
	_, _ = rand.Read(seed[:]) // crypto/rand.Read never fails on supported systems
	return routing.NewPicker(mrand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
}

// router places the runs that ask for an executor: it hands a routed run
// over to the live member of its pool that routing chooses, fans a
// BROADCAST or SHARDED run out (fanout.go), and hands a handler run this
// runner does not serve to one that does (remote.go). It owns the Directory
// of the live executors, the Picker that chooses among them, the queue of
// fetched runs waiting for a router goroutine, and the adoption of the
// directed topics of executors that left. A hand-over is finished by a
// finishing goroutine (tails) once its copy is acknowledged.
type router struct {
	cfg   *Config
	log   *slog.Logger
	m     *metrics
	in    *backlog
	marks *markers
	tails *finisher
	// levels maps a runs topic to its priority level; written only before
	// the poll loop starts (newRouter, start).
	levels    map[string]int
	directory Directory
	picker    *routing.Picker
	// queue holds the fetched runs that ask for an executor; they never
	// wait for a pool slot. Made anew by each start of the Runner.
	queue chan *record
	// producer hands runs over; consumer adopts directed topics. Set by
	// each start of the Runner.
	producer, consumer *kgo.Client
}

func newRouter(cfg *Config, log *slog.Logger, m *metrics, in *backlog, marks *markers, tails *finisher) *router {
	r := &router{cfg: cfg, log: log, m: m, in: in, marks: marks, tails: tails, levels: map[string]int{}, picker: newPicker()}
	for i, p := range topics.Priorities() {
		r.levels[cfg.Topics.Runs(p)] = i
	}
	return r
}

// start makes sure the runner's directed topic exists before the consumer
// subscribes to it (a consumer learns of a topic created later only at its
// next metadata refresh), and starts a Directory of its own when
// Config.Directory is nil.
func (r *router) start(ctx context.Context, run *lifecycle.Run) error {
	cl, err := kgo.NewClient(r.cfg.Kafka...)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	defer cl.Close()
	name := r.cfg.Topics.Direct(r.cfg.ID)
	res, err := kadm.NewClient(cl).CreateTopic(ctx, topics.DirectPartitions, -1, nil, name)
	if err == nil {
		err = res.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create directed topic %s: %w", name, err)
	}
	// Directed runs share the default priority's queue.
	r.levels[name] = r.levels[r.cfg.Topics.Runs(topics.PriorityDefault)]
	if r.cfg.Directory != nil {
		r.directory = r.cfg.Directory
		return nil
	}
	d, err := discovery.NewDirectory(discovery.DirectoryConfig{
		Kafka: r.cfg.Kafka, Topics: r.cfg.Topics, Logger: r.log, Now: r.cfg.Now,
	})
	if err != nil {
		return fmt.Errorf("directory: %w", err)
	}
	if err := d.Start(ctx); err != nil {
		return fmt.Errorf("directory: %w", err)
	}
	run.OnStop(d.Stop)
	r.directory = d
	return nil
}

// adoptLoop consumes the directed topics of the members of this runner's
// pool that left the live set, every AnnounceInterval, so that the runs
// routed to a member that died before executing them are routed again to a
// live one (needsRoute: they come from a directed topic not this runner's).
// It stops consuming a member's topic when the member is live again or is
// no longer listed. Every live member of the pool adopts the topic; the
// consumer group gives its partition to one of them.
//
// A departed member's topic that the group has drained is deleted
// DirectForgetAfter after its last heartbeat (forget.go), and no longer
// adopted unless the member is live again.
func (r *router) adoptLoop(ctx context.Context) {
	tick := time.NewTicker(r.cfg.AnnounceInterval)
	defer tick.Stop()
	adopted := map[string]bool{}
	deleted := map[string]bool{}
	var lastForget time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		members := r.directory.All()
		if now := r.cfg.Now(); now.Sub(lastForget) >= min(forgetEvery, r.cfg.DirectForgetAfter) {
			lastForget = now
			gone, err := r.forgetDirect(ctx, kadm.NewClient(r.consumer), forgettable(members, r.cfg.Pool, r.cfg.ID, now, r.cfg.DirectForgetAfter))
			if err != nil && ctx.Err() == nil {
				r.log.Warn("directed topics of executors that left not deleted; trying again", "err", err)
			}
			for _, id := range gone {
				deleted[id] = true
			}
		}
		members = slices.DeleteFunc(members, func(m discovery.Member) bool {
			if m.State == discovery.Live {
				delete(deleted, m.ID)
			}
			return deleted[m.ID]
		})
		adopt, leave := adoptChanges(members, r.cfg.Pool, r.cfg.ID, adopted)
		for _, id := range adopt {
			adopted[id] = true
			r.consumer.AddConsumeTopics(r.cfg.Topics.Direct(id))
			r.log.Info("adopting the directed runs of an executor that left", "executor", id)
		}
		for _, id := range leave {
			delete(adopted, id)
			r.consumer.PurgeTopicsFromConsuming(r.cfg.Topics.Direct(id))
			r.log.Info("leaving the directed runs of an executor to it", "executor", id)
		}
	}
}

// adoptChanges decides whose directed topics a member self of pool starts
// consuming (adopt: the pool's other members that are not live, whose id
// can name a topic) and stops consuming (leave: those adopted that are live
// again or no longer listed), given members, the directory's list, and
// adopted, the members whose topics it consumes. It does no I/O; both lists
// are sorted.
func adoptChanges(members []discovery.Member, pool, self string, adopted map[string]bool) (adopt, leave []string) {
	gone := map[string]bool{}
	for _, m := range members {
		if m.Pool == pool && m.ID != self && m.State != discovery.Live && jobspec.CheckExecutorID(m.ID) == "" {
			gone[m.ID] = true
		}
	}
	for id := range gone {
		if !adopted[id] {
			adopt = append(adopt, id)
		}
	}
	for id := range adopted {
		if !gone[id] {
			leave = append(leave, id)
		}
	}
	slices.Sort(adopt)
	slices.Sort(leave)
	return adopt, leave
}

// needsRoute reports whether the record is a run that asks for an executor
// and has not reached one yet: it came from a runs topic, not from a
// directed topic.
func (r *router) needsRoute(rec *record) bool {
	return !rec.routed && routing.Routed(rec.run.GetRouting()) && rec.tp.topic != r.cfg.Topics.Direct(r.cfg.ID)
}

// levelOf is the queue of a topic's runs: its priority's, or the default
// priority's for directed topics (the levels map is written only before the
// poll loop starts).
func (r *router) levelOf(topic string) int {
	if l, ok := r.levels[topic]; ok {
		return l
	}
	return r.levels[r.cfg.Topics.Runs(topics.PriorityDefault)]
}

// routers is how many goroutines route runs; routing is one produce per
// run, so a few keep up with many workers.
const routers = 4

// loop is one router goroutine: it routes the runs of the queue until
// workCtx ends, each under execCtx, exec making the execution of a
// record's delivery. A router takes an in-flight slot (Config.MaxInFlight,
// slots) as a worker does, but no pool slot: a runner whose pool is busy
// still hands runs over to the others.
func (r *router) loop(workCtx, execCtx context.Context, slots chan struct{}, exec func(*record) *execution) {
	for {
		var rec *record
		select {
		case rec = <-r.queue:
		case <-workCtx.Done():
			return
		}
		select {
		case slots <- struct{}{}:
		case <-workCtx.Done():
			return
		}
		if !r.routeRecord(workCtx, execCtx, rec, exec) {
			<-slots
		}
	}
}

// routeRecord routes rec until it is handed over, deferred or queued here,
// trying again after a backoff while the runner owns its partition (as
// handleRecord does). It reports whether a finishing goroutine took the
// record over (a deferral waiting for its event).
func (r *router) routeRecord(workCtx, execCtx context.Context, rec *record, exec func(*record) *execution) bool {
	retry := backoff.New(r.cfg.HeldRetry, maxRecordRetry)
	for r.in.owns(rec) {
		res, here := r.route(execCtx, exec(rec))
		switch {
		case here:
			rec.routed = true
			r.in.requeue(rec)
			return false
		case res == handedOff:
			return true
		case res == finished:
			r.in.finish(rec)
			return false
		}
		if workCtx.Err() != nil || execCtx.Err() != nil || !retry.Wait(workCtx) {
			return false
		}
	}
	return false
}

// route chooses the run's executor and hands the run over to it, and
// returns how the record ended (executeHere false), or executeHere. A run chosen for this runner is
// executed here at once. Otherwise the copy is produced to the executor's
// directed topic and acknowledged before this record finishes, so a crash in
// between routes it again (the same run id: the lease and the dedupe mark
// keep it to one effect). A run that finds no live executor, or whose fixed
// executor is away under FALLBACK_WAIT, is deferred by Config.RouteDelay
// and asks again then.
func (r *router) route(ctx context.Context, x *execution) (res result, executeHere bool) {
	p, live := r.planRun(x.run)
	if p.step == routeHere {
		r.countRouted(x.run)
		return unfinished, true
	}
	return r.carryRoute(ctx, x, p, live), false
}

// planRun plans where a run that asks for an executor goes (planRoute),
// from its pool's live members, which it returns for carryRoute's fan-out.
func (r *router) planRun(run *sundialv1.Run) (routePlan, []discovery.Member) {
	pool := jobspec.PoolOf(run.GetPool())
	live := r.directory.Live(pool)
	rt, child := runRouting(run)
	return planRoute(!child && routing.FansOut(rt), len(live), func() routing.Decision {
		return r.picker.PickFor(pool, run.GetJobId(), rt, live)
	}, r.cfg.ID), live
}

// runRouting is the routing a run asks for: its own, or for a child of a
// BROADCAST or SHARDED base run (child true) the child's.
func runRouting(run *sundialv1.Run) (rt *sundialv1.Routing, child bool) {
	if run.GetBaseRunId() != "" {
		return routing.ChildRouting(run), true
	}
	return run.GetRouting(), false
}

// carryRoute carries out p, a plan of planRun that does not execute the
// run here, live being the members it was made from, and returns how the
// record ended.
func (r *router) carryRoute(ctx context.Context, x *execution, p routePlan, live []discovery.Member) result {
	run := x.run
	pool := jobspec.PoolOf(run.GetPool())
	switch p.step {
	case routeDefer:
		rt, _ := runRouting(run)
		return x.settle().deferRunWhy(ctx, r.cfg.RouteDelay, p.reason, deferWhy(p.reason, pool, rt.GetExecutor()))
	case routeFanOut:
		if !r.fanout(ctx, x, pool, live) {
			return unfinished
		}
		return finished
	case routeHere, routeHandOver:
	}
	r.countRouted(run)
	return r.handOver(ctx, x, p.member)
}

// countRouted counts a run that asks for an executor among the routed
// runs, by its routing strategy, once its executor is chosen.
func (r *router) countRouted(run *sundialv1.Run) {
	r.m.routed.WithLabelValues(routeLabel(run.GetRouting().GetStrategy())).Inc()
}

// routeStep is what routing does with a run that asks for an executor.
type routeStep int

const (
	// routeDefer: deferred by Config.RouteDelay for the plan's reason (no
	// attempt spent); it asks again then.
	routeDefer routeStep = iota
	// routeFanOut: a BROADCAST or SHARDED base run is split into its
	// children (fanout.go).
	routeFanOut
	// routeHere: this runner executes the run.
	routeHere
	// routeHandOver: the run goes to the plan's member's directed topic.
	routeHandOver
)

// routePlan is where a run that asks for an executor goes.
type routePlan struct {
	step routeStep
	// reason: routeDefer's, reasonNoExecutor or reasonWaitExecutor.
	reason string
	// member: routeHandOver's executor.
	member string
}

// planRoute decides where a run that asks for an executor goes: fansOut
// says it is a BROADCAST or SHARDED base run (not a child), live how many
// members of its pool are live, and pick what the Picker chooses for it,
// asked only when the run does not fan out (a pick moves a round-robin's
// turn); self is this runner's id. A base run fans out only to live
// members; a run the Picker finds no member for, or whose fixed member is
// away under FALLBACK_WAIT, is deferred. It does no I/O.
func planRoute(fansOut bool, live int, pick func() routing.Decision, self string) routePlan {
	if fansOut {
		if live == 0 {
			return routePlan{step: routeDefer, reason: reasonNoExecutor}
		}
		return routePlan{step: routeFanOut}
	}
	d := pick()
	switch d.Outcome {
	case routing.NoMember:
		return routePlan{step: routeDefer, reason: reasonNoExecutor}
	case routing.Wait:
		return routePlan{step: routeDefer, reason: reasonWaitExecutor}
	case routing.Chosen:
	}
	if d.Member == self {
		return routePlan{step: routeHere}
	}
	return routePlan{step: routeHandOver, member: d.Member}
}

// deferWhy is the error message of the DEFERRED event of a run that asks
// for an executor of pool and found none: reason reasonNoExecutor, or
// reasonWaitExecutor for a FIXED run whose executor is away.
func deferWhy(reason, pool, executor string) string {
	if reason == reasonWaitExecutor {
		return fmt.Sprintf("executor %s of pool %s is not live", executor, pool)
	}
	return "no live executor in pool " + pool
}

// routePool places an unrouted run that is not a handler run (an HTTP,
// Kafka or exec target) in its job's pool, p being its plan (planRunPool)
// when that is not routeHere: it hands the run over to the member of the
// pool that planPool chose, or defers it by Config.RouteDelay as a routed
// run that found no executor is (reason no_executor, the pool named in the
// event's error message, no attempt spent).
func (r *router) routePool(ctx context.Context, x *execution, p routePlan) result {
	pool := jobspec.PoolOf(x.run.GetPool())
	switch p.step {
	case routeDefer:
		x.logger().Info("no live executor in the run's pool; deferred", "pool", pool, "delay", r.cfg.RouteDelay)
		return x.settle().deferRunWhy(ctx, r.cfg.RouteDelay, p.reason, deferWhy(p.reason, pool, ""))
	case routeHere, routeFanOut, routeHandOver:
	}
	r.m.routed.WithLabelValues(poolLabel).Inc()
	return r.handOver(ctx, x, p.member)
}

// planRunPool plans where an unrouted run goes among its job's pool
// (planPool), reading the directory only when the pool is not this
// runner's.
func (r *router) planRunPool(run *sundialv1.Run) routePlan {
	pool := jobspec.PoolOf(run.GetPool())
	return planPool(pool, r.cfg.Pool, r.cfg.ID, run.GetJobId(), func() []discovery.Member { return r.directory.Live(pool) })
}

// poolLabel is the strategy label of sundial_runner_routed_runs_total for
// the unrouted runs handed over to their pool (routePool).
const poolLabel = "pool"

// planPool decides where an unrouted run of job goes, its job's pool
// being pool, on the runner self of selfPool: here when the pools are the
// same (live is not asked: a setup of one pool takes no extra step), else
// to the member of live (the pool's live members) whose id names a
// directed topic that ranks highest for job (rendezvous hashing: one job's
// runs stay on one member while the pool's membership holds, and a member
// that joins or leaves moves only its share of the jobs), else deferred as
// no_executor. It does no I/O.
func planPool(pool, selfPool, self, job string, live func() []discovery.Member) routePlan {
	if pool == selfPool {
		return routePlan{step: routeHere}
	}
	best, bestScore := "", uint64(0)
	for _, m := range live() {
		if m.Pool != pool || m.ID == self || jobspec.CheckExecutorID(m.ID) != "" {
			continue
		}
		if s := rendezvous(job, m.ID); best == "" || s > bestScore || (s == bestScore && m.ID < best) {
			best, bestScore = m.ID, s
		}
	}
	if best == "" {
		return routePlan{step: routeDefer, reason: reasonNoExecutor}
	}
	return routePlan{step: routeHandOver, member: best}
}

// rendezvous is member's score for job: FNV-1a of both, mixed by
// SplitMix64's finalizer so that close ids score far apart.
func rendezvous(job, member string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(job)) // a hash.Hash never fails to write
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(member))
	z := h.Sum64()
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// handOver produces the run of x to member's directed topic and returns
// handedOff: a finishing goroutine finishes the record once the produce is
// acknowledged, or puts it back in its queue when it fails (the record is
// routed again).
func (r *router) handOver(ctx context.Context, x *execution, member string) result {
	run := x.run
	next := proto.Clone(run).(*sundialv1.Run)
	next.RoutedTo = member
	val, err := proto.Marshal(next)
	if err != nil {
		x.logger().Error("routed run not encoded", "err", err)
		return unfinished
	}
	// The worker does not wait for the acknowledgement: a finishing
	// goroutine does, and only then finishes the record (or puts it back
	// in its queue to be routed again), so its offset is committed only
	// once the copy is durable. A worker held for each produce's round trip
	// bounded a runner's hand-overs to Concurrency per round trip, the
	// limit of the worker gateway's rate (docs/architecture.md §11).
	acked := make(chan error, 1)
	r.producer.Produce(ctx, &kgo.Record{
		Topic: r.cfg.Topics.Direct(member), Key: []byte(run.GetRunId()), Value: val,
		Headers: topics.ProtobufHeaders(next),
	}, func(_ *kgo.Record, err error) { acked <- err })
	// A hand-over holds no lease: its in-flight slot is given back at once.
	r.tails.finish(ctx, x.rec, true, func() bool {
		if err := <-acked; err != nil {
			x.logger().Warn("routed run not handed over; it will be routed again", "executor", member, "err", err)
			return false
		}
		if x.debugOn(ctx) {
			x.logger().Debug("run routed", "executor", member, "pool", run.GetPool())
		}
		return true
	})
	return handedOff
}

func routeLabel(s sundialv1.RoutingStrategy) string {
	switch s {
	case sundialv1.RoutingStrategy_ROUTING_STRATEGY_ROUND_ROBIN:
		return "round_robin"
	case sundialv1.RoutingStrategy_ROUTING_STRATEGY_RANDOM:
		return "random"
	case sundialv1.RoutingStrategy_ROUTING_STRATEGY_LEAST_LOADED:
		return "least_loaded"
	case sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED:
		return "fixed"
	case sundialv1.RoutingStrategy_ROUTING_STRATEGY_BROADCAST:
		return "broadcast"
	case sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED:
		return "sharded"
	}
	return "other"
}
