package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"
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
			"twenty seconds. It serves the control-plane API on --listen, with tokens made up at start and printed (a cluster\n" +
			"admin, and an admin, an operator and a viewer of each --team), and prints the line that points another shell's\n" +
			"sundial commands at it, and the web console at /console/ on the same address. Figures seen here are not Sundial's: the bench runs on the real stack.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "warn", Usage: "level of the components' logs: debug, info, warn, error", Sources: envVar("log-level")},
			&cli.BoolFlag{Name: "no-samples", Usage: "do not load the sample jobs", Sources: envVar("no-samples")},
			&cli.DurationFlag{Name: "for", Usage: "stop after this long (0: until Ctrl-C)", Sources: envVar("for")},
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8480", Usage: "address to serve the control-plane API on, host:port (empty: no API)", Sources: envVar("listen")},
			&cli.StringSliceFlag{Name: "api-static-token", Usage: "a token TEAM:ROLE:SECRET of the API, as sundial api takes it (repeatable; default: a cluster admin, and an admin, an operator and a viewer of each --team, with secrets made up at start and printed)", Sources: envVar("api-static-token")},
			&cli.StringSliceFlag{Name: "team", Value: embedded.DefaultTeams, Usage: "a team whose job topic is created at start (repeatable)", Sources: envVar("team")},
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
			tokens := cmd.StringSlice("api-static-token")
			made := len(tokens) == 0
			if made {
				var err error
				if tokens, err = devTokens(cmd.StringSlice("team")); err != nil {
					return err
				}
			}
			p, err := embedded.New(embedded.Config{Handlers: embedded.SampleHandlers(), Logger: logger,
				Teams: cmd.StringSlice("team"), APIAddr: cmd.String("listen"), APITokens: tokens})
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
			printDevAccess(out, p, tokens, made)
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

// devTokens makes up the API tokens of `sundial dev`: a cluster admin, and
// an operator and a viewer of each team.
func devTokens(teams []string) ([]string, error) {
	tokens := []string{}
	add := func(team, role string) error {
		b := make([]byte, 12)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("make up a dev token: %w", err)
		}
		tokens = append(tokens, team+":"+role+":dev-"+hex.EncodeToString(b))
		return nil
	}
	if err := add("*", "admin"); err != nil {
		return nil, err
	}
	for _, team := range teams {
		for _, role := range []string{"admin", "operator", "viewer"} {
			if err := add(team, role); err != nil {
				return nil, err
			}
		}
	}
	return tokens, nil
}

// printDevAccess says how to reach the dev pipeline from another shell:
// the API's address and tokens, and the Kafka seed for the commands that
// produce to Kafka directly. The secrets are printed only when made up
// here; those given with --api-static-token are the caller's own.
func printDevAccess(out io.Writer, p *embedded.Pipeline, tokens []string, made bool) {
	url := p.APIURL()
	if url == "" {
		return
	}
	fmt.Fprintf(out, "web console on %s/console/ (log in with a token below)\n", url)
	fmt.Fprintf(out, "API on %s; its tokens (TEAM:ROLE:SECRET):\n", url)
	first := ""
	for _, t := range tokens {
		team, rest, _ := strings.Cut(t, ":")
		role, secret, _ := strings.Cut(rest, ":")
		if !made {
			secret = "(as given)"
		}
		if first == "" && team == "*" {
			first = secret
		}
		fmt.Fprintf(out, "  %-10s %-9s %s\n", team, role, secret)
	}
	fmt.Fprintln(out, "from another shell:")
	fmt.Fprintf(out, "  export SUNDIAL_API_URL=%s SUNDIAL_KAFKA_BROKERS=%s", url, strings.Join(p.Brokers(), ","))
	if made && first != "" {
		fmt.Fprintf(out, " SUNDIAL_API_TOKEN=%s", first)
	}
	fmt.Fprintln(out)
}
