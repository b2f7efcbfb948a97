package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/objective"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// Page sizes of ListRuns.
const (
	defaultRunPageSize = 50
	maxRunPageSize     = 1000
	// DefaultRunScan is how many of a job's newest attempts GetRun and
	// ListRuns search at most: the history store lists a job's attempts
	// newest first and cannot seek, so older ones are out of reach.
	DefaultRunScan = 10000
)

// RunHistory is the run history the run service reads; store.History
// satisfies it.
type RunHistory interface {
	ListRuns(ctx context.Context, jobID string, limit int) ([]store.RunRecord, error)
	JobSummary(ctx context.Context, jobID string) (store.Summary, error)
}

// RunEventReader reads the events of one run; *EventLog satisfies it.
type RunEventReader interface {
	RunEvents(ctx context.Context, jobID, runID string) ([]*sundialv1.RunEvent, error)
}

// RunServiceConfig holds the run service's dependencies.
type RunServiceConfig struct {
	// History is the run history (required).
	History RunHistory
	// Jobs gives each run's owning team (required).
	Jobs JobReader
	// DagRuns gives the node runs of a DAG run and their team (required).
	DagRuns DagRunReader
	// Events gives a run's events (required).
	Events RunEventReader
	// Logger receives the backend failures a caller is not shown
	// (required).
	Logger *slog.Logger
	// Scan is how many of a job's newest attempts are searched at most.
	// Default DefaultRunScan.
	Scan int
	// Index lists a team's runs by due time, for ListRuns without a job
	// or DAG run; nil answers such a request FAILED_PRECONDITION.
	Index store.RunIndex
	// Now is the clock of the default window and of the lateness of runs
	// not started yet. Default time.Now.
	Now func() time.Time
	// Logs reads the running attempts' logs the runners ship (package
	// logtail); nil answers TailRunLog FAILED_PRECONDITION: the live tail
	// needs the runners' Redis.
	Logs LogTails
	// TailPoll is how often a TailRunLog stream reads its attempt's log.
	// Default DefaultTailPoll.
	TailPoll time.Duration
	// MaxTails bounds the TailRunLog streams open at once; one more is
	// answered RESOURCE_EXHAUSTED. Default DefaultMaxTails.
	MaxTails int
	// ObjectiveScan bounds the history records one ListObjectives call
	// reads (objectives.go). Default DefaultObjectiveScan.
	ObjectiveScan int
	// Shards is the cluster's shard count, with which ListObjectives
	// names the shard of a breach the dispatcher caused; 0 names none.
	Shards int
	// Teams lists the teams for ListObjectives of every team; nil answers
	// such a request FAILED_PRECONDITION.
	Teams auth.TeamLister
}

// Validate reports every missing dependency and bad value.
func (c RunServiceConfig) Validate() error {
	var errs []error
	if c.History == nil {
		errs = append(errs, errors.New("run service: history: required"))
	}
	if c.Jobs == nil {
		errs = append(errs, errors.New("run service: jobs: required"))
	}
	if c.DagRuns == nil {
		errs = append(errs, errors.New("run service: DAG runs: required"))
	}
	if c.Events == nil {
		errs = append(errs, errors.New("run service: events: required"))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("run service: logger: required"))
	}
	if c.Scan < 0 {
		errs = append(errs, fmt.Errorf("run service: scan %d: must not be negative", c.Scan))
	}
	if c.TailPoll < 0 {
		errs = append(errs, fmt.Errorf("run service: tail poll %v: must not be negative", c.TailPoll))
	}
	if c.MaxTails < 0 {
		errs = append(errs, fmt.Errorf("run service: max tails %d: must not be negative", c.MaxTails))
	}
	if c.ObjectiveScan < 0 {
		errs = append(errs, fmt.Errorf("run service: objective scan %d: must not be negative", c.ObjectiveScan))
	}
	if c.Shards < 0 {
		errs = append(errs, fmt.Errorf("run service: shards %d: must not be negative", c.Shards))
	}
	return errors.Join(errs...)
}

