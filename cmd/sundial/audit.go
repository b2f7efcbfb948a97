package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/store/cassandra"
)

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "inspect the audit trail of definition changes and operator actions",
		Commands: []*cli.Command{
			auditListCommand(),
		},
	}
}

func auditListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "print the audit records of a job or DAG, or of a team, newest first",
		Description: `Reads the trail the registry (and the control plane) keep in Cassandra: who
changed what, when, the revisions before and after, and the fields that
changed. Records expire after the registry's --audit-retention.

Examples:
  sundial audit list --job nightly-report
  sundial audit list --team payments --since 24h --limit 100 -o json`,
		Flags: append(cassandraStoreFlags(),
			&cli.StringFlag{Name: "job", Usage: "the job or DAG id", Sources: envVar("job")},
			&cli.StringFlag{Name: "team", Usage: "the team", Sources: envVar("team")},
			&cli.StringFlag{Name: "since", Usage: "leave out older records: a duration back from now (24h) or an RFC 3339 time", Sources: envVar("since")},
			&cli.IntFlag{Name: "limit", Value: 50, Usage: "how many records to print", Sources: envVar("limit")},
			outputFlag(),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var bad []error
			q := audit.Query{Subject: cmd.String("job"), Team: cmd.String("team"), Limit: cmd.Int("limit")}
			if q.Subject == "" && q.Team == "" || q.Subject != "" && q.Team != "" {
				bad = append(bad, errors.New("--job or --team: set exactly one"))
			}
			if q.Limit <= 0 {
				bad = append(bad, fmt.Errorf("--limit %d: must be positive", q.Limit))
			}
			since, err := parseSince(cmd.String("since"), time.Now())
			if err != nil {
				bad = append(bad, err)
			}
			q.Since = since
			form, err := outputOf(cmd)
			if err != nil {
				bad = append(bad, err)
			}
			return withStore(ctx, cmd, bad, func(st *cassandra.Store) error {
				recs, err := st.ListAudit(ctx, q)
				if err != nil {
					return err
				}
				if out := (emitter{w: cmd.Root().Writer, form: form}); out.structured() {
					for _, r := range recs {
						if err := out.emit(r); err != nil {
							return err
						}
					}
					return nil
				}
				return printAudit(cmd.Root().Writer, recs)
			})
		},
	}
}

// parseSince reads --since: empty, a duration back from now, or a time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--since %s: a duration must be positive", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want a duration (24h) or an RFC 3339 time", s)
	}
	return t, nil
}

// printAudit writes one line per record, then its changed fields and its
// detail indented beneath it.
func printAudit(w io.Writer, recs []audit.Record) error {
	if len(recs) == 0 {
		_, err := fmt.Fprintln(w, "no audit records")
		return err
	}
	for _, r := range recs {
		if _, err := fmt.Fprintf(w, "%s  %s  %s  team %s  by %s  revision %d -> %d\n", r.At.UTC().Format(time.RFC3339Nano),
			r.Action, r.Subject, orDash(r.Team), r.Actor, r.RevisionBefore, r.RevisionAfter); err != nil {
			return err
		}
		for _, c := range r.Changes {
			if _, err := fmt.Fprintf(w, "    %s: %s -> %s\n", c.Field, orDash(c.Before), orDash(c.After)); err != nil {
				return err
			}
		}
		if r.Detail != "" {
			if _, err := fmt.Fprintf(w, "    %s\n", r.Detail); err != nil {
				return err
			}
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
