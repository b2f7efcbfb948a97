package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/loadgen"
)

func loadgenCommand() *cli.Command {
	return &cli.Command{
		Name:  "loadgen",
		Usage: "define N jobs through the Go client against a running pipeline and measure trigger latency, lost and duplicate runs",
		Description: `Produces --jobs job definitions to sundial.jobs (job ids "<prefix>-<i>"), either
a steady mix of schedule kinds whose trigger rate is --rate (interval jobs with
phases spread evenly over their period, hourly cron jobs, one-offs over the
window) or, with --herd, one-offs all due in the same instant. It reads
sundial.events and the run topics and prints trigger and dispatch latency
percentiles and the lost, duplicate-execution and duplicate-effect counts.
The jobs call the load generator's own counting HTTP downstream unless
--handler names a runner handler; a runner refuses loopback and private
addresses by default, so give it --egress-allow for the downstream's address
(e.g. sundial runner --egress-allow 127.0.0.0/8 on the local stack). The jobs are deleted (tombstones) at the end
unless --keep.

Example, against a running pipeline on the local stack:
  source <(deploy/local/stack.sh env) && sundial loadgen --jobs 10000 --rate 100 --duration 1m`,
		Flags: append(kafkaFlags(),
			&cli.IntFlag{Name: "jobs", Value: 10000, Usage: "number of job definitions (at most 1,000,000)", Sources: envVar("jobs")},
			&cli.FloatFlag{Name: "rate", Value: 100, Usage: "planned triggers/s of the steady mix", Sources: envVar("rate")},
			&cli.DurationFlag{Name: "duration", Value: time.Minute, Usage: "length of the measured window", Sources: envVar("duration")},
			&cli.StringFlag{Name: "mix", Value: "interval=0.85,cron=0.10,at=0.05", Usage: "shares of schedule kinds", Sources: envVar("mix")},
			&cli.BoolFlag{Name: "herd", Usage: "define one-offs all due at the same instant, --lead from now, instead of the steady mix", Sources: envVar("herd")},
			&cli.DurationFlag{Name: "lead", Value: 30 * time.Second, Usage: "wait between registration and the window (herd: how far ahead it is due)", Sources: envVar("lead")},
			&cli.DurationFlag{Name: "drain", Value: time.Minute, Usage: "how long runs due in the window may still start before they count as lost", Sources: envVar("drain")},
			&cli.StringFlag{Name: "prefix", Usage: "job id prefix (default lg<unix time>)", Sources: envVar("prefix")},
			&cli.StringFlag{Name: "handler", Usage: "call this runner handler (e.g. noop) instead of the counting downstream", Sources: envVar("handler")},
			&cli.StringFlag{Name: "downstream-addr", Value: "127.0.0.1:0", Usage: "where the counting downstream listens (the runners must reach it)", Sources: envVar("downstream-addr")},
			&cli.IntFlag{Name: "payload-bytes", Value: 64, Usage: "payload of each job", Sources: envVar("payload-bytes")},
			&cli.DurationFlag{Name: "effect-duration", Value: loadgen.DefaultEffectDuration, Usage: "how long the counting downstream takes to apply one effect", Sources: envVar("effect-duration")},
			&cli.BoolFlag{Name: "keep", Usage: "do not delete the jobs at the end", Sources: envVar("keep")},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var bad []error
			kopts, err := kafkaOptions(cmd)
			if err != nil {
				bad = append(bad, err)
			}
			mix, err := loadgen.ParseMix(cmd.String("mix"))
			if err != nil {
				bad = append(bad, fmt.Errorf("--mix: %w", err))
			}
			if err := errors.Join(bad...); err != nil {
				return err
			}
			prefix := cmd.String("prefix")
			if prefix == "" {
				prefix = "lg" + strconv.FormatInt(time.Now().Unix(), 10)
			}
			w := loadgen.Workload{Prefix: prefix, Jobs: cmd.Int("jobs"), Rate: cmd.Float("rate"), Duration: cmd.Duration("duration"),
				Mix: mix, PayloadBytes: cmd.Int("payload-bytes"), Target: loadgen.Target{Handler: cmd.String("handler")}}
			if cmd.Bool("herd") {
				w.HerdAt = time.Now() // moved to now + lead by the run
			}
			out := cmd.Root().Writer
			sum, err := loadgen.Run(ctx, loadgen.Options{
				Kafka: kopts, Topics: topics.Names{Prefix: cmd.String("topic-prefix")}, Workload: w,
				DownstreamAddr: cmd.String("downstream-addr"), EffectDuration: cmd.Duration("effect-duration"), Lead: cmd.Duration("lead"), Drain: cmd.Duration("drain"),
				Cleanup: !cmd.Bool("keep"), Progress: out, Logger: slog.New(slog.NewTextHandler(cmd.Root().ErrWriter, nil)),
			})
			if err != nil {
				return err
			}
			ms := func(v int64) float64 { return float64(v) / 1000 }
			t, d := sum.Trigger, sum.Dispatch
			_, _ = fmt.Fprintf(out, "\nwindow %s to %s, %d jobs, planned %.0f triggers/s\n", sum.WindowFrom.Format(time.RFC3339), sum.WindowTo.Format(time.RFC3339), sum.Plan.Jobs, sum.Plan.PlannedRate)
			_, _ = fmt.Fprintf(out, "trigger latency (%d runs): p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  p99.9 %.1f ms  max %.1f ms\n",
				t.TotalCount(), ms(t.ValueAtQuantile(50)), ms(t.ValueAtQuantile(95)), ms(t.ValueAtQuantile(99)), ms(t.ValueAtQuantile(99.9)), ms(t.Max()))
			_, _ = fmt.Fprintf(out, "dispatch latency (%d runs): p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  max %.1f ms\n",
				d.TotalCount(), ms(d.ValueAtQuantile(50)), ms(d.ValueAtQuantile(95)), ms(d.ValueAtQuantile(99)), ms(d.Max()))
			c := sum.Counts
			_, _ = fmt.Fprintf(out, "expected %d  lost %d  duplicate executions %d  unexpected %d  early starts %d\n",
				c.Expected, c.Lost, c.DuplicateExecutions, c.Unexpected, c.EarlyStarts)
			if sum.EffectsCounted {
				e := sum.Effects
				_, _ = fmt.Fprintf(out, "duplicate effects %d (%d within one attempt)  redeliveries %d (of %d keys, answered as replays)  %d requests, %d keys, %d with a stale fencing token\n",
					e.DuplicateEffects, e.DuplicateSameAttempt, e.Redeliveries, e.RedeliveredKeys, e.Requests, e.Keys, e.StaleFencing)
			} else {
				_, _ = fmt.Fprintln(out, "duplicate effects: not counted (the jobs call a runner handler)")
			}
			return nil
		},
	}
}