// RunService implements apiv1connect.RunServiceHandler over the run
// history and sundial.events.
type RunService struct {
	cfg RunServiceConfig
	// tails counts the open TailRunLog streams.
	tails atomic.Int64
}

var _ apiv1connect.RunServiceHandler = (*RunService)(nil)

// NewRunService returns a run service, or the config's errors.
func NewRunService(cfg RunServiceConfig) (*RunService, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Scan = cmp.Or(cfg.Scan, DefaultRunScan)
	cfg.TailPoll = cmp.Or(cfg.TailPoll, DefaultTailPoll)
	cfg.MaxTails = cmp.Or(cfg.MaxTails, DefaultMaxTails)
	cfg.ObjectiveScan = cmp.Or(cfg.ObjectiveScan, DefaultObjectiveScan)
	cfg.Now = deps.Clock(cfg.Now)
	return &RunService{cfg: cfg}, nil
}

// runTarget is what a run id resolves to: the job whose history holds the
// run and the team that owns it.
type runTarget struct {
	jobID string
	team  string
	found bool
}

// resolveRun finds a run's job and team: the job in a plain run id
// (job@millis), or the node's job in the DAG run's definition for a node
// run id (dag@millis/node).
func (s *RunService) resolveRun(ctx context.Context, runID string) (runTarget, error) {
	if dagRunID, nodeID, ok := splitNodeRunID(runID); ok {
		spec, found, err := dagRunSpec(ctx, s.cfg.DagRuns, dagRunID)
		if err != nil || !found {
			return runTarget{}, err
		}
		for _, n := range spec.GetNodes() {
			if n.GetId() == nodeID {
				team, err := s.nodeTeam(ctx, spec, n)
				return runTarget{jobID: nodeJobID(spec, n), team: team, found: true}, err
			}
		}
		return runTarget{}, nil
	}
	jobID, ok := runJobID(runID)
	if !ok {
		return runTarget{}, nil
	}
	spec, _, found, err := jobSpec(ctx, s.cfg.Jobs, jobID)
	if err != nil || !found {
		return runTarget{}, err
	}
	return runTarget{jobID: jobID, team: spec.GetOwnerTeam(), found: true}, nil
}

// nodeTeam returns the team whose history holds the runs of DAG node n:
// the DAG's for an inline node, the job's STORED owner_team for a job_id
// node (none for a deleted or missing job). The two agree for every run the
// DAG engine starts today, since it starts only a job of the DAG's team;
// runs it started on another team's job before that rule, or before the
// job changed hands, stay that team's: the DAG's team does not read them.
func (s *RunService) nodeTeam(ctx context.Context, dag *sundialv1.DagSpec, n *sundialv1.DagNode) (string, error) {
	id := n.GetJobId()
	if id == "" {
		return dag.GetOwnerTeam(), nil
	}
	spec, job, found, err := jobSpec(ctx, s.cfg.Jobs, id)
	if err != nil || !found || job.Deleted {
		return "", err
	}
	return spec.GetOwnerTeam(), nil
}

// runJobID returns the job id of a run id (job@unix-millis).
func runJobID(runID string) (string, bool) {
	i := strings.LastIndexByte(runID, '@')
	if i <= 0 {
		return "", false
	}
	if _, err := strconv.ParseInt(runID[i+1:], 10, 64); err != nil {
		return "", false
	}
	return runID[:i], true
}

