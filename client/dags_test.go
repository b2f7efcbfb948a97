package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// A DAG definition and its tombstone are framed in one place: JSON keyed by
// the id with sundial-kind: dag, on the owner team's topic; the tombstone
// on the stored owner's (WithTeam).
func TestDagRecordsAreFramedForTheEngine(t *testing.T) {
	t.Parallel()
	names := topics.Names{Prefix: "p."}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.SeedTopics(4, names.TeamJobs("data"), names.TeamJobs("owner")))
	require.NoError(t, err)
	defer cluster.Close()
	c, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...)}, Topics: names, ByOwner: true})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	spec := &sundialv1.DagSpec{Id: "data.etl", OwnerTeam: "data"}
	applied, err := c.ApplyDag(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, names.TeamJobs("data"), applied.Topic)
	assert.Equal(t, names.Revision(applied.Topic, applied.Offset), applied.Revision)
	deleted, err := c.DeleteDag(client.WithTeam(ctx, "owner"), "data.etl")
	require.NoError(t, err)
	assert.Equal(t, names.TeamJobs("owner"), deleted.Topic, "the tombstone goes to the stored owner's topic")

	read, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics(names.TeamJobs("data"), names.TeamJobs("owner")),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer read.Close()
	got := map[string]*kgo.Record{}
	for len(got) < 2 {
		fs := read.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachRecord(func(r *kgo.Record) { got[r.Topic] = r })
	}
	def, tomb := got[names.TeamJobs("data")], got[names.TeamJobs("owner")]
	assert.Equal(t, "data.etl", string(def.Key))
	back := &sundialv1.DagSpec{}
	require.NoError(t, sundialv1.Unmarshal(sundialv1.ContentTypeJSON, def.Value, back))
	assert.Equal(t, "data", back.GetOwnerTeam())
	for _, r := range []*kgo.Record{def, tomb} {
		kind := ""
		for _, h := range r.Headers {
			if h.Key == sundialv1.HeaderKind {
				kind = string(h.Value)
			}
		}
		assert.Equal(t, sundialv1.KindDag, kind, r.Topic)
	}
	assert.Nil(t, tomb.Value, "a tombstone")
}
