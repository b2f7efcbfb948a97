package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	connectrpc "connectrpc.com/connect"
	"github.com/urfave/cli/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/internal/connect"
	"github.com/sundialhq/sundial/internal/topics"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/deadletter"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
)

// The query commands (runs list, runs get, dlq list) read through the
// control-plane API when --api-url is set, and Cassandra or Kafka directly
// otherwise. Both paths fill the same values, which one printer writes, so
// the output does not depend on the path. This file is the one place that
// chooses.

// apiFlags say how to reach the control-plane API.
func apiFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "api-url", Usage: "base URL of the control-plane API (sundial api); when set, queries go through it instead of Cassandra and Kafka", Sources: envVar("api-url")},
		&cli.StringFlag{Name: "api-token", Usage: "bearer token for --api-url; prefer the environment or --api-token-file", Sources: envVar("api-token")},
		&cli.StringFlag{Name: "api-token-file", Usage: "file holding the bearer token for --api-url", Sources: envVar("api-token-file")},
		&cli.StringFlag{Name: "api-tls-ca-file", Usage: "PEM bundle of the authorities that sign the API's certificate (default: the system's)", Sources: envVar("api-tls-ca-file")},
		&cli.StringFlag{Name: "api-tls-cert-file", Usage: "PEM client certificate, for mutual TLS with the API (with --api-tls-key-file)", Sources: envVar("api-tls-cert-file")},
		&cli.StringFlag{Name: "api-tls-key-file", Usage: "PEM key of --api-tls-cert-file", Sources: envVar("api-tls-key-file")},
		&cli.StringFlag{Name: "api-tls-server-name", Usage: "name the API's certificate must carry (default: the host of --api-url)", Sources: envVar("api-tls-server-name")},
	}
}

// apiConn is a configured API endpoint.
type apiConn struct {
	url    string
	token  connect.Secret
	client *http.Client
}

// apiConfig reads the API flags; ok is false when --api-url is not set.
func apiConfig(cmd *cli.Command) (apiConn, bool, error) {
	raw := cmd.String("api-url")
	if raw == "" {
		return apiConn{}, false, nil
	}
	var errs []error
	if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("--api-url %q: want an http or https URL", raw))
	}
	tok, err := secret(cmd, "api-token")
	if err != nil {
		errs = append(errs, err)
	}
	client := http.DefaultClient
	tc, err := readTLS(cmd, "api").Config("api")
	switch {
	case err != nil:
		errs = append(errs, err)
	case tc != nil:
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		client = &http.Client{Transport: tr}
	}
	return apiConn{url: raw, token: tok, client: client}, true, errors.Join(errs...)
}

// options returns the client options that send the bearer token.
func (a apiConn) options() []connectrpc.ClientOption {
	if a.token == "" {
		return nil
	}
	bearer := "Bearer " + a.token.Reveal()
	return []connectrpc.ClientOption{connectrpc.WithInterceptors(connectrpc.UnaryInterceptorFunc(
		func(next connectrpc.UnaryFunc) connectrpc.UnaryFunc {
			return func(ctx context.Context, req connectrpc.AnyRequest) (connectrpc.AnyResponse, error) {
				req.Header().Set("Authorization", bearer)
				return next(ctx, req)
			}
		}))}
}

// runSource is where runs list and runs get read run history.
type runSource interface {
	// jobRuns returns a job's summary and up to limit of its attempts
	// that f keeps, newest first.
	jobRuns(ctx context.Context, job string, limit int, f runFilter) (store.Summary, []store.RunRecord, error)
	// teamRuns returns up to limit attempts of f.team's runs of every job
	// that f keeps, newest first.
	teamRuns(ctx context.Context, limit int, f runFilter) ([]store.RunRecord, error)
	// runAttempts returns every attempt of one run, oldest first, and the
	// run's events where the source has them (the API).
	runAttempts(ctx context.Context, job, runID string, scan int) ([]store.RunRecord, []*sundialv1.RunEvent, error)
}

// runFilter is the selection of runs list: --team, --state, --since and
// --late-by, judged at now.
type runFilter struct {
	team   string
	states []store.RunState
	since  time.Time
	lateBy time.Duration
	now    time.Time
}

