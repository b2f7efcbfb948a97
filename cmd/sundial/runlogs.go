package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	connectrpc "connectrpc.com/connect"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/logtail"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

func runsLogsCommand() *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "print the log lines of a run's attempt; with --follow, as the attempt logs them, until it ends",
		ArgsUsage: "RUN_ID",
		Description: `Reads through the control-plane API (--api-url). Without --follow, prints the
lines the attempt's history kept: the last ones it logged, once it has ended.
With --follow, prints the attempt's lines while it runs, about a second after
it logs them, from the first line its runner still holds (or after --offset),
and returns when the attempt ends. A line "… N line(s) left out" stands for
lines over the runner's bounds. On an interruption it prints the offset to
resume at with --offset.

Examples:
  sundial runs logs --api-url http://localhost:8080 nightly-report@1767148200000
  sundial runs logs --follow --api-url http://localhost:8080 nightly-report@1767148200000`,
		Flags: append(apiFlags(),
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "print the lines as the running attempt logs them, until it ends", Sources: envVar("follow")},
			&cli.UintFlag{Name: "attempt", Usage: "the attempt to print, 1 for the first (default: the latest)", Sources: envVar("attempt")},
			&cli.StringFlag{Name: "offset", Usage: "with --follow, resume after this offset (as an interrupted --follow printed it)", Sources: envVar("offset")},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var bad []error
			runID := cmd.Args().First()
			if _, _, err := splitRunID(runID); err != nil {
				bad = append(bad, err)
			}
			if cmd.NArg() > 1 {
				bad = append(bad, fmt.Errorf("RUN_ID: one run id expected, got %d arguments", cmd.NArg()))
			}
			if cmd.Uint("attempt") > 1<<32-1 {
				bad = append(bad, fmt.Errorf("--attempt %d: too large", cmd.Uint("attempt")))
			}
			offset := cmd.String("offset")
			if offset != "" && !cmd.Bool("follow") {
				bad = append(bad, errors.New("--offset: only with --follow"))
			}
			if err := logtail.CheckOffset(offset); err != nil {
				bad = append(bad, fmt.Errorf("--offset: %w", err))
			}
			api, ok, err := apiConfig(cmd)
			if !ok {
				bad = append(bad, errors.New("runs logs reads through the control-plane API: set --api-url (SUNDIAL_API_URL)"))
			}
			if err := errors.Join(append(bad, err)...); err != nil {
				return err
			}
			client := apiv1connect.NewRunServiceClient(api.client, api.url, api.options()...)
			attempt := uint32(cmd.Uint("attempt"))
			if cmd.Bool("follow") {
				return followLog(ctx, client, cmd.Root().Writer, cmd.Root().ErrWriter, runID, attempt, offset)
			}
			return printLog(ctx, client, cmd.Root().Writer, runID, attempt)
		},
	}
}

// printLog writes the lines the history kept of one attempt of a run (0:
// its latest).
func printLog(ctx context.Context, c apiv1connect.RunServiceClient, out io.Writer, runID string, attempt uint32) error {
	resp, err := c.GetRun(ctx, connectrpc.NewRequest(&apiv1.GetRunRequest{RunId: runID}))
	if err != nil {
		return fmt.Errorf("api: get run %s: %w", runID, err)
	}
	attempts := resp.Msg.GetRun().GetAttempts()
	if len(attempts) == 0 {
		return fmt.Errorf("run %s: no attempt recorded yet", runID)
	}
	a := attempts[len(attempts)-1]
	if attempt != 0 {
		a = nil
		for _, x := range attempts {
			if x.GetAttempt() == attempt {
				a = x
			}
		}
		if a == nil {
			return fmt.Errorf("run %s: no attempt %d recorded", runID, attempt)
		}
	}
	for _, l := range a.GetLog() {
		fmt.Fprintln(out, l)
	}
	return nil
}

// followLog writes an attempt's lines as the API streams them, until the
// attempt ends; on an interruption or a broken stream it says where to
// resume.
func followLog(ctx context.Context, c apiv1connect.RunServiceClient, out, errOut io.Writer, runID string, attempt uint32, offset string) error {
	stream, err := c.TailRunLog(ctx, connectrpc.NewRequest(&apiv1.TailRunLogRequest{RunId: runID, Attempt: attempt, Offset: offset}))
	if err != nil {
		return fmt.Errorf("api: tail run log of %s: %w", runID, err)
	}
	defer func() { _ = stream.Close() }()
	for stream.Receive() {
		m := stream.Msg()
		attempt = m.GetAttempt()
		for _, l := range m.GetLines() {
			fmt.Fprintln(out, l)
		}
		if m.GetDropped() > 0 {
			fmt.Fprintf(out, "… %d line(s) left out\n", m.GetDropped())
		}
		if m.GetOffset() != "" {
			offset = m.GetOffset()
		}
		if m.GetEnded() {
			return nil
		}
	}
	err = stream.Err()
	if ctx.Err() != nil || err == nil {
		// Interrupted, or the stream closed before the attempt's end.
		if offset != "" {
			fmt.Fprintf(errOut, "resume with: sundial runs logs --follow --attempt %d --offset %s %s\n", attempt, offset, runID)
		}
		return ctx.Err()
	}
	if offset != "" {
		return fmt.Errorf("api: tail run log of %s: %w (resume with --attempt %d --offset %s)", runID, err, attempt, offset)
	}
	return fmt.Errorf("api: tail run log of %s: %w", runID, err)
}
