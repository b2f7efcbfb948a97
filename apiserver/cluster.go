package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/discovery"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	"github.com/sundialhq/sundial/store"
)

// RoleRunners is the role of the consumer groups whose members the cluster
// view lists as runners.
const RoleRunners = "runners"

// ConsumerGroup names a Sundial consumer group and what reads with it.
type ConsumerGroup struct {
	// Role is what reads with the group: "registry", "triggers",
	// "dispatchers", RoleRunners, "history", "dagengine",
	// "dagengine-definitions".
	Role string
	// Group is the group id.
	Group string
}

// ShardReader reads the cluster config and the shards table; store.Store
// satisfies it.
type ShardReader interface {
	GetClusterConfig(ctx context.Context) (store.ClusterConfig, error)
	GetShard(ctx context.Context, shard int) (store.ShardState, error)
}

// ExecutorLister lists every executor a discovery.Directory holds, live or
// recently gone (*discovery.Directory).
type ExecutorLister interface {
	All() []discovery.Member
}

// ClusterServiceConfig holds the cluster service's dependencies.
type ClusterServiceConfig struct {
	// Shards reads the shards table (required).
	Shards ShardReader
	// Admin describes consumer groups and lists offsets (required).
	Admin *kadm.Client
	// Groups are the consumer groups to show, each once (required): the
	// process flags' defaults unless an installation changed them.
	Groups []ConsumerGroup
	// Executors lists the executors announced on sundial.executors (a
	// started *discovery.Directory). Nil leaves them out, and the view
	// says in-flight runs are unavailable.
	Executors ExecutorLister
	// Now is the instant watermark lags are measured from (required).
	Now func() time.Time
	// Logger receives the backend failures a caller is not shown
	// (required).
	Logger *slog.Logger
}

// Validate reports every missing dependency and bad group.
func (c ClusterServiceConfig) Validate() error {
	var errs []error
	if c.Shards == nil {
		errs = append(errs, errors.New("cluster service: shards: required"))
	}
	if c.Admin == nil {
		errs = append(errs, errors.New("cluster service: admin: required"))
	}
	if len(c.Groups) == 0 {
		errs = append(errs, errors.New("cluster service: groups: at least one required"))
	}
	seen := map[string]bool{}
	for i, g := range c.Groups {
		if g.Role == "" || g.Group == "" {
			errs = append(errs, fmt.Errorf("cluster service: groups[%d]: role and group are required", i))
		}
		if seen[g.Group] {
			errs = append(errs, fmt.Errorf("cluster service: groups[%d] %q: listed twice", i, g.Group))
		}
		seen[g.Group] = true
	}
	if c.Now == nil {
		errs = append(errs, errors.New("cluster service: now: required"))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("cluster service: logger: required"))
	}
	return errors.Join(errs...)
}

// ClusterService implements apiv1connect.ClusterServiceHandler: the
// shards table for the dispatchers, consumer group descriptions for the
// runners, the lag of every group, and the executors with their slots and
// runs in flight as their last heartbeats announced them (package
// discovery). Circuit breakers live in each runner's memory (and its
// metrics), with no shared record the API could read, so the view names
// them as unavailable rather than showing a guess.
type ClusterService struct {
	cfg ClusterServiceConfig
}

var _ apiv1connect.ClusterServiceHandler = (*ClusterService)(nil)

// NewClusterService returns a cluster service, or the config's errors.
func NewClusterService(cfg ClusterServiceConfig) (*ClusterService, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &ClusterService{cfg: cfg}, nil
}

// shardReads bounds the concurrent reads of the shards table.
const shardReads = 8

// GetCluster returns the cluster view; for the cluster admin only.
func (s *ClusterService) GetCluster(ctx context.Context, _ *connect.Request[apiv1.GetClusterRequest]) (*connect.Response[apiv1.GetClusterResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if !p.ClusterAdmin {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("cluster view: for the cluster admin only"))
	}
	now := s.cfg.Now()
	resp := &apiv1.GetClusterResponse{
		Time: timestamppb.New(now),
		Unavailable: []string{
			"circuit breakers: each runner keeps its own per team and downstream, with no shared record; see its sundial_runner_breaker_state metric",
		},
	}
	if s.cfg.Executors == nil {
		resp.Unavailable = append(resp.Unavailable, "in-flight runs: this server reads no executor directory (sundial.executors); see each runner's sundial_runner_runs_in_flight metric")
	} else {
		resp.Executors = executorsOf(s.cfg.Executors.All())
	}
	if err := s.dispatchers(ctx, now, resp); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "cluster view: shards", "err", err)
		return nil, internalError("cluster view")
	}
	if err := s.groups(ctx, resp); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "cluster view: groups", "err", err)
		return nil, internalError("cluster view")
	}
	return connect.NewResponse(resp), nil
}

