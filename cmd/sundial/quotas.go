package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/store/cassandra"
)

func quotasCommand() *cli.Command {
	return &cli.Command{
		Name:  "quotas",
		Usage: "set and list per-team quotas (max jobs, max concurrent runs)",
		Commands: []*cli.Command{
			quotasSetCommand(),
			quotasListCommand(),
		},
	}
}

func quotasSetCommand() *cli.Command {
	return &cli.Command{
		Name:  "set",
		Usage: "set a team's quotas, or the default of teams without their own",
		Description: `Writes the team's row in Cassandra; a limit left out keeps its current
value, 0 means unlimited. Registries and runners apply a change within 10s;
a raised max_jobs applies to the next definition. max_runs_per_minute counts
every run that starts, each child of a BROADCAST or SHARDED run included; a
run over it is deferred (reason team_rate) to the next minute, never dropped.
The team '*' is the default for every team without a row of its own.

Examples:
  sundial quotas set --team payments --max-jobs 1000 --max-concurrent-runs 50
  sundial quotas set --team '*' --max-concurrent-runs 20
  sundial quotas set --team search --max-runs-per-minute 600`,
		Flags: append(cassandraStoreFlags(),
			&cli.StringFlag{Name: "team", Usage: "the team, or '*' for the default (required)", Sources: envVar("team")},
			&cli.IntFlag{Name: "max-jobs", Usage: "how many jobs the team may own; 0 unlimited", Sources: envVar("max-jobs")},
			&cli.IntFlag{Name: "max-concurrent-runs", Usage: "how many of the team's runs may execute at once; 0 unlimited", Sources: envVar("max-concurrent-runs")},
			&cli.IntFlag{Name: "max-runs-per-minute", Usage: "how many of the team's runs may start in one minute, fan-out children included (more are deferred to the next minute); 0 unlimited", Sources: envVar("max-runs-per-minute")},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var bad []error
			team := cmd.String("team")
			if team == "" {
				bad = append(bad, errors.New("--team: required"))
			}
			if !cmd.IsSet("max-jobs") && !cmd.IsSet("max-concurrent-runs") && !cmd.IsSet("max-runs-per-minute") {
				bad = append(bad, errors.New("--max-jobs, --max-concurrent-runs, --max-runs-per-minute: set at least one"))
			}
			for _, f := range []string{"max-jobs", "max-concurrent-runs", "max-runs-per-minute"} {
				if cmd.Int(f) < 0 {
					bad = append(bad, fmt.Errorf("--%s %d: must be 0 (unlimited) or positive", f, cmd.Int(f)))
				}
			}
			return withStore(ctx, cmd, bad, func(st *cassandra.Store) error {
				rows, err := st.ListQuotas(ctx)
				if err != nil {
					return err
				}
				q := quota.Quota{Team: team}
				for _, r := range rows {
					if r.Team == team {
						q = r
					}
				}
				if cmd.IsSet("max-jobs") {
					q.MaxJobs = cmd.Int("max-jobs")
				}
				if cmd.IsSet("max-concurrent-runs") {
					q.MaxConcurrentRuns = cmd.Int("max-concurrent-runs")
				}
				if cmd.IsSet("max-runs-per-minute") {
					q.MaxRunsPerMinute = cmd.Int("max-runs-per-minute")
				}
				if err := st.SetQuota(ctx, q); err != nil {
					return err
				}
				fmt.Fprintf(cmd.Root().Writer, "team %s: max_jobs %s, max_concurrent_runs %s, max_runs_per_minute %s\n",
					q.Team, quotaLimit(q.MaxJobs), quotaLimit(q.MaxConcurrentRuns), quotaLimit(q.MaxRunsPerMinute))
				return nil
			})
		},
	}
}

func quotasListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "print the quotas of every team with a row, or of the teams named, with their usage",
		Description: `Jobs are counted in the registry's per-team index; runs executing now
are counted from the runners' team slots in Redis when --redis-addr (or a
Sentinel) is given, and only for teams with a max_concurrent_runs.

Examples:
  sundial quotas list
  sundial quotas list --team payments --redis-addr localhost:6379`,
		Flags: append(append(cassandraStoreFlags(), redisFlags()...),
			&cli.StringSliceFlag{Name: "team", Usage: "teams to report, with the quota in force for each (default: every team with a row)", Sources: envVar("team")},
			&cli.StringFlag{Name: "redis-key-prefix", Usage: "the runners' --redis-key-prefix", Sources: envVar("redis-key-prefix")},
			outputFlag(),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var (
				bad  []error
				runs quota.RunCounter
			)
			form, err := outputOf(cmd)
			if err != nil {
				bad = append(bad, err)
			}
			if cmd.String("redis-addr") != "" || cmd.String("redis-sentinel-master") != "" {
				rdb, err := redisClient(cmd, 1)
				if err != nil {
					bad = append(bad, err)
				} else {
					defer func() { _ = rdb.Close() }()
					leases, err := leasing.New(leasing.Config{Client: rdb, KeyPrefix: cmd.String("redis-key-prefix") + leasing.DefaultKeyPrefix})
					if err != nil {
						bad = append(bad, err)
					} else {
						runs = leases
					}
				}
			}
			return withStore(ctx, cmd, bad, func(st *cassandra.Store) error {
				usages, err := quota.Usages(ctx, st, runs, cmd.StringSlice("team")...)
				if err != nil {
					return err
				}
				if out := (emitter{w: cmd.Root().Writer, form: form}); out.structured() {
					return emitAll(out, usages, func(u quota.Usage) quotaOut {
						return quotaOut{Team: u.Team, Jobs: u.Jobs, MaxJobs: u.MaxJobs, ConcurrentRuns: u.ConcurrentRuns,
							MaxConcurrentRuns: u.MaxConcurrentRuns, MaxRunsPerMinute: u.MaxRunsPerMinute}
					})
				}
				w := tabwriter.NewWriter(cmd.Root().Writer, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "TEAM\tJOBS\tMAX JOBS\tRUNNING\tMAX CONCURRENT RUNS\tMAX RUNS PER MINUTE")
				for _, u := range usages {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", u.Team, quotaCount(u.Jobs), quotaLimit(u.MaxJobs), quotaCount(u.ConcurrentRuns), quotaLimit(u.MaxConcurrentRuns), quotaLimit(u.MaxRunsPerMinute))
				}
				return w.Flush()
			})
		},
	}
}

// quotaLimit prints a quota limit, 0 being unlimited.
func quotaLimit(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return strconv.Itoa(n)
}

// quotaCount prints a usage, -1 being not counted.
func quotaCount(n int) string {
	if n < 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// quotaOut is a team's quota and usage as -o json and yaml print them;
// a limit of 0 is none, a count of -1 unknown.
type quotaOut struct {
	Team              string `json:"team"`
	Jobs              int    `json:"jobs"`
	MaxJobs           int    `json:"maxJobs"`
	ConcurrentRuns    int    `json:"concurrentRuns"`
	MaxConcurrentRuns int    `json:"maxConcurrentRuns"`
	MaxRunsPerMinute  int    `json:"maxRunsPerMinute"`
}
