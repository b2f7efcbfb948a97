package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/stacktest"
	"github.com/sundialhq/sundial/internal/testenv"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/registry"
)

// TestApplyMany streams thousands of definitions, some invalid, through a
// registry on the real stack (Kafka and Cassandra) and checks every answer;
// applying them again is UNCHANGED, and a definition older than the one in
// force (a lower producer revision) is rejected by the registry naming
// "revision".
func TestApplyMany(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	cs := testenv.NeedCassandra(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	inst := stacktest.Install(ctx, t, k, cs, 4)
	names, st, enq := inst.Names, inst.Store, inst.Enqueuer
	quiet := slog.New(slog.DiscardHandler)
	reg, err := registry.New(registry.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Store: st, Waker: enq, Logger: quiet, SharedTopic: true})
	require.NoError(t, err)
	require.NoError(t, reg.Start(ctx))
	defer reg.Stop()
	c, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Logger: quiet})
	require.NoError(t, err)
	defer c.Close()

	const n, invalidEvery = 3000, 97
	specs := make([]*sundialv1.JobSpec, n)
	invalid := 0
	for i := range specs {
		specs[i] = spec(fmt.Sprintf("bulk.job-%05d", i))
		specs[i].Revision = new(uint64)
		*specs[i].Revision = 2
		if i%invalidEvery == 0 {
			specs[i].OwnerTeam = "" // required
			invalid++
		}
	}

	var (
		mu       sync.Mutex
		produced int
		results  = map[string]int{}
	)
	sum, err := c.ApplyMany(ctx, slices.Values(specs), client.ApplyOptions{
		MaxInFlight: 500, // well below n: the bound is exercised
		OnProduced:  func(client.Receipt) { mu.Lock(); produced++; mu.Unlock() },
		OnResult:    func(r client.ApplyResult) { results[r.ID]++ },
	})
	require.NoError(t, err)
	assert.Equal(t, n, sum.Read)
	assert.Equal(t, n-invalid, sum.Produced)
	assert.Equal(t, n-invalid, produced)
	assert.Equal(t, n-invalid, sum.Answered)
	assert.Equal(t, n-invalid, sum.Created)
	assert.Equal(t, invalid, sum.Rejected)
	assert.Zero(t, sum.Failed)
	assert.Len(t, results, n, "one result per definition")
	for id, count := range results {
		assert.Equal(t, 1, count, "results of %s", id)
	}
	require.Len(t, sum.Rejections, invalid)
	for _, r := range sum.Rejections {
		assert.Zero(t, r.Receipt, "%s: a locally invalid definition is not produced", r.ID)
		assert.ErrorContains(t, client.FieldErrors(r.Status), "owner_team: required", r.ID)
	}

	// Every valid definition is stored at the revision of its record.
	job, err := st.GetJob(ctx, "bulk.job-00001")
	require.NoError(t, err)
	assert.False(t, job.Deleted)
	assert.False(t, job.NextDue.IsZero())

	// The same again: nothing changes.
	sum, err = c.ApplyMany(ctx, slices.Values(specs), client.ApplyOptions{Encoding: sundialv1.EncodingJSON})
	require.NoError(t, err)
	assert.Equal(t, n-invalid, sum.Unchanged, "%+v", sum)
	assert.Zero(t, sum.Created+sum.Updated)

	// A lower producer revision than the one in force is refused by the
	// registry, with the field at fault.
	older := []*sundialv1.JobSpec{spec("bulk.job-00001"), spec("bulk.job-00002")}
	for _, s := range older {
		s.Revision = new(uint64)
		*s.Revision = 1
		s.Labels = map[string]string{"changed": "yes"}
	}
	sum, err = c.ApplyMany(ctx, slices.Values(older), client.ApplyOptions{})
	require.NoError(t, err)
	require.Equal(t, 2, sum.Rejected, "%+v", sum)
	for _, r := range sum.Rejections {
		assert.NotZero(t, r.Receipt.Topic, "rejected by the registry, so produced")
		assert.ErrorContains(t, client.FieldErrors(r.Status), "revision: 1 is lower than the revision in force, 2", r.ID)
	}
	after, err := st.GetJob(ctx, "bulk.job-00001")
	require.NoError(t, err)
	assert.Equal(t, job.Revision, after.Revision, "the rejected definition changed nothing")

	// ApplyMany gives up with ctx, saying how many answers are missing.
	short, cancelShort := context.WithCancel(ctx)
	cancelShort()
	_, err = c.ApplyMany(short, slices.Values(specs[:10]), client.ApplyOptions{})
	assert.ErrorIs(t, err, context.Canceled)
}