// GetRun returns one run with every attempt and its retained events.
func (s *RunService) GetRun(ctx context.Context, req *connect.Request[apiv1.GetRunRequest]) (*connect.Response[apiv1.GetRunResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	runID := req.Msg.GetRunId()
	if runID == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("run_id: required"))
	}
	target, err := s.resolveRun(ctx, runID)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "get run: resolve", "run_id", runID, "err", err)
		return nil, internalError("get run")
	}
	if !target.found || !p.CanSee(target.team) {
		return nil, notVisible("run", runID)
	}
	recs, err := s.cfg.History.ListRuns(ctx, target.jobID, s.cfg.Scan)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "get run: history", "run_id", runID, "err", err)
		return nil, internalError("get run")
	}
	run := &apiv1.RunDetail{RunId: runID, JobId: target.jobID, OwnerTeam: target.team}
	now := s.cfg.Now()
	for _, r := range slices.Backward(recs) { // stored newest attempt first
		if r.RunID == runID {
			run.Attempts = append(run.Attempts, attemptDetailOf(r, now))
			run.DueTime = timestamppb.New(r.Due)
		}
	}
	events, err := s.cfg.Events.RunEvents(ctx, target.jobID, runID)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "get run: events", "run_id", runID, "err", err)
		return nil, internalError("get run")
	}
	run.Events = events
	if len(run.Attempts) == 0 && len(events) == 0 {
		return nil, notVisible("run", runID)
	}
	if run.DueTime == nil && len(events) > 0 {
		run.DueTime = events[0].GetDueTime()
	}
	return connect.NewResponse(&apiv1.GetRunResponse{Run: run}), nil
}

