package deadletter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

func letter(job string, due, deadAt time.Time, attempts uint32) *sundialv1.DeadLetter {
	return &sundialv1.DeadLetter{
		Run:       &sundialv1.Run{RunId: store.RunID(job, due), JobId: job, Attempt: attempts, DueTime: timestamppb.New(due)},
		LastError: &sundialv1.RunError{Code: "http_500"}, Attempts: attempts, DeadAt: timestamppb.New(deadAt),
	}
}

func TestReadFiltersAndReplay(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "dlq"))
	require.NoError(t, err)
	defer c.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer cl.Close()
	ctx := context.Background()

	empty, err := Read(ctx, opts, "dlq", Filter{})
	require.NoError(t, err)
	assert.Empty(t, empty)

	dls := []*sundialv1.DeadLetter{
		letter("a", t0, t0.Add(time.Minute), 3),
		letter("b", t0, t0.Add(2*time.Minute), 1),
		letter("a", t0.Add(time.Hour), t0.Add(3*time.Minute), 2),
		letter("a", t0, t0.Add(4*time.Minute), 3), // the first run of a, dead again after a replay
	}
	for _, dl := range dls {
		val, err := proto.Marshal(dl)
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "dlq", Key: []byte(dl.GetRun().GetJobId()), Value: val}).FirstErr())
	}
	tests := []struct {
		name string
		f    Filter
		want int
	}{
		{"all", Filter{}, 4},
		{"job", Filter{JobID: "a"}, 3},
		{"run", Filter{RunID: store.RunID("a", t0)}, 2},
		{"since", Filter{Since: t0.Add(2 * time.Minute)}, 3},
		{"until is exclusive", Filter{Until: t0.Add(2 * time.Minute)}, 1},
		{"window and job", Filter{JobID: "a", Since: t0.Add(2 * time.Minute), Until: t0.Add(4 * time.Minute)}, 1},
	}
	for _, tt := range tests {
		got, err := Read(ctx, opts, "dlq", tt.f)
		require.NoError(t, err, tt.name)
		assert.Len(t, got, tt.want, tt.name)
		for i := 1; i < len(got); i++ {
			assert.False(t, got[i].GetDeadAt().AsTime().Before(got[i-1].GetDeadAt().AsTime()), "oldest first")
		}
	}

	all, err := Read(ctx, opts, "dlq", Filter{JobID: "a"})
	require.NoError(t, err)
	now := t0.Add(time.Hour + 123*time.Microsecond)
	entries, err := ReplayEntries(all, now)
	require.NoError(t, err)
	require.Len(t, entries, 2, "one entry per run")
	before := map[string]int{store.RunID("a", t0): 3, store.RunID("a", t0.Add(time.Hour)): 2}
	for _, e := range entries {
		assert.Equal(t, store.KindRetry, e.Kind)
		// The replay is a new attempt: the earlier ones stay in the run's
		// history rather than being overwritten by a second attempt 1.
		assert.Equal(t, before[e.RunID]+1, e.Attempt, "the attempt after the dead run's")
		assert.Equal(t, store.Truncate(now), e.Due)
		run := &sundialv1.Run{}
		require.NoError(t, proto.Unmarshal(e.Payload, run))
		assert.Equal(t, e.RunID, run.GetRunId(), "the run id is kept")
		assert.EqualValues(t, before[e.RunID]+1, run.GetAttempt())
		assert.EqualValues(t, before[e.RunID], run.GetAttemptsBeforeReplay(), "the retry budget counts from the replay")
		assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_REPLAY, run.GetOrigin())
	}
}

// TestWithDefinition: a replay runs with the job's current definition,
// every field a definition gives a run, keeping the run's identity and
// attempt; an entry without a run is left for the dispatcher to build.
func TestWithDefinition(t *testing.T) {
	t.Parallel()
	es, err := ReplayEntries([]*sundialv1.DeadLetter{letter("team-a.job", t0, t0.Add(time.Second), 2)}, t0.Add(time.Minute))
	require.NoError(t, err)
	spec := &sundialv1.JobSpec{
		Id: "team-a.job", OwnerTeam: "team-a", Payload: []byte("fixed"), Labels: map[string]string{"env": "prod"},
		Target:   &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "fixed"}}},
		Priority: sundialv1.Priority_PRIORITY_HIGH, Retry: &sundialv1.RetryPolicy{MaxAttempts: 7},
		ConcurrencyLimit: 2, OverlapPolicy: sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID, Pool: "gpu",
		Timeout: durationpb.New(time.Minute), QueueDelay: durationpb.New(2 * time.Second),
	}
	e := es[0]
	require.NoError(t, WithDefinition(&e, spec, 42))
	assert.EqualValues(t, 42, e.Revision)
	run := &sundialv1.Run{}
	require.NoError(t, proto.Unmarshal(e.Payload, run))
	assert.Equal(t, store.RunID("team-a.job", t0), run.GetRunId())
	assert.EqualValues(t, 3, run.GetAttempt())
	assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_REPLAY, run.GetOrigin())
	assert.Equal(t, "fixed", string(run.GetPayload()))
	assert.Equal(t, "fixed", run.GetTarget().GetHandler().GetName())
	assert.EqualValues(t, 42, run.GetDefinitionOffset())
	assert.Equal(t, "gpu", run.GetPool())
	assert.Equal(t, sundialv1.Priority_PRIORITY_HIGH, run.GetPriority())
	assert.EqualValues(t, 7, run.GetRetry().GetMaxAttempts())

	empty := store.DueEntry{RunID: "team-a.job@1", JobID: "team-a.job"}
	require.NoError(t, WithDefinition(&empty, spec, 42))
	assert.Empty(t, empty.Payload)
	assert.EqualValues(t, 42, empty.Revision)
}

// TestReplayOfATooLargeRunRebuildsItFromTheJob: the dispatcher's dead
// letter of a run refused as too large lacks the payload and target; its
// replay carries no run, so the dispatcher builds it from the job again,
// while any other dead letter is replayed as it was.
func TestReplayOfATooLargeRunRebuildsItFromTheJob(t *testing.T) {
	t.Parallel()
	big := letter("team-a.big", t0, t0.Add(time.Second), 1)
	big.LastError = &sundialv1.RunError{Code: CodeRecordTooLarge, Message: "dispatch: run record is 1000400 bytes, over the limit"}
	other := letter("team-a.other", t0, t0.Add(time.Second), 3)
	es, err := ReplayEntries([]*sundialv1.DeadLetter{big, other}, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Len(t, es, 2)
	assert.Equal(t, store.RunID("team-a.big", t0), es[0].RunID)
	assert.Equal(t, store.KindRetry, es[0].Kind)
	assert.Empty(t, es[0].Payload, "a too-large run is built from the job again")
	assert.NotEmpty(t, es[1].Payload, "any other dead run is replayed as it was")
}
