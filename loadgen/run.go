package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/topics"
)

// Options configure a standalone run of the load generator against a
// pipeline that is already running (`sundial loadgen`).
type Options struct {
	// Kafka are the options of every Kafka client of the load: the seed brokers
	// (kgo.SeedBrokers) and the connection's TLS and SASL, as
	// connect.Kafka.Options builds them from the command's flags. Required.
	Kafka []kgo.Opt
	// Topics names the installation's topics.
	Topics topics.Names
	// Workload to define. Its Target may be left empty: the run then
	// serves its own counting Downstream on DownstreamAddr. Its Start is
	// set by the run.
	Workload Workload
	// DownstreamAddr is where the counting downstream listens when the
	// workload has no target. Default "127.0.0.1:0".
	DownstreamAddr string
	// EffectDuration is how long the counting downstream takes to apply
	// one effect (see DownstreamConfig). Default DefaultEffectDuration.
	EffectDuration time.Duration
	// Lead: steady: the wait between the recurring jobs being accepted and
	// the window (the one-offs are registered in it); herd: how far ahead
	// of now the herd is due. Default 30s.
	Lead time.Duration
	// Drain: after the window, how long runs due in it may still start
	// before they count as lost. Default 60s.
	Drain time.Duration
	// Cleanup deletes every job with a tombstone at the end.
	Cleanup bool
	// Progress receives progress lines; Logger the warnings.
	Progress io.Writer
	Logger   *slog.Logger
}

// Summary is the outcome of a standalone run.
type Summary struct {
	Plan       *Plan
	WindowFrom time.Time
	WindowTo   time.Time
	Trigger    *hdrhistogram.Histogram
	Dispatch   *hdrhistogram.Histogram
	Counts     Counts
	Effects    Effects
	Generator  Counters
	// EffectsCounted is false when the jobs called a target other than the
	// run's own downstream.
	EffectsCounted bool
}

// Run defines the workload through the Go client, measures the window and
// the drain after it, and returns the summary.
func Run(ctx context.Context, o Options) (*Summary, error) {
	if len(o.Kafka) == 0 {
		return nil, errors.New("loadgen: kafka: required (at least kgo.SeedBrokers)")
	}
	if o.Lead == 0 {
		o.Lead = 30 * time.Second
	}
	if o.Drain == 0 {
		o.Drain = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	say := func(format string, args ...any) {
		if o.Progress != nil {
			_, _ = fmt.Fprintf(o.Progress, "loadgen: "+format+"\n", args...)
		}
	}
	w := o.Workload
	sum := &Summary{}
	var ds *Downstream
	if w.Target == (Target{}) {
		ds = NewDownstream(DownstreamConfig{EffectDuration: o.EffectDuration})
		if err := ds.Start(ctx, cmpOr(o.DownstreamAddr, "127.0.0.1:0")); err != nil {
			return nil, err
		}
		defer ds.Stop()
		w.Target.URL = ds.URL()
		sum.EffectsCounted = true
		say("counting downstream at %s", ds.URL())
	}
	w.Start = time.Now().Add(o.Lead)
	if !w.HerdAt.IsZero() {
		w.HerdAt = time.Now().Add(o.Lead)
	}
	plan, err := NewPlan(w)
	if err != nil {
		return nil, err
	}
	sum.Plan = plan
	// The jobs go to their team's topic, the only definitions a registry
	// reads by default; it is created if missing.
	if _, err := topics.EnsureWith(ctx, o.Kafka, []topics.Spec{o.Topics.TeamJobsSpec(plan.Team)}, -1); err != nil {
		return nil, fmt.Errorf("create the team's topic: %w", err)
	}
	cl, err := client.New(client.Config{Kafka: o.Kafka, Topics: o.Topics, ByOwner: true, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rec := NewRecorder(plan.ParseRunID, plan.Start, plan.Start.Add(plan.Duration))
	gen, err := New(Config{Kafka: o.Kafka, Topics: o.Topics, Plan: plan, Client: cl, Recorder: rec, Progress: o.Progress, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	if err := gen.Start(ctx); err != nil {
		return nil, err
	}
	defer gen.Stop()
	if o.Cleanup {
		defer func() {
			say("deleting %d jobs (tombstones)", plan.Jobs)
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Minute)
			defer cancel()
			if err := gen.Cleanup(cctx); err != nil {
				o.Logger.Warn("loadgen: cleanup", "err", err)
			}
		}()
	}

	var from, to time.Time
	if plan.Herd() {
		say("registering a herd of %d one-offs due at %s", plan.Jobs, plan.HerdAt.Format(time.RFC3339Nano))
		if err := gen.Register(ctx, 0, plan.Jobs); err != nil {
			return nil, err
		}
		hctx, cancel := context.WithDeadline(ctx, plan.HerdAt)
		err := gen.WaitAccepted(hctx, plan.Jobs)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("the herd was not accepted before it fell due (raise the lead): %w", err)
		}
		from, to = plan.HerdAt, plan.HerdAt.Add(time.Millisecond)
	} else {
		recurring := plan.IntervalJobs + plan.CronJobs
		say("registering %d recurring jobs", recurring)
		if err := gen.Register(ctx, 0, recurring); err != nil {
			return nil, err
		}
		if err := gen.WaitAccepted(ctx, recurring); err != nil {
			return nil, err
		}
		from = time.Now().Add(o.Lead).Truncate(time.Second)
		to = from.Add(plan.Duration)
		plan.Start = from
		if plan.AtJobs > 0 {
			say("registering %d one-offs over the window", plan.AtJobs)
			if err := gen.Register(ctx, recurring, plan.Jobs); err != nil {
				return nil, err
			}
			actx, cancel := context.WithDeadline(ctx, from)
			err := gen.WaitAccepted(actx, plan.Jobs)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("the one-offs were not accepted before the window (raise the lead): %w", err)
			}
		}
	}
	rec.SetWindow(from, to)
	sum.WindowFrom, sum.WindowTo = from, to
	say("window %s to %s", from.Format(time.RFC3339), to.Format(time.RFC3339))
	if err := sleepCtx(ctx, time.Until(to)); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(o.Drain)
	for {
		c := rec.Result(plan.Expected(from, to))
		if c.Lost == 0 || !time.Now().Before(deadline) {
			break
		}
		say("draining: %d of %d runs not started", c.Lost, c.Expected)
		if err := sleepCtx(ctx, min(5*time.Second, time.Until(deadline))); err != nil {
			return nil, err
		}
	}
	sum.Counts = rec.Result(plan.Expected(from, to))
	sum.Trigger, sum.Dispatch = rec.Trigger(), rec.Dispatch()
	if ds != nil {
		sum.Effects = ds.Effects()
	}
	sum.Generator = gen.Counters()
	return sum, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if !backoff.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}
