package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/deadletter"
	"github.com/sundialhq/sundial/store"
)

// TestDlqReplayUsesTheCurrentDefinition: "sundial dlq replay" re-runs a
// dead run with its job's definition in force, as the API's
// ReplayDeadLetters does and docs/workers.md tells users (fix the job, then
// replay), and skips a run whose job is gone.
func TestDlqReplayUsesTheCurrentDefinition(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	fixed := &sundialv1.JobSpec{Id: "team-a.sync", OwnerTeam: "team-a", Payload: []byte("fixed"),
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "fixed"}}}}
	value, err := proto.Marshal(fixed)
	require.NoError(t, err)
	st := jobsByID{fixed.GetId(): {ID: fixed.GetId(), Spec: value, Revision: 9}}

	due := time.Date(2026, 11, 28, 20, 0, 0, 0, time.UTC)
	dead := func(job string) *sundialv1.DeadLetter {
		return &sundialv1.DeadLetter{
			Run: &sundialv1.Run{RunId: store.RunID(job, due), JobId: job, DueTime: timestamppb.New(due), Attempt: 3,
				OwnerTeam: "team-a", Payload: []byte("broken"), DefinitionOffset: 4,
				Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "broken"}}}},
			Attempts: 3, DeadAt: timestamppb.New(due.Add(time.Minute)), LastError: &sundialv1.RunError{Code: "http_500"},
		}
	}
	entries, err := deadletter.ReplayEntries([]*sundialv1.DeadLetter{dead("team-a.sync"), dead("team-a.gone")}, due.Add(time.Hour))
	require.NoError(t, err)
	replay, skipped, err := withCurrentDefinitions(ctx, st, entries)
	require.NoError(t, err)
	assert.Equal(t, []string{store.RunID("team-a.gone", due)}, skipped)
	require.Len(t, replay, 1)
	run := &sundialv1.Run{}
	require.NoError(t, proto.Unmarshal(replay[0].Payload, run))
	assert.Equal(t, "fixed", string(run.GetPayload()))
	assert.Equal(t, "fixed", run.GetTarget().GetHandler().GetName())
	assert.EqualValues(t, 9, run.GetDefinitionOffset())
	assert.EqualValues(t, 9, replay[0].Revision)
	assert.EqualValues(t, 4, run.GetAttempt(), "a new attempt after the dead run's three")
}

// jobsByID is a deadletter.Jobs over a map.
type jobsByID map[string]store.Job

func (m jobsByID) GetJob(_ context.Context, id string) (store.Job, error) {
	if j, ok := m[id]; ok {
		return j, nil
	}
	return store.Job{}, store.ErrNotFound
}
