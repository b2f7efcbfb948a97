package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"

	connectrpc "connectrpc.com/connect"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/leasing"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
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
		Description: `Writes the team's row in Cassandra, or with --api-url asks the API
(QuotaService.SetQuotas, with a cluster admin's token; audited); a limit
left out keeps its current value, 0 means unlimited. Registries and runners
apply a change within 10s; a raised max_jobs applies to the next
definition. max_runs_per_minute counts every run that starts, each child of
a BROADCAST or SHARDED run included; a run over it is deferred (reason
team_rate) to the next minute, never dropped. The team '*' is the default
for every team without a row of its own.

Examples:
  sundial quotas set --team payments --max-jobs 1000 --max-concurrent-runs 50
  sundial quotas set --team '*' --max-concurrent-runs 20
  sundial quotas set --team search --max-runs-per-minute 600 --api-url https://sundial.example.com`,
		Flags: append(append(cassandraStoreFlags(), apiFlags()...),
			&cli.StringFlag{Name: "team", Usage: "the team, or '*' for the default (required)", Sources: envVar("team")},
			&cli.Int64Flag{Name: "max-jobs", Usage: "how many jobs the team may own; 0 unlimited", Sources: envVar("max-jobs")},
			&cli.Int64Flag{Name: "max-concurrent-runs", Usage: "how many of the team's runs may execute at once; 0 unlimited", Sources: envVar("max-concurrent-runs")},
			&cli.Int64Flag{Name: "max-runs-per-minute", Usage: "how many of the team's runs may start in one minute, fan-out children included (more are deferred to the next minute); 0 unlimited", Sources: envVar("max-runs-per-minute")},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			c := quota.Change{Team: cmd.String("team")}
			for flag, dst := range map[string]**int64{"max-jobs": &c.MaxJobs, "max-concurrent-runs": &c.MaxConcurrentRuns, "max-runs-per-minute": &c.MaxRunsPerMinute} {
				if cmd.IsSet(flag) {
					v := cmd.Int64(flag)
					*dst = &v
				}
			}
			bad := []error{c.Validate()}
			printRow := func(q quota.Quota) {
				fmt.Fprintf(cmd.Root().Writer, "team %s: max_jobs %s, max_concurrent_runs %s, max_runs_per_minute %s\n",
					q.Team, quota.LimitString(q.MaxJobs), quota.LimitString(q.MaxConcurrentRuns), quota.LimitString(q.MaxRunsPerMinute))
			}
			api, ok, err := apiConfig(cmd)
			if !ok {
				return withStore(ctx, cmd, bad, func(st *cassandra.Store) error {
					_, after, err := quota.Set(ctx, st, c)
					if err == nil {
						printRow(after)
					}
					return err
				})
			}
			if err := errors.Join(append(bad, err)...); err != nil {
				return err
			}
			resp, err := apiv1connect.NewQuotaServiceClient(api.client, api.url, api.options()...).SetQuotas(ctx, connectrpc.NewRequest(&apiv1.SetQuotasRequest{
				Team: c.Team, MaxJobs: c.MaxJobs, MaxConcurrentRuns: c.MaxConcurrentRuns, MaxRunsPerMinute: c.MaxRunsPerMinute,
			}))
			if err != nil {
				return fmt.Errorf("api: set quotas: %w", err)
			}
			printRow(quotaFromAPI(resp.Msg.GetQuota()))
			return nil
		},
	}
}

func quotasListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "print the quotas of every team with a row, or of the teams named, with their usage",
		Description: `Jobs are counted in the registry's per-team index; runs executing now
are counted from the runners' team slots in Redis when --redis-addr (or a
Sentinel) is given, and only for teams with a max_concurrent_runs. With
--api-url the API reads them (QuotaService.GetQuotas: a team's token reads
its own team, a cluster admin's any) and counts the runs with its own
Redis; the Redis flags are then not used.

Examples:
  sundial quotas list
  sundial quotas list --team payments --redis-addr localhost:6379
  sundial quotas list --api-url https://sundial.example.com`,
		Flags: append(append(append(cassandraStoreFlags(), redisFlags()...), apiFlags()...),
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
			printUsages := func(usages []quota.Usage) error {
				if out := (emitter{w: cmd.Root().Writer, form: form}); out.structured() {
					return emitAll(out, usages, func(u quota.Usage) quotaOut {
						return quotaOut{Team: u.Team, Jobs: u.Jobs, MaxJobs: u.MaxJobs, ConcurrentRuns: u.ConcurrentRuns,
							MaxConcurrentRuns: u.MaxConcurrentRuns, MaxRunsPerMinute: u.MaxRunsPerMinute}
					})
				}
				w := tabwriter.NewWriter(cmd.Root().Writer, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "TEAM\tJOBS\tMAX JOBS\tRUNNING\tMAX CONCURRENT RUNS\tMAX RUNS PER MINUTE")
				for _, u := range usages {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", u.Team, quotaCount(u.Jobs), quota.LimitString(u.MaxJobs), quotaCount(u.ConcurrentRuns), quota.LimitString(u.MaxConcurrentRuns), quota.LimitString(u.MaxRunsPerMinute))
				}
				return w.Flush()
			}
			if api, ok, err := apiConfig(cmd); ok {
				if err := errors.Join(append(bad, err)...); err != nil {
					return err
				}
				resp, err := apiv1connect.NewQuotaServiceClient(api.client, api.url, api.options()...).GetQuotas(ctx, connectrpc.NewRequest(&apiv1.GetQuotasRequest{Teams: cmd.StringSlice("team")}))
				if err != nil {
					return fmt.Errorf("api: get quotas: %w", err)
				}
				usages := make([]quota.Usage, 0, len(resp.Msg.GetQuotas()))
				for _, q := range resp.Msg.GetQuotas() {
					usages = append(usages, quota.Usage{Quota: quotaFromAPI(q), Jobs: int(q.GetJobs()), ConcurrentRuns: int(q.GetConcurrentRuns())})
				}
				return printUsages(usages)
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
				return printUsages(usages)
			})
		},
	}
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

// quotaFromAPI is the quota an API answer reports.
func quotaFromAPI(q *apiv1.TeamQuota) quota.Quota {
	return quota.Quota{Team: q.GetTeam(), MaxJobs: int(q.GetMaxJobs()), MaxConcurrentRuns: int(q.GetMaxConcurrentRuns()), MaxRunsPerMinute: int(q.GetMaxRunsPerMinute())}
}