// keep reports whether r passes f (but for the team, which selects where
// the runs are read).
func (f runFilter) keep(r store.RunRecord) bool {
	switch {
	case len(f.states) > 0 && !slices.Contains(f.states, r.State),
		!f.since.IsZero() && r.Due.Before(f.since),
		f.lateBy > 0 && r.LateBy(f.now) < f.lateBy:
		return false
	}
	return true
}

// until is the end of the window of due times a team's runs are listed
// in: scheduled attempts due soon are listed too.
func (f runFilter) until() time.Time { return f.now.Add(time.Hour) }

// runStore is what the CLI reads from Cassandra directly.
type runStore interface {
	store.History
	store.RunIndex
}

// withRunSource reports bad together with the flags' errors, or else runs
// use on the API when --api-url is set and on Cassandra otherwise.
func withRunSource(ctx context.Context, cmd *cli.Command, bad []error, use func(runSource) error) error {
	api, ok, err := apiConfig(cmd)
	if !ok {
		return withStore(ctx, cmd, bad, func(st *cassandra.Store) error { return use(storeRuns{st}) })
	}
	if err := errors.Join(append(bad, err)...); err != nil {
		return err
	}
	return use(apiRuns{apiv1connect.NewRunServiceClient(api.client, api.url, api.options()...)})
}

// storeRuns reads the history in Cassandra.
type storeRuns struct{ h runStore }

// filteredScan is how many of a job's newest attempts a filtered runs list
// reads from the store, as the API's DefaultRunScan.
const filteredScan = 10000

// jobRuns reads the runs before the summary: history only grows, so the
// summary then counts at least every run listed (read the other way round, a
// run recorded between the reads showed as a row under "0 run(s)").
func (s storeRuns) jobRuns(ctx context.Context, job string, limit int, f runFilter) (store.Summary, []store.RunRecord, error) {
	scan := limit
	if len(f.states) > 0 || !f.since.IsZero() || f.lateBy > 0 {
		scan = max(limit, filteredScan)
	}
	runs, err := s.h.ListRuns(ctx, job, scan)
	if err != nil {
		return store.Summary{}, nil, err
	}
	runs = slices.DeleteFunc(runs, func(r store.RunRecord) bool { return !f.keep(r) })
	runs = runs[:min(limit, len(runs))]
	sum, err := s.h.JobSummary(ctx, job)
	return sum, runs, err
}

func (s storeRuns) teamRuns(ctx context.Context, limit int, f runFilter) ([]store.RunRecord, error) {
	if f.team == "" {
		return nil, errors.New("--team: required without --job when reading Cassandra (with --api-url it defaults to the token's team)")
	}
	return s.h.ListTeamRuns(ctx, store.TeamRunsQuery{Team: f.team, From: f.since, To: f.until(), Keep: f.keep, Limit: limit})
}

