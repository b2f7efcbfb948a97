package worker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/runner/target"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfigValidateReportsEveryBadField(t *testing.T) {
	t.Parallel()
	err := Config{Pool: "bad pool", Concurrency: -1}.Validate()
	require.Error(t, err)
	for _, want := range []string{"Kafka: the seed brokers", "RedisAddr: is required", "CassandraHosts: at least one host",
		`Pool: "bad pool" has characters`, "Concurrency: -1 is negative"} {
		assert.ErrorContains(t, err, want)
	}
	_, err = New(Config{})
	assert.ErrorContains(t, err, "Kafka")
	assert.NoError(t, Config{Kafka: []kgo.Opt{kgo.SeedBrokers("k:9092")}, RedisAddr: "r:6379", CassandraHosts: []string{"c"}}.Validate())
}

func TestGroupOfPool(t *testing.T) {
	t.Parallel()
	assert.Equal(t, runner.DefaultGroup, Group(""))
	assert.Equal(t, runner.DefaultGroup, Group(DefaultPool))
	assert.Equal(t, runner.DefaultGroup+"-billing", Group("billing"))
}

func TestHandlePanicsOnProgrammingErrors(t *testing.T) {
	t.Parallel()
	w, err := New(Config{Kafka: []kgo.Opt{kgo.SeedBrokers("k:9092")}, RedisAddr: "r:6379", CassandraHosts: []string{"c"}})
	require.NoError(t, err)
	ok := func(context.Context, *Run) error { return nil }
	w.Handle("billing.invoice", ok)
	assert.PanicsWithValue(t, `worker: handler "billing.invoice": registered twice`, func() { w.Handle("billing.invoice", ok) })
	assert.Panics(t, func() { w.Handle("has space", ok) })
	assert.Panics(t, func() { w.Handle("nil", nil) })
	w.Stop() // safe before Start
	w.Stop()
}

// TestHandlerGetsTheAttemptAndLogsToItsOutput calls a handler the way the
// runner's targets do.
func TestHandlerGetsTheAttemptAndLogsToItsOutput(t *testing.T) {
	t.Parallel()
	var process bytes.Buffer
	due := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var got *Run
	h := handler{logger: slog.New(slog.NewTextHandler(&process, nil)), fn: func(ctx context.Context, r *Run) error {
		got = r
		r.Log.Info("working", "items", 2)
		r.Progress(1, 2, "")
		r.Progress(2, 2, "done")
		if _, ok := Deadline(ctx); !ok {
			return errors.New("no deadline")
		}
		return Permanent(errors.New("ledger closed"))
	}}
	out := &target.Output{}
	run := &sundialv1.Run{RunId: "j@1", JobId: "j", Attempt: 2, DueTime: timestamppb.New(due), Payload: []byte("p"),
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "h"}}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	targets := &target.Targets{Handlers: map[string]target.Handler{"h": h}}
	err := targets.Execute(ctx, target.Request{Run: run, FencingToken: 7, Output: out})

	var te *target.Error
	require.ErrorAs(t, err, &te)
	assert.False(t, te.Retryable, "Permanent is not retried")
	assert.Equal(t, target.CodeHandler, te.Code)
	require.NotNil(t, got)
	assert.Equal(t, "j@1", got.ID)
	assert.Equal(t, "j", got.JobID)
	assert.Equal(t, uint32(2), got.Attempt)
	assert.Equal(t, due, got.Due)
	assert.Equal(t, []byte("p"), got.Payload)
	assert.Equal(t, int64(7), got.FencingToken)
	assert.Same(t, run, got.Proto())
	assert.Empty(t, got.BaseID, "not a child run")
	assert.Zero(t, got.ShardCount)

	lines := out.Lines()
	require.Len(t, lines, 3)
	assert.Contains(t, lines[0], "msg=working items=2")
	assert.Contains(t, lines[1], `msg="progress 1/2" progress_done=1 progress_total=2`)
	assert.Contains(t, lines[2], `msg="progress 2/2: done"`)
	assert.NotContains(t, lines[0], "run_id", "the run's record needs no run id on every line")
	assert.Equal(t, 3, strings.Count(process.String(), "run_id=j@1"), "the process log has every line, with the run's identity")

	failed := Fail("ledger_closed", true, errors.New("closed"))
	require.ErrorAs(t, failed, &te)
	assert.Equal(t, "ledger_closed", te.Code)
	assert.True(t, te.Retryable)
}

func TestHandlerOfAChildRunGetsItsShard(t *testing.T) {
	t.Parallel()
	var got *Run
	h := handler{logger: slog.New(slog.DiscardHandler), fn: func(_ context.Context, r *Run) error {
		got = r
		return nil
	}}
	run := &sundialv1.Run{RunId: "j@1/s/2", JobId: "j", Attempt: 1, BaseRunId: "j@1", ShardIndex: 2, ShardCount: 5,
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "h"}}}}
	targets := &target.Targets{Handlers: map[string]target.Handler{"h": h}}
	require.NoError(t, targets.Execute(context.Background(), target.Request{Run: run, Output: &target.Output{}}))
	require.NotNil(t, got)
	assert.Equal(t, "j@1/s/2", got.ID)
	assert.Equal(t, "j@1", got.BaseID)
	assert.Equal(t, 2, got.Shard)
	assert.Equal(t, 5, got.ShardCount)
}
