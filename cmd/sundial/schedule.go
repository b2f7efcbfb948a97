package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	// The zone database is compiled in so that schedules resolve the same on
	// a minimal container image without /usr/share/zoneinfo; the host's
	// database, when present, still takes precedence.
	_ "time/tzdata"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/schedule"
)

func scheduleCommand() *cli.Command {
	return &cli.Command{
		Name:  "schedule",
		Usage: "inspect schedule expressions",
		Commands: []*cli.Command{
			schedulePreviewCommand(),
		},
	}
}

func schedulePreviewCommand() *cli.Command {
	return &cli.Command{
		Name:      "preview",
		Usage:     "print the next fire times of a schedule, in local time and UTC",
		ArgsUsage: "<expression>",
		Description: `The expression depends on --kind:
  cron       a cron expression: '30 2 * * *', '*/15 * * * * *', '@daily', '@every 90m'
  interval   a duration: 90m (with --start or --offset to fix the phase)
  at         an RFC 3339 instant: 2026-03-29T02:30:00+01:00
  delay      a duration counted from --from: 10m
  immediate  no expression: fires at --from

Example:
  sundial schedule preview '30 2 * * *' --tz Europe/Berlin -n 5 --from 2026-03-27T00:00:00Z --nonexistent skip`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "kind", Value: "cron", Usage: "schedule kind: cron, interval, at, delay or immediate", Sources: envVar("kind")},
			&cli.StringFlag{Name: "tz", HideDefault: true, Usage: "IANA time zone the schedule is read and printed in (default UTC)", Sources: envVar("tz")},
			&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Value: 10, Usage: "how many fire times to print", Sources: envVar("count")},
			&cli.StringFlag{Name: "from", Usage: "RFC 3339 instant to preview after, and the reference of delay and immediate (default: now)", Sources: envVar("from")},
			&cli.StringFlag{Name: "nonexistent", HideDefault: true, Usage: "cron: a local time skipped by the clocks jumping forward: skip or shift (default shift)", Sources: envVar("nonexistent")},
			&cli.StringFlag{Name: "ambiguous", HideDefault: true, Usage: "cron: a local time repeated by the clocks falling back: first, second or both (default first)", Sources: envVar("ambiguous")},
			&cli.StringFlag{Name: "start", Usage: "interval: RFC 3339 instant of the first fire time", Sources: envVar("start")},
			&cli.DurationFlag{Name: "offset", Usage: "interval without --start: offset of the grid from the Unix epoch", Sources: envVar("offset")},
			outputFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			spec, from, err := previewSpec(cmd)
			if _, oerr := outputOf(cmd); oerr != nil {
				err = errors.Join(err, oerr)
			}
			if err != nil {
				return err
			}
			s, err := schedule.Compile(spec)
			if err != nil {
				return fmt.Errorf("invalid schedule:\n%w", err)
			}
			// On standard error, so that standard output stays the fire
			// times alone.
			fmt.Fprintf(cmd.Root().ErrWriter, "in force: %s\n", schedule.InForce(spec))
			if spec.Kind == schedule.KindImmediate {
				from = from.Add(-time.Nanosecond) // show the reference itself
			}
			return printPreview(ctx, cmd, s, from, cmd.Int("count"))
		},
	}
}

// printPreview prints up to count fire times after from as it finds them, so
// a long preview shows progress, and stops as soon as ctx is done (Ctrl-C).
func printPreview(ctx context.Context, cmd *cli.Command, s *schedule.Schedule, from time.Time, count int) error {
	out := cmd.Root().Writer
	t := from
	for i := range count {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("preview stopped after %d fire time(s): %w", i, context.Cause(ctx))
		}
		next, err := s.NextFireTime(t)
		if errors.Is(err, schedule.ErrNoFireTime) {
			if i == 0 {
				fmt.Fprintf(cmd.Root().ErrWriter, "no fire time after %s\n", from.Format(time.RFC3339Nano))
			}
			return nil
		}
		if err != nil {
			return err
		}
		if e := (emitter{w: out, form: must(outputOf(cmd))}); e.structured() {
			err = e.emit(fireOut{Local: next.Format(time.RFC3339Nano), Zone: next.Format("MST"), UTC: next.UTC()})
		} else {
			_, err = fmt.Fprintf(out, "%-25s %-6s %s\n", next.Format(time.RFC3339Nano), next.Format("MST"), next.UTC().Format(time.RFC3339Nano))
		}
		if err != nil {
			return err
		}
		t = next
	}
	return nil
}

// previewSpec builds the schedule spec from the command line, and the instant
// to preview after.
func previewSpec(cmd *cli.Command) (schedule.Spec, time.Time, error) {
	var spec schedule.Spec
	kind, err := schedule.ParseKind(cmd.String("kind"))
	if err != nil {
		return spec, time.Time{}, fmt.Errorf("--kind: %w", err)
	}
	from := time.Now()
	if v := cmd.String("from"); v != "" {
		if from, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return spec, time.Time{}, fmt.Errorf("--from: want an RFC 3339 instant: %w", err)
		}
	}
	if cmd.Int("count") < 1 {
		return spec, time.Time{}, fmt.Errorf("--count: must be at least 1, got %d", cmd.Int("count"))
	}
	spec = schedule.Spec{Kind: kind, TimeZone: cmd.String("tz"), Offset: cmd.Duration("offset")}
	if v := cmd.String("start"); v != "" {
		if spec.Start, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return spec, time.Time{}, fmt.Errorf("--start: want an RFC 3339 instant: %w", err)
		}
	}
	// Unset policies stay unspecified, so that the schedule's defaults
	// apply and the preview says so.
	if kind == schedule.KindCron && cmd.IsSet("nonexistent") {
		if spec.Nonexistent, err = schedule.ParseNonexistent(cmd.String("nonexistent")); err != nil {
			return spec, time.Time{}, fmt.Errorf("--nonexistent: %w", err)
		}
	}
	if kind == schedule.KindCron && cmd.IsSet("ambiguous") {
		if spec.Ambiguous, err = schedule.ParseAmbiguous(cmd.String("ambiguous")); err != nil {
			return spec, time.Time{}, fmt.Errorf("--ambiguous: %w", err)
		}
	}

	args := cmd.Args().Slice()
	want := 1
	if kind == schedule.KindImmediate {
		want = 0
	}
	if len(args) != want {
		return spec, time.Time{}, fmt.Errorf("a %s schedule takes %d argument(s), got %d: %q (quote a cron expression as one argument)", kind, want, len(args), args)
	}
	switch kind {
	case schedule.KindCron:
		spec.Cron = args[0]
	case schedule.KindInterval:
		if spec.Every, err = time.ParseDuration(args[0]); err != nil {
			return spec, time.Time{}, fmt.Errorf("interval: want a duration such as 90m: %w", err)
		}
	case schedule.KindAt:
		if spec.At, err = time.Parse(time.RFC3339Nano, args[0]); err != nil {
			return spec, time.Time{}, fmt.Errorf("at: want an RFC 3339 instant: %w", err)
		}
	case schedule.KindDelay:
		spec.Reference = from
		if spec.Delay, err = time.ParseDuration(args[0]); err != nil {
			return spec, time.Time{}, fmt.Errorf("delay: want a duration such as 10m: %w", err)
		}
	case schedule.KindImmediate:
		spec.Reference = from
	}
	return spec, from, nil
}

// fireOut is a fire time as -o json and yaml print it.
type fireOut struct {
	Local string    `json:"local"`
	Zone  string    `json:"zone"`
	UTC   time.Time `json:"utc"`
}
