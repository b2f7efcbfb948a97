package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/embedded"
)

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run the whole pipeline in one process on in-process backends, load sample jobs, print their runs until Ctrl-C",
		Description: "Starts an in-process Kafka (kfake), Redis (miniredis) and schedule store, then the registry, trigger\n" +
			"consumer, dispatcher, runner, history writer and DAG engine, exactly as the separate processes run them. Three\n" +
			"sample jobs are applied through the Go client: a cron job every five seconds, a flaky job that retries and lands\n" +
			"in the dead-letter topic, and an HTTP job calling a built-in echo target; and a sample DAG of four nodes every\n" +
			"twenty seconds. Figures seen here are not Sundial's: the bench runs on the real stack.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "warn", Usage: "level of the components' logs: debug, info, warn, error", Sources: envVar("log-level")},
			&cli.BoolFlag{Name: "no-samples", Usage: "do not load the sample jobs", Sources: envVar("no-samples")},
			&cli.DurationFlag{Name: "for", Usage: "stop after this long (0: until Ctrl-C)", Sources: envVar("for")},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(cmd.String("log-level"))); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			out := cmd.Root().Writer
			logger := slog.New(slog.NewTextHandler(cmd.Root().ErrWriter, &slog.HandlerOptions{Level: level}))
			if d := cmd.Duration("for"); d > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, d)
				defer cancel()
			}
			p, err := embedded.New(embedded.Config{Handlers: embedded.SampleHandlers(), Logger: logger})
			if err != nil {
				return err
			}
			start := time.Now()
			if err := p.Start(ctx); err != nil {
				return fmt.Errorf("start embedded pipeline: %w", err)
			}
			defer p.Stop()
			fmt.Fprintf(out, "sundial dev: registry, trigger consumer, dispatcher, runner, history writer and DAG engine up in %s on in-process Kafka %v, Redis and store\n",
				time.Since(start).Round(time.Millisecond), p.Brokers())
			if !cmd.Bool("no-samples") {
				specs, err := p.LoadSamples(ctx)
				if err != nil {
					return err
				}
				for _, s := range specs {
					fmt.Fprintf(out, "  job %-16s %s\n", s.GetId(), s.GetDescription())
				}
				d := embedded.SampleDag()
				fmt.Fprintf(out, "  dag %-16s %s\n", d.GetId(), d.GetDescription())
			}
			fmt.Fprintln(out, "runs as they happen (Ctrl-C stops):")
			return p.Watch(ctx, out)
		},
	}
}
