package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	connectrpc "connectrpc.com/connect"
	"github.com/urfave/cli/v3"

	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

// The survey commands an SRE starts from: `sundial jobs list` pages
// through the definitions and `sundial cluster` shows shards, their owners
// and watermark lag, runners, executors and consumer lag. Both read through
// the control-plane API (--api-url), which checks the caller's team and
// role; they have no direct-to-backend path.

// needAPI returns the API endpoint of a command that reads only through
// it, with every flag problem at once.
func needAPI(cmd *cli.Command, what string) (apiConn, error) {
	api, ok, err := apiConfig(cmd)
	var errs []error
	if !ok {
		errs = append(errs, fmt.Errorf("%s reads through the control-plane API: set --api-url (SUNDIAL_API_URL)", what))
	}
	if _, oerr := outputOf(cmd); oerr != nil {
		errs = append(errs, oerr)
	}
	return api, errors.Join(append(errs, err)...)
}

func jobsListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list job definitions page by page, through the API",
		Description: `Lists the definitions the caller's token may see (its team's; every team's
for a cluster admin) in a stable order, --page-size at a time. Without --all
it prints one page and, when more follow, the token of the next
(--page-token). Reads through the control-plane API.

Example:
  sundial jobs list --api-url https://sundial.example:8080 --team payments --all`,
		Flags: append(apiFlags(),
			&cli.StringFlag{Name: "team", Usage: "only this team's jobs (a cluster admin's filter)", Sources: envVar("team")},
			&cli.StringFlag{Name: "state", Usage: "only active or paused jobs", Sources: envVar("state")},
			&cli.UintFlag{Name: "page-size", Value: 100, Usage: "definitions a page", Sources: envVar("page-size")},
			&cli.StringFlag{Name: "page-token", Usage: "the page to print, as the previous page named it", Sources: envVar("page-token")},
			&cli.BoolFlag{Name: "all", Usage: "follow every page", Sources: envVar("all")},
			outputFlag(),
			timeoutFlag(time.Minute),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			api, err := needAPI(cmd, "jobs list")
			filter := &apiv1.DefinitionFilter{Team: cmd.String("team")}
			switch cmd.String("state") {
			case "":
			case "active":
				filter.State = apiv1.DefinitionState_DEFINITION_STATE_ACTIVE
			case "paused":
				filter.State = apiv1.DefinitionState_DEFINITION_STATE_PAUSED
			default:
				err = errors.Join(err, fmt.Errorf("--state %q: want active or paused", cmd.String("state")))
			}
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			jobs := apiv1connect.NewJobServiceClient(api.client, api.url, api.options()...)
			return listJobs(ctx, cmd.Root().Writer, jobs, filter, uint32(cmd.Uint("page-size")), cmd.String("page-token"), cmd.Bool("all"), emitter{w: cmd.Root().Writer, form: must(outputOf(cmd))})
		},
	}
}

