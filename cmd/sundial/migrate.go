package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/urfave/cli/v3"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:  "migrate",
		Usage: "create the Cassandra keyspace and tables, fix the shard count, and create the Kafka topics",
		Description: `Idempotent and safe to re-run: applied schema versions are recorded in the
keyspace's schema_migrations table, the shard count is stored once (a different
--shards later is an error), and existing topics are kept when their partition
count is right (a topic with another count is an error naming it).

Example, against the local stack:
  source <(deploy/local/stack.sh env) && sundial migrate`,
		Flags: append(append(kafkaFlags(), cassandraStoreFlags()...),
			&cli.IntFlag{Name: "replication-factor", Value: cassandra.DefaultReplicationFactor, Usage: "replication factor of the keyspace when it is created", Sources: envVar("replication-factor")},
			&cli.IntFlag{Name: "topic-replication-factor", Value: -1, Usage: "replication factor of created topics; -1 for the brokers' default", Sources: envVar("topic-replication-factor")},
			&cli.StringSliceFlag{Name: "teams", Usage: "also create these teams' job topics, sundial.jobs.<team> (comma-separated); every team already in the store gets its topic regardless", Sources: envVar("teams")},
			&cli.IntFlag{Name: "shards", Value: 128, Usage: "number of shards S, fixed for the life of the cluster", Sources: envVar("shards")},
			&cli.DurationFlag{Name: "timeout", Value: 2 * time.Minute, Usage: "give up after this long (an unreachable backend fails sooner)", Sources: envVar("timeout")},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			shards := cmd.Int("shards")
			var bad []error
			if shards <= 0 {
				bad = append(bad, fmt.Errorf("--shards %d: must be positive", shards))
			}
			kopts, err := kafkaOptions(cmd)
			if err != nil {
				bad = append(bad, err)
			}
			trf := cmd.Int("topic-replication-factor")
			if trf == 0 || trf < -1 || trf > math.MaxInt16 {
				bad = append(bad, fmt.Errorf("--topic-replication-factor %d: must be positive or -1", trf))
			}
			if cmd.Duration("timeout") <= 0 {
				bad = append(bad, fmt.Errorf("--timeout %s: must be positive", cmd.Duration("timeout")))
			}
			var teamSpecs []topics.Spec
			for _, team := range cmd.StringSlice("teams") {
				if err := topics.ValidTeam(team); err != nil {
					bad = append(bad, fmt.Errorf("--teams: %w", err))
					continue
				}
				teamSpecs = append(teamSpecs, topics.Names{Prefix: cmd.String("topic-prefix")}.TeamJobsSpec(team))
			}
			cfg, err := cassandraConfig(cmd)
			cfg.ReplicationFactor = cmd.Int("replication-factor")
			if err != nil {
				bad = append(bad, err)
			}
			if cfg.ReplicationFactor == 0 {
				// Config reads zero as "the default"; from the flag it is a
				// mistake. Config.Validate reports negative values.
				bad = append(bad, errors.New("--replication-factor 0: must be at least 1"))
			} else if err == nil {
				if err := cfg.Validate(); err != nil {
					bad = append(bad, err)
				}
			}
			if err := errors.Join(bad...); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			out := cmd.Root().Writer

			res, err := cassandra.Setup(ctx, cfg, shards)
			if err != nil {
				return fmt.Errorf("cassandra: %w", err)
			}
			fmt.Fprintf(out, "cassandra keyspace %s: schema version %d", cfg.Keyspace, res.Migrate.Version)
			switch {
			case res.Migrate.KeyspaceCreated:
				fmt.Fprintf(out, " (keyspace created, applied %v)\n", res.Migrate.Applied)
			case len(res.Migrate.Applied) > 0:
				fmt.Fprintf(out, " (applied %v)\n", res.Migrate.Applied)
			default:
				fmt.Fprintln(out, " (up to date)")
			}
			fmt.Fprintf(out, "cluster: %d shards, initialised %s\n", res.Cluster.Shards, res.Cluster.CreatedAt.Format(time.RFC3339))

			if err := checkKafka(ctx, kopts); err != nil {
				return err
			}
			names := topics.Names{Prefix: cmd.String("topic-prefix")}
			// Every team already defined gets its job topic too: since
			// ids are namespaced and the registry reads team topics only
			// by default, an upgrade must leave no team without one.
			st, err := cassandra.Open(ctx, cfg)
			if err != nil {
				return fmt.Errorf("cassandra: %w", err)
			}
			defer func() { _ = st.Close() }()
			stored, err := st.ListTeams(ctx)
			if err != nil {
				return fmt.Errorf("cassandra: list teams: %w", err)
			}
			for _, team := range stored {
				if topics.ValidTeam(team.Name) == nil {
					teamSpecs = append(teamSpecs, names.TeamJobsSpec(team.Name))
				}
			}
			if err := reportLegacyJobs(ctx, out, st); err != nil {
				return fmt.Errorf("cassandra: %w", err)
			}
			created, err := topics.Setup(ctx, cmd.StringSlice("kafka-brokers"), names, res.Cluster.Shards, int16(trf), kopts...)
			if err == nil && len(teamSpecs) > 0 {
				var teams []topics.Result
				teams, err = topics.EnsureAt(ctx, cmd.StringSlice("kafka-brokers"), teamSpecs, int16(trf), kopts...)
				created = append(created, teams...)
			}
			for _, r := range created {
				state := "exists"
				if r.Created {
					state = "created"
				}
				fmt.Fprintf(out, "topic %-40s %3d partitions  %s\n", r.Name, r.Partitions, state)
			}
			if err != nil {
				return fmt.Errorf("kafka: %w", err)
			}
			return nil
		},
	}
}

// reportLegacyJobs prints the stored jobs whose id or owner team does not
// fit the namespace rule (jobspec.CheckOwnedID): they keep running and their
// owner may still change or delete them, but no other job may be defined
// so. It is a report: nothing is renamed.
func reportLegacyJobs(ctx context.Context, out io.Writer, st store.JobLister) error {
	var n int
	after := ""
	for {
		page, err := st.ListJobs(ctx, after, 500)
		if err != nil {
			return fmt.Errorf("list jobs: %w", err)
		}
		for _, job := range page.Jobs {
			for _, line := range legacyProblems(job) {
				fmt.Fprintln(out, line)
				n++
			}
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if n > 0 {
		fmt.Fprintf(out, "%d legacy job problem(s): each job keeps running and only its owner team may change or delete it; define a new <owner_team>.<name> job and delete the old one to move\n", n)
	}
	return nil
}

// legacyProblems returns a report line for each way job's stored id or
// owner team does not fit the namespace rule.
func legacyProblems(job store.Job) []string {
	spec := &sundialv1.JobSpec{}
	if err := proto.Unmarshal(job.Spec, spec); err != nil {
		return []string{fmt.Sprintf("legacy job %s: stored definition does not decode: %v", job.ID, err)}
	}
	var lines []string
	for _, fe := range jobspec.CheckOwnedID(job.ID, spec.GetOwnerTeam()) {
		lines = append(lines, fmt.Sprintf("legacy job %s (owner team %q): %s", job.ID, spec.GetOwnerTeam(), fe))
	}
	return lines
}
