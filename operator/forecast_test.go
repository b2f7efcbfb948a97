package operator

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

func TestForecastCountsEveryOccurrenceOfTheHorizonByShardTeamAndPool(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	const shards = 4
	mem, err := memory.New(memory.Options{Now: func() time.Time { return now }})
	require.NoError(t, err)
	_, err = mem.InitCluster(ctx, shards)
	require.NoError(t, err)

	// A job's next occurrence as the registry writes it: a scheduled
	// entry carrying the definition.
	scheduled := func(spec *sundialv1.JobSpec, due time.Time) store.DueEntry {
		b, err := proto.Marshal(spec)
		require.NoError(t, err)
		job := store.Job{ID: spec.GetId(), Spec: b, Revision: 1, UpdatedAt: now.Add(-time.Hour)}
		_, err = mem.UpsertJob(ctx, job)
		require.NoError(t, err)
		return store.DueEntry{Due: due, JobID: spec.GetId(), Kind: store.KindScheduled, RunID: store.RunID(spec.GetId(), due), Attempt: 1,
			Revision: 1, Payload: job.Snapshot(job.UpdatedAt).Encode()}
	}
	every10 := cronJob("ten", "*/10 * * * *") // 10:10 .. 10:50 in the hour from 10:00
	pooled := cronJob("pooled", "0 * * * * *")
	pooled.Pool = "gpu"
	pooled.OwnerTeam = "other"
	sharded := cronJob("sharded", "30 10 * * *")
	sharded.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: 3}
	require.NoError(t, mem.PutDue(ctx,
		scheduled(every10, now.Truncate(time.Hour).Add(10*time.Minute)),
		scheduled(pooled, now.Truncate(time.Minute).Add(time.Minute)),
		scheduled(sharded, now.Truncate(time.Hour).Add(30*time.Minute)),
		// Fired entries wait in their bucket for its deletion: the
		// latest of a job is the pending one, and only it counts.
		scheduled(pooled, now.Truncate(time.Minute)),
		scheduled(every10, now.Truncate(time.Hour)),
		// A trigger past due has fired.
		store.DueEntry{Due: now.Add(-10 * time.Second), JobID: "ten", Kind: store.KindTrigger, RunID: "ten@2", Attempt: 1, Revision: 1},
		// A retry of "ten" counts once, read from the job in force.
		store.DueEntry{Due: now.Add(2 * time.Minute), JobID: "ten", Kind: store.KindRetry, RunID: "ten@1", Attempt: 2, Revision: 1},
		// Past the horizon: not read.
		scheduled(cronJob("late", "0 0 12 * * *"), now.Add(2*time.Hour)),
	))
	o := New(Config{Jobs: mem, Due: mem, Shards: shards, Now: func() time.Time { return now }})
	shardOf := func(id string) string { return strconv.Itoa(store.ShardOf(id, shards)) }
	row := func(at map[int]int) []int {
		r := make([]int, 60)
		for m, n := range at {
			r[m] += n
		}
		return r
	}
	everyMinuteFrom1 := map[int]int{}
	for m := 1; m < 60; m++ {
		everyMinuteFrom1[m] = 1
	}

	cases := []struct {
		name string
		q    ForecastQuery
		want map[string][]int
	}{
		{name: "by team: a team sees its own jobs only", q: ForecastQuery{Horizon: time.Hour, Group: ByTeam, Team: "team"}, want: map[string][]int{
			"team": row(map[int]int{10: 1, 20: 1, 30: 1 + 3, 40: 1, 50: 1, 2: 1}),
		}},
		{name: "by pool: every team for the cluster admin", q: ForecastQuery{Horizon: time.Hour, Group: ByPool}, want: map[string][]int{
			"default": row(map[int]int{10: 1, 20: 1, 30: 1 + 3, 40: 1, 50: 1, 2: 1}),
			"gpu":     row(everyMinuteFrom1),
		}},
	}
	byShard := map[string][]int{}
	add := func(key string, at map[int]int) {
		if byShard[key] == nil {
			byShard[key] = make([]int, 60)
		}
		for m, n := range at {
			byShard[key][m] += n
		}
	}
	add(shardOf("ten"), map[int]int{10: 1, 20: 1, 30: 1, 40: 1, 50: 1, 2: 1})
	add(shardOf("sharded"), map[int]int{30: 3})
	add(shardOf("pooled"), everyMinuteFrom1)
	cases = append(cases, struct {
		name string
		q    ForecastQuery
		want map[string][]int
	}{name: "by shard: a sharded job counts its shards per occurrence", q: ForecastQuery{Horizon: time.Hour, Group: ByShard}, want: byShard})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, err := o.Forecast(ctx, c.q)
			require.NoError(t, err)
			assert.Equal(t, now.Truncate(time.Minute), f.Start)
			assert.Equal(t, 60, f.Minutes)
			assert.False(t, f.Truncated)
			assert.Equal(t, c.want, f.Rows)
		})
	}

	t.Run("the bound of entries read makes a lower bound, and says so", func(t *testing.T) {
		t.Parallel()
		f, err := o.Forecast(ctx, ForecastQuery{Horizon: time.Hour, MaxEntries: 1})
		require.NoError(t, err)
		assert.True(t, f.Truncated)
		assert.Equal(t, 1, f.EntriesRead)
	})
	t.Run("a horizon past an hour is refused", func(t *testing.T) {
		t.Parallel()
		_, err := o.Forecast(ctx, ForecastQuery{Horizon: 2 * time.Hour})
		require.ErrorIs(t, err, ErrBadForecast)
	})
}
