package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/internal/topics"
)

func executorsCommand() *cli.Command {
	return &cli.Command{
		Name:  "executors",
		Usage: "inspect the executors announced on sundial.executors",
		Commands: []*cli.Command{
			executorsListCommand(),
		},
	}
}

func executorsListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "print the live executors, and those that left or expired recently (marked)",
		Description: `Reads sundial.executors up to its end. An executor is live while its newest
heartbeat is within three of its heartbeat intervals; one that stopped
cleanly is "left", one that stopped heartbeating is "expired", and both stay
listed for 15 minutes after their last heartbeat.

Example:
  sundial executors list --pool default`,
		Flags: append(kafkaFlags(),
			&cli.StringFlag{Name: "pool", Usage: "only executors of this pool", Sources: envVar("pool")},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "how long to wait for the topic to be read", Sources: envVar("timeout")},
			outputFlag(),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			form, oerr := outputOf(cmd)
			kopts, err := kafkaOptions(cmd)
			if err := errors.Join(err, oerr); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			members, err := discovery.Snapshot(ctx, discovery.DirectoryConfig{Kafka: kopts, Topics: topics.Names{Prefix: cmd.String("topic-prefix")}})
			if err != nil {
				return err
			}
			pool := cmd.String("pool")
			members = slices.DeleteFunc(members, func(m discovery.Member) bool { return pool != "" && m.Pool != pool })
			if out := (emitter{w: cmd.Root().Writer, form: form}); out.structured() {
				for _, m := range members {
					if err := out.emit(executorView(m)); err != nil {
						return err
					}
				}
				return nil
			}
			printExecutors(cmd, members, time.Now())
			return nil
		},
	}
}

// printExecutors writes members as a table, live ones first within each
// pool.
func printExecutors(cmd *cli.Command, members []discovery.Member, now time.Time) {
	slices.SortStableFunc(members, func(a, b discovery.Member) int {
		if a.Pool != b.Pool {
			return strings.Compare(a.Pool, b.Pool)
		}
		return int(a.State) - int(b.State)
	})
	tw := tabwriter.NewWriter(cmd.Root().Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tEXECUTOR\tSTATE\tSLOTS\tIN FLIGHT\tBLOCKING\tCPU\tMEMORY\tHEARTBEAT\tVERSION\tLABELS")
	for _, m := range members {
		labels := make([]string, 0, len(m.Labels))
		for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
			labels = append(labels, k+"="+m.Labels[k])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%.2f\t%.0f MiB\t%s ago\t%s\t%s\n",
			m.Pool, m.ID, m.State, m.Capacity, m.InFlight, m.Blocking, m.CPUCores, float64(m.MemoryBytes)/(1<<20),
			now.Sub(m.Heartbeat).Round(100*time.Millisecond), m.Version, strings.Join(labels, ","))
	}
	_ = tw.Flush()
	if len(members) == 0 {
		fmt.Fprintln(cmd.Root().Writer, "no executors")
	}
}

// executorOut is an executor as -o json and yaml print it.
type executorOut struct {
	ID          string            `json:"id"`
	Pool        string            `json:"pool"`
	State       string            `json:"state"`
	Slots       int               `json:"slots"`
	InFlight    int               `json:"inFlight"`
	Blocking    string            `json:"blocking,omitempty"`
	CPUCores    float64           `json:"cpuCores"`
	MemoryBytes uint64            `json:"memoryBytes"`
	Heartbeat   time.Time         `json:"heartbeat"`
	Started     time.Time         `json:"started"`
	Interval    string            `json:"interval"`
	Version     string            `json:"version,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	// Handlers are "TEAM/NAME" ("*/NAME" for a handler of every team).
	Handlers []string `json:"handlers,omitempty"`
}

func executorView(m discovery.Member) executorOut {
	return executorOut{ID: m.ID, Pool: m.Pool, State: m.State.String(), Slots: m.Capacity, InFlight: m.InFlight, Blocking: m.Blocking,
		CPUCores: m.CPUCores, MemoryBytes: m.MemoryBytes, Heartbeat: m.Heartbeat.UTC(), Started: m.Started.UTC(),
		Interval: m.Interval.String(), Version: m.Version, Labels: m.Labels, Handlers: servedView(m.Handlers)}
}

// servedView lists an executor's handlers as TEAM/NAME, "*" for every team.
func servedView(hs []discovery.ServedHandler) []string {
	var out []string
	for _, h := range hs {
		out = append(out, cmp.Or(h.Team, "*")+"/"+h.Name)
	}
	return out
}
