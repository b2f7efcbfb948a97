package apiserver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/internal/topics"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

func TestGetCluster(t *testing.T) {
	t.Parallel()
	s := setupStack(t, 2, topics.Names.Events)
	ctx := t.Context()
	now := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)

	// Shard 1 claimed by a dispatcher whose watermark is 30 s behind; the
	// other three (setupStack initialises four) never claimed.
	epoch, err := s.store.ClaimShard(ctx, 1, "dispatcher-a", 0)
	require.NoError(t, err)
	require.NoError(t, s.store.AdvanceWatermark(ctx, 1, epoch, now.Add(-30*time.Second)))

	// A runner group with one live member reading the events topic, and a
	// history group with a commit two records behind the end.
	runnerGroup, historyGroup := s.names.Prefix+"runners", s.names.Prefix+"history"
	for range 3 {
		s.produce(t, s.names.Events(), "job-a", &apiv1.GetClusterRequest{})
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ConsumerGroup(runnerGroup),
		kgo.ConsumeTopics(s.names.Events()), kgo.ClientID("runner-test"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	t.Cleanup(member.Close)
	offs := kadm.Offsets{}
	ends, err := s.admin.ListEndOffsets(ctx, s.names.Events())
	require.NoError(t, err)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset == 3 {
			offs.AddOffset(o.Topic, o.Partition, 1, -1)
		}
	})
	require.Len(t, offs[s.names.Events()], 1, "the three records share one partition")
	_, err = s.admin.CommitOffsets(ctx, historyGroup, offs)
	require.NoError(t, err)
	// The member joins the group as it polls; wait for the broker to show
	// it stable with both partitions assigned.
	pollCtx, stopPolling := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			member.PollFetches(pollCtx)
		}
	}()
	defer func() { stopPolling(); <-polled }()
	require.Eventually(t, func() bool {
		groups, err := s.admin.DescribeGroups(ctx, runnerGroup)
		if err != nil {
			return false
		}
		g := groups[runnerGroup]
		return g.State == "Stable" && len(g.AssignedPartitions()[s.names.Events()]) == 2
	}, 2*time.Minute, 100*time.Millisecond, "runner member assigned")

	svc, err := apiserver.NewClusterService(apiserver.ClusterServiceConfig{Shards: s.store, Admin: s.admin,
		Groups: []apiserver.ConsumerGroup{{Role: apiserver.RoleRunners, Group: runnerGroup}, {Role: "history", Group: historyGroup}},
		Now:    func() time.Time { return now }, Logger: s.logger})
	require.NoError(t, err)
	srv := serve(t, func(mux *http.ServeMux) { mux.Handle(apiv1connect.NewClusterServiceHandler(svc)) })
	client := apiv1connect.NewClusterServiceClient(srv.Client(), srv.URL)

	t.Run("cluster admin", func(t *testing.T) {
		resp, err := client.GetCluster(ctx, as("cluster-admin", &apiv1.GetClusterRequest{}))
		require.NoError(t, err)
		v := resp.Msg
		assert.Equal(t, int32(4), v.GetShardCount())
		require.Len(t, v.GetDispatchers(), 1)
		d := v.GetDispatchers()[0]
		assert.Equal(t, "dispatcher-a", d.GetId())
		require.Len(t, d.GetShards(), 1)
		assert.Equal(t, int32(1), d.GetShards()[0].GetShard())
		assert.Equal(t, epoch, d.GetShards()[0].GetEpoch())
		assert.Equal(t, 30*time.Second, d.GetShards()[0].GetWatermarkLag().AsDuration())
		assert.Len(t, v.GetUnownedShards(), 3)

		require.Len(t, v.GetRunners(), 1)
		r := v.GetRunners()[0]
		assert.Equal(t, runnerGroup, r.GetGroup())
		assert.Equal(t, "runner-test", r.GetClientId())
		require.Len(t, r.GetPartitions(), 1)
		assert.Equal(t, []int32{0, 1}, r.GetPartitions()[0].GetPartitions())

		require.Len(t, v.GetConsumerGroups(), 2)
		hist := v.GetConsumerGroups()[1]
		assert.Equal(t, "history", hist.GetRole())
		assert.Empty(t, hist.GetError())
		assert.Equal(t, int64(2), hist.GetTotalLag(), "partitions: %v", hist.GetPartitions())
		assert.NotEmpty(t, v.GetUnavailable(), "in-flight runs and breakers are named as unavailable")
	})
	for _, caller := range []string{"owner", "other"} {
		t.Run(caller, func(t *testing.T) {
			_, err := client.GetCluster(ctx, as(caller, &apiv1.GetClusterRequest{}))
			requireConnectCode(t, connect.CodePermissionDenied, err)
			assert.NotContains(t, err.Error(), "alpha")
			assert.NotContains(t, err.Error(), "beta")
		})
	}
	t.Run("no principal", func(t *testing.T) {
		_, err := client.GetCluster(ctx, as("", &apiv1.GetClusterRequest{}))
		requireConnectCode(t, connect.CodeUnauthenticated, err)
	})
}

// TestGetClusterExecutors: the view lists the executors a discovery
// Directory reads from sundial.executors, with their slots and runs in
// flight, and no longer calls in-flight runs unavailable.
func TestGetClusterExecutors(t *testing.T) {
	t.Parallel()
	s := setupStack(t, 1, topics.Names.Executors)
	ctx := t.Context()
	kopts := []kgo.Opt{kgo.SeedBrokers(s.brokers...)}

	ann, err := discovery.NewAnnouncer(discovery.AnnouncerConfig{
		Kafka: kopts, Topics: s.names, ID: "exec-1", Pool: "gpu", Capacity: 5, InFlight: func() int { return 2 },
		Interval: time.Second, Logger: s.logger,
	})
	require.NoError(t, err)
	require.NoError(t, ann.Start(ctx))
	t.Cleanup(ann.Stop)
	dir, err := discovery.NewDirectory(discovery.DirectoryConfig{Kafka: kopts, Topics: s.names, Logger: s.logger})
	require.NoError(t, err)
	require.NoError(t, dir.Start(ctx))
	t.Cleanup(dir.Stop)
	for len(dir.Live("gpu")) == 0 {
		select {
		case <-dir.Changes():
		case <-ctx.Done():
			t.Fatalf("exec-1 never announced: %v", ctx.Err())
		}
	}

	svc, err := apiserver.NewClusterService(apiserver.ClusterServiceConfig{Shards: s.store, Admin: s.admin, Executors: dir,
		Groups: []apiserver.ConsumerGroup{{Role: apiserver.RoleRunners, Group: s.names.Prefix + "runners"}},
		Now:    time.Now, Logger: s.logger})
	require.NoError(t, err)
	srv := serve(t, func(mux *http.ServeMux) { mux.Handle(apiv1connect.NewClusterServiceHandler(svc)) })
	resp, err := apiv1connect.NewClusterServiceClient(srv.Client(), srv.URL).GetCluster(ctx, as("cluster-admin", &apiv1.GetClusterRequest{}))
	require.NoError(t, err)
	require.Len(t, resp.Msg.GetExecutors(), 1, "%v", resp.Msg.GetExecutors())
	e := resp.Msg.GetExecutors()[0]
	assert.Equal(t, "exec-1", e.GetId())
	assert.Equal(t, "gpu", e.GetPool())
	assert.Equal(t, int32(5), e.GetSlots())
	assert.Equal(t, int32(2), e.GetInFlight())
	assert.Equal(t, "live", e.GetState())
	for _, u := range resp.Msg.GetUnavailable() {
		assert.NotContains(t, u, "in-flight", "discovery provides them")
	}
}