// ListRuns returns one page of the attempts of a job's runs or of a DAG
// run's node runs.
func (s *RunService) ListRuns(ctx context.Context, req *connect.Request[apiv1.ListRunsRequest]) (*connect.Response[apiv1.ListRunsResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if m.GetJobId() == "" && m.GetDagRunId() == "" {
		return s.listTeamRuns(ctx, p, m)
	}
	size, offset, err := s.checkListRuns(m)
	if err != nil {
		return nil, err
	}
	var (
		jobs  []string
		team  string
		found bool
		// nodeRuns holds the run id prefixes of a DAG run's nodes.
		nodeRuns string
	)
	if m.GetJobId() != "" {
		spec, _, ok, err := jobSpec(ctx, s.cfg.Jobs, m.GetJobId())
		if err != nil {
			s.cfg.Logger.ErrorContext(ctx, "list runs: job", "job_id", m.GetJobId(), "err", err)
			return nil, internalError("list runs")
		}
		jobs, team, found = []string{m.GetJobId()}, spec.GetOwnerTeam(), ok
	} else {
		spec, ok, err := dagRunSpec(ctx, s.cfg.DagRuns, m.GetDagRunId())
		if err != nil {
			s.cfg.Logger.ErrorContext(ctx, "list runs: DAG run", "dag_run_id", m.GetDagRunId(), "err", err)
			return nil, internalError("list runs")
		}
		for _, n := range spec.GetNodes() {
			id := nodeJobID(spec, n)
			if slices.Contains(jobs, id) {
				continue
			}
			nodeTeam, err := s.nodeTeam(ctx, spec, n)
			if err != nil {
				s.cfg.Logger.ErrorContext(ctx, "list runs: node job", "dag_run_id", m.GetDagRunId(), "job_id", id, "err", err)
				return nil, internalError("list runs")
			}
			if p.CanSee(nodeTeam) {
				jobs = append(jobs, id)
			}
		}
		team, found, nodeRuns = spec.GetOwnerTeam(), ok, m.GetDagRunId()+"/"
	}
	if !found || !p.CanSee(team) {
		// Another team's job or DAG run lists nothing, like one that does
		// not exist: a list never tells that it exists.
		return connect.NewResponse(&apiv1.ListRunsResponse{}), nil
	}
	if m.GetTeam() != "" && m.GetTeam() != team {
		return connect.NewResponse(&apiv1.ListRunsResponse{}), nil
	}
	now := s.cfg.Now()
	keep := func(r store.RunRecord) bool {
		switch {
		case m.GetMinLateBy() != nil && r.LateBy(now) < m.GetMinLateBy().AsDuration(),
			nodeRuns != "" && !strings.HasPrefix(r.RunID, nodeRuns),
			len(m.GetStates()) > 0 && !slices.Contains(m.GetStates(), attemptState(r.State)),
			m.GetDueAfter() != nil && r.Due.Before(m.GetDueAfter().AsTime()),
			m.GetDueBefore() != nil && !r.Due.Before(m.GetDueBefore().AsTime()),
			!errorContains(r.Error, m.GetErrorContains()):
			return false
		}
		return true
	}
	var all []store.RunRecord
	for _, job := range jobs {
		recs, err := s.matching(ctx, job, keep, offset+size+1)
		if err != nil {
			s.cfg.Logger.ErrorContext(ctx, "list runs: history", "job_id", job, "err", err)
			return nil, internalError("list runs")
		}
		all = append(all, recs...)
	}
	slices.SortStableFunc(all, compareRecords)
	resp := &apiv1.ListRunsResponse{}
	for _, r := range all[min(offset, len(all)):min(offset+size, len(all))] {
		resp.Attempts = append(resp.Attempts, attemptDetailOf(r, now))
	}
	if len(all) > offset+size {
		resp.NextPageToken = pageToken(runPageKey(m), offset+size)
	}
	if m.GetJobId() != "" {
		sum, err := s.cfg.History.JobSummary(ctx, m.GetJobId())
		if err != nil {
			s.cfg.Logger.ErrorContext(ctx, "list runs: summary", "job_id", m.GetJobId(), "err", err)
			return nil, internalError("list runs")
		}
		resp.Summary = summaryOf(sum)
	}
	return connect.NewResponse(resp), nil
}

// checkRunFilter reports every bad field of a ListRuns request's page size
// and filters (states, due window, min_late_by), whichever runs it lists,
// and returns the page size.
func checkRunFilter(m *apiv1.ListRunsRequest) (int, []error) {
	var errs []error
	size := int(m.GetPageSize())
	switch {
	case size == 0:
		size = defaultRunPageSize
	case size < 0 || size > maxRunPageSize:
		errs = append(errs, fmt.Errorf("page_size %d: must be between 1 and %d", size, maxRunPageSize))
	}
	for _, st := range m.GetStates() {
		if _, ok := apiv1.RunAttemptState_name[int32(st)]; !ok || st == apiv1.RunAttemptState_RUN_ATTEMPT_STATE_UNSPECIFIED {
			errs = append(errs, fmt.Errorf("states: %d is not a run attempt state", st))
		}
	}
	if a, b := m.GetDueAfter(), m.GetDueBefore(); a != nil && b != nil && !a.AsTime().Before(b.AsTime()) {
		errs = append(errs, errors.New("due_after: must be before due_before"))
	}
	if d := m.GetMinLateBy(); d != nil && d.AsDuration() < 0 {
		errs = append(errs, fmt.Errorf("min_late_by %s: must not be negative", d.AsDuration()))
	}
	if n := len(m.GetErrorContains()); n > maxErrorContains {
		errs = append(errs, fmt.Errorf("error_contains: %d bytes, at most %d", n, maxErrorContains))
	}
	return size, errs
}

// checkListRuns reports every bad field of a ListRuns request and returns
// the page size and the offset its token points at.
func (s *RunService) checkListRuns(m *apiv1.ListRunsRequest) (size, offset int, _ error) {
	var errs []error
	if m.GetJobId() != "" && m.GetDagRunId() != "" {
		errs = append(errs, errors.New("job_id, dag_run_id: at most one may be set"))
	}
	size, filterErrs := checkRunFilter(m)
	errs = append(errs, filterErrs...)
	if tok := m.GetPageToken(); tok != "" {
		var err error
		if offset, err = parsePageToken(runPageKey(m), tok); err != nil {
			errs = append(errs, err)
		} else if offset >= s.cfg.Scan {
			errs = append(errs, fmt.Errorf("page_token: beyond the %d newest attempts the history can search", s.cfg.Scan))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, 0, connect.NewError(connect.CodeInvalidArgument, err)
	}
	return size, offset, nil
}

// matching returns up to want records of job that keep accepts, newest
// first, reading more of the history while too few match, up to Scan.
func (s *RunService) matching(ctx context.Context, job string, keep func(store.RunRecord) bool, want int) ([]store.RunRecord, error) {
	limit := min(want, s.cfg.Scan)
	for {
		recs, err := s.cfg.History.ListRuns(ctx, job, limit)
		if err != nil {
			return nil, err
		}
		out := slices.DeleteFunc(recs, func(r store.RunRecord) bool { return !keep(r) })
		if len(out) >= want || len(recs) < limit || limit >= s.cfg.Scan {
			return out, nil
		}
		limit = min(limit*4, s.cfg.Scan)
	}
}

// compareRecords orders records as the history lists them: newest due
// first, then run id ascending, attempt descending.
func compareRecords(a, b store.RunRecord) int {
	return cmp.Or(b.Due.Compare(a.Due), strings.Compare(a.RunID, b.RunID), cmp.Compare(b.Attempt, a.Attempt))
}

// runPageKey is the request without its paging fields, which a page
// token is bound to.
func runPageKey(m *apiv1.ListRunsRequest) *apiv1.ListRunsRequest {
	k := proto.CloneOf(m)
	k.PageSize, k.PageToken = 0, ""
	return k
}

// attemptDetailOf converts a history record, with where it lost the most
// time on its way to its start (objective.CauseOf) as of now.
func attemptDetailOf(r store.RunRecord, now time.Time) *apiv1.AttemptDetail {
	a := &apiv1.AttemptDetail{
		RunId: r.RunID, JobId: r.JobID, Attempt: uint32(r.Attempt), State: attemptState(r.State),
		DueTime: timestamppb.New(r.Due), AttemptDueTime: timestamppb.New(cmp.Or(r.AttemptDue, r.Due)),
		Error: r.Error, Log: r.Log, UpdateTime: timestamppb.New(r.UpdatedAt),
	}
	if !r.Started.IsZero() {
		a.StartTime = timestamppb.New(r.Started)
	}
	if !r.Finished.IsZero() {
		a.FinishTime = timestamppb.New(r.Finished)
	}
	if r.Duration > 0 || r.State == store.StateSucceeded {
		a.Duration = durationpb.New(r.Duration)
	}
	a.OwnerTeam, a.WaitReason = r.OwnerTeam, r.WaitReason
	ts := func(t time.Time) *timestamppb.Timestamp {
		if t.IsZero() {
			return nil
		}
		return timestamppb.New(t)
	}
	a.DispatchTime, a.ReceiveTime, a.LeaseTime = ts(r.Dispatched), ts(r.Received), ts(r.Leased)
	c := objective.CauseOf(r, now)
	a.Cause = c.Where
	if c.Where != objective.CauseUnknown {
		a.CauseTime = durationpb.New(c.Lost)
	}
	return a
}

// attemptState maps a history state to the API's.
func attemptState(s store.RunState) apiv1.RunAttemptState {
	switch s {
	case store.StateScheduled:
		return apiv1.RunAttemptState_RUN_ATTEMPT_STATE_SCHEDULED
	case store.StateRunning:
		return apiv1.RunAttemptState_RUN_ATTEMPT_STATE_RUNNING
	case store.StateSucceeded:
		return apiv1.RunAttemptState_RUN_ATTEMPT_STATE_SUCCEEDED
	case store.StateFailed:
		return apiv1.RunAttemptState_RUN_ATTEMPT_STATE_FAILED
	case store.StateSkipped:
		return apiv1.RunAttemptState_RUN_ATTEMPT_STATE_SKIPPED
	case store.StateCancelled:
		return apiv1.RunAttemptState_RUN_ATTEMPT_STATE_CANCELLED
	case store.StateSuspended:
		return apiv1.RunAttemptState_RUN_ATTEMPT_STATE_SUSPENDED
	}
	return apiv1.RunAttemptState_RUN_ATTEMPT_STATE_UNSPECIFIED
}

// AttemptState maps a history state to the API's; UNSPECIFIED for an
// unknown one.
func AttemptState(s store.RunState) apiv1.RunAttemptState { return attemptState(s) }

// StoreRunState maps an API attempt state back to the history's. A state
// this build does not know (UNSPECIFIED, or one a newer server added) keeps
// its API name, so that a client prints it rather than nothing. Clients
// that print the history the way the store reads it (the CLI through the
// API) use it.
func StoreRunState(s apiv1.RunAttemptState) store.RunState {
	for _, st := range []store.RunState{store.StateScheduled, store.StateRunning, store.StateSucceeded,
		store.StateFailed, store.StateSkipped, store.StateCancelled, store.StateSuspended} {
		if attemptState(st) == s {
			return st
		}
	}
	return store.RunState(s.String())
}

// summaryOf converts a job's history summary.
func summaryOf(s store.Summary) *apiv1.RunHistorySummary {
	out := &apiv1.RunHistorySummary{Runs: int64(s.Runs), Attempts: int64(s.Attempts), Failures: int64(s.Failures)}
	if s.LastRun != nil {
		out.LastRunId, out.LastRunState = s.LastRun.RunID, attemptState(s.LastRun.State)
	}
	if !s.NextDue.IsZero() {
		out.NextDueTime = timestamppb.New(s.NextDue)
	}
	return out
}

// RunRecordOf converts an API attempt back to a history record, for
// clients that share the store's printing code.
func RunRecordOf(a *apiv1.AttemptDetail) store.RunRecord {
	r := store.RunRecord{
		JobID: a.GetJobId(), RunID: a.GetRunId(), Attempt: int(a.GetAttempt()), State: StoreRunState(a.GetState()),
		Due: a.GetDueTime().AsTime(), AttemptDue: a.GetAttemptDueTime().AsTime(), Error: a.GetError(), Log: a.GetLog(),
		Duration: a.GetDuration().AsDuration(), UpdatedAt: a.GetUpdateTime().AsTime(),
	}
	if a.GetStartTime() != nil {
		r.Started = a.GetStartTime().AsTime()
	}
	if a.GetFinishTime() != nil {
		r.Finished = a.GetFinishTime().AsTime()
	}
	r.OwnerTeam, r.WaitReason = a.GetOwnerTeam(), a.GetWaitReason()
	for _, f := range []struct {
		dst *time.Time
		ts  *timestamppb.Timestamp
	}{{&r.Dispatched, a.GetDispatchTime()}, {&r.Received, a.GetReceiveTime()}, {&r.Leased, a.GetLeaseTime()}} {
		if f.ts != nil {
			*f.dst = f.ts.AsTime()
		}
	}
	return r
}

// SummaryOf converts an API summary back to the history's.
func SummaryOf(s *apiv1.RunHistorySummary) store.Summary {
	out := store.Summary{Runs: int(s.GetRuns()), Attempts: int(s.GetAttempts()), Failures: int(s.GetFailures())}
	if s.GetLastRunId() != "" {
		out.LastRun = &store.RunRecord{RunID: s.GetLastRunId(), State: StoreRunState(s.GetLastRunState())}
	}
	if s.GetNextDueTime() != nil {
		out.NextDue = s.GetNextDueTime().AsTime()
	}
	return out
}

// maxErrorContains bounds ListRunsRequest.error_contains.
const maxErrorContains = 256

// errorContains reports whether an attempt's error contains text, ignoring
// case; an empty text selects every attempt.
func errorContains(err, text string) bool {
	return text == "" || strings.Contains(strings.ToLower(err), strings.ToLower(text))
}