// listJobs prints pages of ListJobs: all of them with all, else one and the
// next page's token.
func listJobs(ctx context.Context, w io.Writer, jobs apiv1connect.JobServiceClient, filter *apiv1.DefinitionFilter, size uint32, token string, all bool, out emitter) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !out.structured() {
		fmt.Fprintln(tw, "ID\tTEAM\tSTATE\tSCHEDULE\tREVISION\tUPDATED")
	}
	for {
		resp, err := jobs.ListJobs(ctx, connectrpc.NewRequest(&apiv1.ListJobsRequest{Filter: filter, Page: &apiv1.PageRequest{Size: size, Token: token}}))
		if err != nil {
			return fmt.Errorf("list jobs: %w", err)
		}
		for _, j := range resp.Msg.GetJobs() {
			if out.structured() {
				if err := out.emit(j); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", j.GetSpec().GetId(), j.GetSpec().GetOwnerTeam(),
				enumWord(j.GetState().String(), "DEFINITION_STATE_"), enumWord(j.GetScheduleKind().String(), "SCHEDULE_KIND_"),
				j.GetRevision(), j.GetUpdatedAt().AsTime().UTC().Format(time.RFC3339))
		}
		token = resp.Msg.GetNextPageToken()
		if token == "" || !all {
			break
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if token != "" && !all && !out.structured() {
		_, err := fmt.Fprintf(w, "more: --page-token %s (or --all)\n", token)
		return err
	}
	return nil
}

func clusterCommand() *cli.Command {
	return &cli.Command{
		Name:  "cluster",
		Usage: "show shards with their owners and watermark lag, runners, executors and consumer lag, through the API",
		Description: `The cluster view of the control-plane API (ClusterService/GetCluster), for a
cluster admin's token: each dispatcher with its shards, each shard's fencing
epoch and how far its watermark is behind now, shards nobody claimed, the
runners' partitions, every executor's slots and runs in flight, and the lag
of each consumer group.

Example:
  sundial cluster --api-url https://sundial.example:8080`,
		Flags: append(apiFlags(), outputFlag(), timeoutFlag(time.Minute)),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			api, err := needAPI(cmd, "cluster")
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			c := apiv1connect.NewClusterServiceClient(api.client, api.url, api.options()...)
			resp, err := c.GetCluster(ctx, connectrpc.NewRequest(&apiv1.GetClusterRequest{}))
			if err != nil {
				return fmt.Errorf("cluster: %w", err)
			}
			if out := (emitter{w: cmd.Root().Writer, form: must(outputOf(cmd))}); out.structured() {
				return out.emit(resp.Msg)
			}
			return printCluster(cmd.Root().Writer, resp.Msg)
		},
	}
}

// printCluster writes the cluster view as tables.
func printCluster(w io.Writer, v *apiv1.GetClusterResponse) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%d shards, view at %s\n\n", v.GetShardCount(), v.GetTime().AsTime().UTC().Format(time.RFC3339))
	fmt.Fprintln(tw, "SHARD\tOWNER\tEPOCH\tWATERMARK LAG")
	for _, d := range v.GetDispatchers() {
		for _, s := range d.GetShards() {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", s.GetShard(), d.GetId(), s.GetEpoch(), lagText(s))
		}
	}
	for _, s := range v.GetUnownedShards() {
		fmt.Fprintf(tw, "%d\t(none)\t%d\t%s\n", s.GetShard(), s.GetEpoch(), lagText(s))
	}
	fmt.Fprintln(tw, "\nEXECUTOR\tPOOL\tSTATE\tSLOTS\tIN FLIGHT\tCPU\tMEMORY")
	for _, e := range v.GetExecutors() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.2f\t%d MiB\n", e.GetId(), e.GetPool(), e.GetState(), e.GetSlots(), e.GetInFlight(), e.GetCpuCores(), e.GetMemoryBytes()>>20)
	}
	fmt.Fprintln(tw, "\nRUNNER GROUP\tMEMBER\tHOST\tPARTITIONS")
	for _, r := range v.GetRunners() {
		var parts []string
		for _, tp := range r.GetPartitions() {
			parts = append(parts, fmt.Sprintf("%s%v", tp.GetTopic(), tp.GetPartitions()))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.GetGroup(), r.GetClientId(), r.GetClientHost(), strings.Join(parts, " "))
	}
	fmt.Fprintln(tw, "\nCONSUMER GROUP\tROLE\tSTATE\tLAG")
	for _, g := range v.GetConsumerGroups() {
		lag := fmt.Sprint(g.GetTotalLag())
		if g.GetError() != "" {
			lag = "unknown: " + g.GetError()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.GetGroup(), g.GetRole(), g.GetState(), lag)
	}
	for _, u := range v.GetUnavailable() {
		fmt.Fprintf(tw, "\nnot shown: %s\n", u)
	}
	return tw.Flush()
}

// lagText is a shard's watermark lag, or "never advanced".
func lagText(s *apiv1.ShardView) string {
	if s.GetWatermarkLag() == nil {
		return "never advanced"
	}
	return s.GetWatermarkLag().AsDuration().Round(time.Millisecond).String()
}

// enumWord is an enum value's name without its prefix, lower case.
func enumWord(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}
