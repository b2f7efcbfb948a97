package worker

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// Handler executes one attempt of a run. ctx ends when the job's timeout
// passes, when the lease is lost (another runner may then take the run) or
// when the worker stops; a handler must return soon after. Returning nil is
// success. Any other error fails the attempt and is retried by the job's
// retry policy, unless it is Permanent (or a Fail with retryable false).
type Handler func(ctx context.Context, r *Run) error

// Run is what a handler is given about the attempt it executes.
type Run struct {
	// ID is the run's id, the same on every attempt and redelivery: use it
	// as the idempotency key of the handler's effects downstream.
	ID string
	// JobID is the job the run belongs to.
	JobID string
	// Attempt is 1 for the first attempt.
	Attempt uint32
	// Replay is true when the run was delivered before (an attempt after
	// the first, or a run with a checkpoint): its effects may already have
	// happened once, keyed by ID.
	Replay bool
	// Due is the run's due time (the one in its id).
	Due time.Time
	// Payload is the job's payload, or the trigger's override.
	Payload []byte
	// FencingToken is the token of the lease this attempt holds. It grows
	// with every lease of the job: a downstream that remembers the largest
	// token it has seen per job can refuse a write carrying a smaller one,
	// from a holder that lost its lease without knowing yet.
	FencingToken int64
	// BaseID, Shard and ShardCount describe a child run of a BROADCAST or
	// SHARDED run: the run id of the base run it is part of (ID is the
	// child's own), its index among the base run's children from 0, and
	// how many there are. A SHARDED handler does shard Shard of ShardCount
	// of the work; the base run succeeds when every shard has. BaseID is
	// empty, and Shard and ShardCount are 0, for any other run.
	BaseID            string
	Shard, ShardCount int
	// Log writes to the worker's logger and, as text lines, to the run's
	// record: the last lines (target.MaxOutputLines, target.MaxOutputBytes)
	// travel on the attempt's final event and `sundial runs get` prints
	// them. While the attempt runs they also reach its live tail (`sundial
	// runs logs --follow`), about a second later.
	Log *slog.Logger

	proto *sundialv1.Run
	out   *target.Output
}

// Deadline is when the job's timeout ends this attempt (ctx's deadline).
func Deadline(ctx context.Context) (time.Time, bool) { return ctx.Deadline() }

// Progress records how far the attempt is, done of total units, with an
// optional note, as a line of the run's log ("progress 3/10: note"). It is
// cheap: nothing is written to Kafka until the attempt ends.
func (r *Run) Progress(done, total int64, note string) {
	line := fmt.Sprintf("progress %d/%d", done, total)
	if note != "" {
		line += ": " + note
	}
	r.Log.Info(line, "progress_done", done, "progress_total", total)
}

// Proto returns the run as the runner received it (target, retry policy,
// DAG coordinates and the rest). It must not be modified.
func (r *Run) Proto() *sundialv1.Run { return r.proto }

// newRun builds the Run of req, its logger writing to base and to the
// attempt's output.
func newRun(req target.Request, base *slog.Logger) *Run {
	pr := req.Run
	out := req.Output
	if out == nil {
		out = &target.Output{}
	}
	attrs := []slog.Attr{slog.String("run_id", pr.GetRunId()), slog.String("job_id", pr.GetJobId()), slog.Int("attempt", int(pr.GetAttempt()))}
	record := slog.NewTextHandler(outputWriter{out}, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		// The run's record is about this run: its identity is already on
		// it, and the time is the line's own.
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.String(slog.TimeKey, a.Value.Time().UTC().Format("15:04:05.000"))
			}
			return a
		},
	})
	h := slog.NewMultiHandler(base.Handler().WithAttrs(attrs), record)
	return &Run{
		ID: pr.GetRunId(), JobID: pr.GetJobId(), Attempt: pr.GetAttempt(), Due: pr.GetDueTime().AsTime(),
		Payload: pr.GetPayload(), FencingToken: req.FencingToken, Replay: pr.GetAttempt() > 1, Log: slog.New(h), proto: pr, out: out,
		BaseID: pr.GetBaseRunId(), Shard: int(pr.GetShardIndex()), ShardCount: int(pr.GetShardCount()),
	}
}

// outputWriter turns each write of a slog text handler (one record, one
// line) into a line of the attempt's output.
type outputWriter struct{ out *target.Output }

func (w outputWriter) Write(p []byte) (int, error) {
	w.out.Append(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// handler adapts a Handler to the runner's target.AttemptHandler.
type handler struct {
	fn     Handler
	logger *slog.Logger
}

func (h handler) Handle(ctx context.Context, run *sundialv1.Run) error {
	return h.HandleAttempt(ctx, target.Request{Run: run})
}

func (h handler) HandleAttempt(ctx context.Context, req target.Request) error {
	return h.fn(ctx, newRun(req, h.logger))
}

// Permanent marks err as a failure another attempt cannot fix: the run is
// dead-lettered without further retries.
func Permanent(err error) error { return target.Permanent(err) }

// Fail returns a failure with a code of the handler's choosing (the run
// event's error code, usable in the job's RetryPolicy.non_retryable_errors)
// and whether another attempt may succeed.
func Fail(code string, retryable bool, err error) error { return target.Fail(code, retryable, err) }