func (s storeRuns) runAttempts(ctx context.Context, job, runID string, scan int) ([]store.RunRecord, []*sundialv1.RunEvent, error) {
	recs, err := s.h.ListRuns(ctx, job, scan)
	if err != nil {
		return nil, nil, err
	}
	var out []store.RunRecord
	for _, r := range slices.Backward(recs) { // stored newest attempt first
		if r.RunID == runID {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("run %s: not in the newest %d attempts of job %s (--scan)", runID, scan, job)
	}
	return out, nil, nil
}

// apiRuns reads the history through the API's run service.
type apiRuns struct{ c apiv1connect.RunServiceClient }

// apiPageSize is the largest page the API serves.
const apiPageSize = 1000

// request is the ListRuns request of f.
func (f runFilter) request() *apiv1.ListRunsRequest {
	req := &apiv1.ListRunsRequest{Team: f.team}
	for _, s := range f.states {
		req.States = append(req.States, apiserver.AttemptState(s))
	}
	if !f.since.IsZero() {
		req.DueAfter = timestamppb.New(f.since)
	}
	if f.lateBy > 0 {
		req.MinLateBy = durationpb.New(f.lateBy)
	}
	return req
}

func (a apiRuns) teamRuns(ctx context.Context, limit int, f runFilter) ([]store.RunRecord, error) {
	var runs []store.RunRecord
	req := f.request()
	req.DueBefore = timestamppb.New(f.until())
	for {
		req.PageSize = int32(min(limit-len(runs), apiPageSize))
		resp, err := a.c.ListRuns(ctx, connectrpc.NewRequest(req))
		if err != nil {
			return nil, fmt.Errorf("api: list runs: %w", err)
		}
		for _, at := range resp.Msg.GetAttempts() {
			runs = append(runs, apiserver.RunRecordOf(at))
		}
		req.PageToken = resp.Msg.GetNextPageToken()
		if req.PageToken == "" || len(runs) >= limit {
			return runs, nil
		}
	}
}

func (a apiRuns) jobRuns(ctx context.Context, job string, limit int, f runFilter) (store.Summary, []store.RunRecord, error) {
	var (
		sum  store.Summary
		runs []store.RunRecord
		tok  string
	)
	for {
		req := f.request()
		req.JobId, req.PageSize, req.PageToken = job, int32(min(limit-len(runs), apiPageSize)), tok
		resp, err := a.c.ListRuns(ctx, connectrpc.NewRequest(req))
		if err != nil {
			return store.Summary{}, nil, fmt.Errorf("api: list runs of %s: %w", job, err)
		}
		if resp.Msg.GetSummary() != nil {
			sum = apiserver.SummaryOf(resp.Msg.GetSummary())
		}
		for _, at := range resp.Msg.GetAttempts() {
			runs = append(runs, apiserver.RunRecordOf(at))
		}
		tok = resp.Msg.GetNextPageToken()
		if tok == "" || len(runs) >= limit {
			return sum, runs, nil
		}
	}
}

func (a apiRuns) runAttempts(ctx context.Context, _, runID string, _ int) ([]store.RunRecord, []*sundialv1.RunEvent, error) {
	resp, err := a.c.GetRun(ctx, connectrpc.NewRequest(&apiv1.GetRunRequest{RunId: runID}))
	if err != nil {
		return nil, nil, fmt.Errorf("api: get run %s: %w", runID, err)
	}
	out := make([]store.RunRecord, 0, len(resp.Msg.GetRun().GetAttempts()))
	for _, at := range resp.Msg.GetRun().GetAttempts() {
		out = append(out, apiserver.RunRecordOf(at))
	}
	return out, resp.Msg.GetRun().GetEvents(), nil
}

// deadLetters reads the dead letters f selects, oldest first: through the
// API's dead-letter service when --api-url is set, else from Kafka.
func deadLetters(ctx context.Context, cmd *cli.Command, f deadletter.Filter) ([]*sundialv1.DeadLetter, error) {
	api, ok, err := apiConfig(cmd)
	if err != nil {
		return nil, err
	}
	if !ok {
		kopts, err := kafkaOptions(cmd)
		if err != nil {
			return nil, err
		}
		if err := checkKafka(ctx, kopts); err != nil {
			return nil, err
		}
		return deadletter.Read(ctx, kopts, topics.Names{Prefix: cmd.String("topic-prefix")}.DLQ(), f)
	}
	c := apiv1connect.NewDlqServiceClient(api.client, api.url, api.options()...)
	filter := &apiv1.DeadLetterFilter{JobId: f.JobID, RunId: f.RunID}
	if !f.Since.IsZero() {
		filter.DeadAfter = timestamppb.New(f.Since)
	}
	if !f.Until.IsZero() {
		filter.DeadBefore = timestamppb.New(f.Until)
	}
	var out []*sundialv1.DeadLetter
	req := &apiv1.ListDeadLettersRequest{Filter: filter, PageSize: apiPageSize}
	for {
		resp, err := c.ListDeadLetters(ctx, connectrpc.NewRequest(req))
		if err != nil {
			return nil, fmt.Errorf("api: list dead letters: %w", err)
		}
		out = append(out, resp.Msg.GetDeadLetters()...)
		if req.PageToken = resp.Msg.GetNextPageToken(); req.PageToken == "" {
			return out, nil
		}
	}
}