// dispatchers fills the shard count, the dispatchers and the unowned
// shards from the shards table.
func (s *ClusterService) dispatchers(ctx context.Context, now time.Time, resp *apiv1.GetClusterResponse) error {
	cc, err := s.cfg.Shards.GetClusterConfig(ctx)
	if err != nil {
		return fmt.Errorf("cluster config: %w", err)
	}
	states := make([]store.ShardState, cc.Shards)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(shardReads)
	for i := range states {
		g.Go(func() error {
			st, err := s.cfg.Shards.GetShard(gctx, i)
			if err != nil {
				return fmt.Errorf("shard %d: %w", i, err)
			}
			states[i] = st
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	resp.ShardCount = int32(cc.Shards)
	byOwner := map[string]*apiv1.Dispatcher{}
	for i, st := range states {
		v := &apiv1.ShardView{Shard: int32(i), Epoch: st.Epoch}
		if !st.Watermark.IsZero() {
			v.Watermark = timestamppb.New(st.Watermark)
			v.WatermarkLag = durationpb.New(max(now.Sub(st.Watermark), 0))
		}
		if !st.ClaimedAt.IsZero() {
			v.ClaimTime = timestamppb.New(st.ClaimedAt)
		}
		if st.Owner == "" {
			resp.UnownedShards = append(resp.UnownedShards, v)
			continue
		}
		d, ok := byOwner[st.Owner]
		if !ok {
			d = &apiv1.Dispatcher{Id: st.Owner}
			byOwner[st.Owner] = d
			resp.Dispatchers = append(resp.Dispatchers, d)
		}
		d.Shards = append(d.Shards, v)
	}
	slices.SortFunc(resp.Dispatchers, func(a, b *apiv1.Dispatcher) int { return cmp.Compare(a.GetId(), b.GetId()) })
	return nil
}

// groups fills the runners and the consumer lags. A group the broker
// cannot describe is shown with its error; only a failure to ask at all
// fails the view.
func (s *ClusterService) groups(ctx context.Context, resp *apiv1.GetClusterResponse) error {
	names := make([]string, len(s.cfg.Groups))
	for i, g := range s.cfg.Groups {
		names[i] = g.Group
	}
	lags, err := s.cfg.Admin.Lag(ctx, names...)
	if err != nil {
		lags, err = describeErrors(err)
	}
	if err != nil {
		return fmt.Errorf("lag of %v: %w", names, err)
	}
	for _, g := range s.cfg.Groups {
		l, ok := lags[g.Group]
		out := &apiv1.ConsumerGroupLag{Group: g.Group, Role: g.Role}
		resp.ConsumerGroups = append(resp.ConsumerGroups, out)
		if !ok {
			out.Error = "not described by the broker"
			continue
		}
		out.State = l.State
		if err := l.Error(); err != nil {
			out.Error = err.Error()
			continue
		}
		out.TotalLag = l.Lag.Total()
		for _, pl := range l.Lag.Sorted() {
			committed := pl.Commit.At
			if committed < 0 {
				committed = -1
			}
			out.Partitions = append(out.Partitions, &apiv1.PartitionLag{Topic: pl.Topic, Partition: pl.Partition,
				Committed: committed, End: pl.End.Offset, Lag: pl.Lag})
		}
		if g.Role == RoleRunners {
			resp.Runners = append(resp.Runners, runnersOf(g.Group, l.Members)...)
		}
	}
	return nil
}

// describeErrors turns the error of a Lag call whose every describe
// failed at its coordinator (COORDINATOR_NOT_AVAILABLE while a group's
// coordinator loads, say) into each group's own error, which the view shows
// like any other group the broker could not describe. kadm returns those
// partial failures that way itself when at least one group was described.
// Any other error is returned.
func describeErrors(err error) (kadm.DescribedGroupLags, error) {
	se, ok := errors.AsType[*kadm.ShardErrors](err)
	if !ok {
		return nil, err
	}
	lags := kadm.DescribedGroupLags{}
	for _, e := range se.Errs {
		req, ok := e.Req.(*kmsg.DescribeGroupsRequest)
		if !ok {
			return nil, err
		}
		for _, g := range req.Groups {
			lags[g] = kadm.DescribedGroupLag{Group: g, Coordinator: e.Broker, DescribeErr: e.Err}
		}
	}
	return lags, nil
}

// runnersOf lists a runner group's members with their assignments.
func runnersOf(group string, members []kadm.DescribedGroupMember) []*apiv1.Runner {
	out := make([]*apiv1.Runner, 0, len(members))
	for _, m := range members {
		r := &apiv1.Runner{Group: group, ClientId: m.ClientID, MemberId: m.MemberID, ClientHost: m.ClientHost}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				parts := slices.Clone(t.Partitions)
				slices.Sort(parts)
				r.Partitions = append(r.Partitions, &apiv1.TopicPartitions{Topic: t.Topic, Partitions: parts})
			}
			slices.SortFunc(r.Partitions, func(a, b *apiv1.TopicPartitions) int { return cmp.Compare(a.GetTopic(), b.GetTopic()) })
		}
		out = append(out, r)
	}
	return out
}

// executorsOf lists the members of a directory, by pool then id.
func executorsOf(members []discovery.Member) []*apiv1.Executor {
	out := make([]*apiv1.Executor, 0, len(members))
	for _, m := range members {
		e := &apiv1.Executor{
			Id: m.ID, Pool: m.Pool, Labels: m.Labels, Version: m.Version,
			Slots: int32(m.Capacity), InFlight: int32(m.InFlight), CpuCores: m.CPUCores, MemoryBytes: m.MemoryBytes,
			State: m.State.String(),
		}
		if !m.Heartbeat.IsZero() {
			e.HeartbeatTime = timestamppb.New(m.Heartbeat)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *apiv1.Executor) int {
		return cmp.Or(cmp.Compare(a.GetPool(), b.GetPool()), cmp.Compare(a.GetId(), b.GetId()))
	})
	return out
}
