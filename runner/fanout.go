package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/routing"
)

// reasonChild prefixes the reason of the event a base run gets when one of
// its children ends without success: "child_dead", "child_skipped",
// "child_cancelled".
const reasonChild = "child_"

// fanoutKey is the Redis key of what the fan-out of baseRunID records
// (kind "plan" or "done"), in the job's hash slot like the job's leases.
func (r *markers) fanoutKey(kind, jobID, baseRunID string) string {
	return r.cfg.KeyPrefix + "{" + jobID + "}:fanout:" + kind + ":" + baseRunID
}

// fanout splits a BROADCAST or SHARDED base run into its child runs and
// hands each to its member's directed topic, and reports whether the base
// record is finished: only once every child's produce is acknowledged, so
// a crash before that fans out again. The child ids depend on the base run
// id alone (and, for BROADCAST, on the plan fixed in Redis by the first
// fan-out), so fanning out again produces the same children, which their
// leases and dedupe marks keep to one effect each.
func (r *router) fanout(ctx context.Context, x *execution, pool string, live []discovery.Member) bool {
	run := x.run
	var children []routing.Child
	switch run.GetRouting().GetStrategy() {
	case sundialv1.RoutingStrategy_ROUTING_STRATEGY_BROADCAST:
		ids := make([]string, len(live))
		for i, m := range live {
			ids[i] = m.ID
		}
		plan, err := r.marks.broadcastPlan(ctx, run, routing.Broadcast(run.GetRunId(), ids))
		if err != nil {
			x.logger().Warn("broadcast plan not recorded; it will be fanned out again", "err", err)
			return false
		}
		children = routing.Broadcast(run.GetRunId(), plan)
	default:
		children = r.picker.Shard(pool, run.GetRunId(), int(run.GetRouting().GetShards()), live)
	}
	recs := make([]*kgo.Record, len(children))
	for i, ch := range children {
		// A member of a recorded broadcast plan may have left since: its
		// child goes to a live member, as a child routed again would.
		if d := r.picker.Pick(pool, routing.ChildRouting(&sundialv1.Run{RoutedTo: ch.Member}), live); d.Outcome == routing.Chosen {
			ch.Member = d.Member
		}
		c := childRun(run, ch)
		val, err := proto.Marshal(c)
		if err != nil {
			x.logger().Error("child run not encoded", "err", err)
			return false
		}
		recs[i] = &kgo.Record{Topic: r.cfg.Topics.Direct(ch.Member), Key: []byte(c.GetRunId()), Value: val, Headers: topics.ProtobufHeaders(c)}
	}
	if err := r.producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		x.logger().Warn("child runs not handed over; the run will be fanned out again", "err", err)
		return false
	}
	r.m.routed.WithLabelValues(routeLabel(run.GetRouting().GetStrategy())).Inc()
	if x.debugOn(ctx) {
		x.logger().Debug("run fanned out", "children", len(children), "pool", pool)
	}
	return true
}

// broadcastPlan returns the members a BROADCAST base run is sent to: the
// ones the first fan-out recorded, else those of planned, recorded now.
// The plan fixes the children and their count, so a fan-out again after a
// crash, with other members live, neither adds a child nor changes the
// count the base run's success waits for.
func (r *markers) broadcastPlan(ctx context.Context, run *sundialv1.Run, planned []routing.Child) ([]string, error) {
	ids := make([]string, len(planned))
	for i, ch := range planned {
		ids[i] = ch.Member
	}
	key := r.fanoutKey("plan", run.GetJobId(), run.GetRunId())
	prev, err := r.cfg.Redis.SetArgs(ctx, key, strings.Join(ids, ","), redis.SetArgs{Mode: "NX", Get: true, TTL: r.cfg.FanoutRetention}).Result()
	switch {
	case errors.Is(err, redis.Nil): // no plan yet: ids is it now
		return ids, nil
	case err != nil:
		return nil, fmt.Errorf("record broadcast plan: %w", err)
	}
	return strings.Split(prev, ","), nil
}

// childRun is the run of child ch of base: the base run with the child's
// id, index and count, routed to its member.
func childRun(base *sundialv1.Run, ch routing.Child) *sundialv1.Run {
	c := proto.Clone(base).(*sundialv1.Run)
	c.RunId = ch.RunID
	c.BaseRunId = base.GetRunId()
	c.ShardIndex = uint32(ch.Index) //nolint:gosec // at most jobspec.MaxShards or the pool's size
	c.ShardCount = uint32(ch.Count) //nolint:gosec // idem
	c.RoutedTo = ch.Member
	return c
}

// childSucceeded records that the child run succeeded, and reports
// whether every child of its base run now has. The record is a Redis set
// of finished child indexes per base run: adding is idempotent, so a child
// executed again after a crash (its dedupe mark is written only after
// this) adds nothing and asks again.
func (r *markers) childSucceeded(ctx context.Context, run *sundialv1.Run) (bool, error) {
	key := r.fanoutKey("done", run.GetJobId(), run.GetBaseRunId())
	var card *redis.IntCmd
	_, err := r.cfg.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, key, strconv.FormatUint(uint64(run.GetShardIndex()), 10))
		p.PExpire(ctx, key, r.cfg.FanoutRetention)
		card = p.SCard(ctx, key)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("record finished child of %s: %w", run.GetBaseRunId(), err)
	}
	return card.Val() >= int64(run.GetShardCount()), nil
}
