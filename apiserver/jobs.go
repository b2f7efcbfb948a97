package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/jobspec"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/schedule"
	"github.com/sundialhq/sundial/store"
)

// JobStore is what JobService reads: definitions and run history.
type JobStore interface {
	GetJob(ctx context.Context, id string) (store.Job, error)
	ListJobs(ctx context.Context, after string, limit int) (store.JobPage, error)
	ListRuns(ctx context.Context, jobID string, limit int) ([]store.RunRecord, error)
}

// JobWriter produces definitions and tombstones to the jobs topic and
// waits for the registry's answers; *client.Client is one.
type JobWriter interface {
	Apply(ctx context.Context, spec *sundialv1.JobSpec) (client.Receipt, error)
	Delete(ctx context.Context, id string) (client.Receipt, error)
	WaitStatus(ctx context.Context, receipts ...client.Receipt) ([]*sundialv1.JobStatus, error)
}

// Limits of JobView.
const (
	defaultFireTimes = 10
	maxFireTimes     = 100
	defaultLastRuns  = 20
	maxLastRuns      = 500
)

// JobServiceConfig configures a JobService.
type JobServiceConfig struct {
	// Store reads definitions and history. Required.
	Store JobStore
	// Writer produces changes and reads the registry's answers. Required.
	Writer JobWriter
	// AnswerTimeout bounds the wait for the registry's answer to a change.
	// A change not answered in time may still be applied later. Default
	// 30 s.
	AnswerTimeout time.Duration
	// MaxScan bounds how many stored definitions one listing request reads
	// to fill its page; past it the page is returned short, with a token.
	// Default 20 times the page size.
	MaxScan int
	// Audit, when set, records every change the registry accepted with the
	// caller (auth.Principal.Subject) as actor, beside the registry's own
	// record that names the Kafka topic. Recording fails no call: the
	// change is made; a failure is logged.
	Audit audit.Recorder
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock of next fire times. Default time.Now.
	Now func() time.Time
}

// Validate reports every bad field.
func (c JobServiceConfig) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("job service config: store: required"))
	}
	if c.Writer == nil {
		errs = append(errs, errors.New("job service config: writer: required"))
	}
	if c.AnswerTimeout < 0 {
		errs = append(errs, fmt.Errorf("job service config: answer timeout %v: must not be negative", c.AnswerTimeout))
	}
	if c.MaxScan < 0 {
		errs = append(errs, fmt.Errorf("job service config: max scan %d: must not be negative", c.MaxScan))
	}
	return errors.Join(errs...)
}

// JobService implements apiv1connect.JobServiceHandler.
type JobService struct {
	cfg JobServiceConfig
}

var _ apiv1connect.JobServiceHandler = (*JobService)(nil)

// NewJobService checks cfg and fills its defaults.
func NewJobService(cfg JobServiceConfig) (*JobService, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.AnswerTimeout = cmp.Or(cfg.AnswerTimeout, 30*time.Second)
	cfg.Logger = deps.Logger(cfg.Logger)
	cfg.Now = deps.Clock(cfg.Now)
	return &JobService{cfg: cfg}, nil
}

// Service mounts the job service on a Server.
func (s *JobService) Service() Service {
	return ConnectService(apiv1connect.NewJobServiceHandler, apiv1connect.JobServiceHandler(s))
}

// principal is the caller the authentication interceptor put in ctx.
func principal(ctx context.Context) (auth.Principal, error) {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return auth.Principal{}, connect.NewError(connect.CodeUnauthenticated, errNoToken)
	}
	return p, nil
}

// needID checks a request's id field.
func needID(id string) error {
	if id == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("id: required"))
	}
	return nil
}

// mayChange checks that p may apply or delete a definition of team. The
// caller already knows the team (its own request names it, or it can see
// the stored definition).
func mayChange(p auth.Principal, team, what string) error {
	if p.Allows(team, auth.RoleAdmin) {
		return nil
	}
	if team == "" {
		return connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("%s: spec.owner_team: required, as it decides who may see and change the definition", what))
	}
	if p.CanSee(team) {
		return connect.NewError(connect.CodePermissionDenied,
			fmt.Errorf("%s: needs the admin role in team %q; the caller is %s", what, team, p.Role))
	}
	return connect.NewError(connect.CodePermissionDenied,
		fmt.Errorf("%s: owner_team %q: the caller acts for team %q only", what, team, p.Team))
}

// storeError maps a store failure to an answer.
func storeError(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeOf(err), fmt.Errorf("%s: %w", op, err))
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s: the store: %w", op, err))
}

// lookupJob reads a live definition, whoever owns it.
func (s *JobService) lookupJob(ctx context.Context, id string) (store.Job, *sundialv1.JobSpec, bool, error) {
	j, err := s.cfg.Store.GetJob(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && j.Deleted) {
		return store.Job{}, nil, false, nil
	}
	if err != nil {
		return store.Job{}, nil, false, storeError("read job", err)
	}
	spec := &sundialv1.JobSpec{}
	if err := proto.Unmarshal(j.Spec, spec); err != nil {
		return store.Job{}, nil, false, connect.NewError(connect.CodeInternal, fmt.Errorf("job %q: the stored definition does not decode: %w", id, err))
	}
	return j, spec, true, nil
}

// storedJob reads a definition the caller may see, or answers NotFound.
func (s *JobService) storedJob(ctx context.Context, p auth.Principal, id string) (store.Job, *sundialv1.JobSpec, error) {
	return visibleDefinition(ctx, p, "job", id, s.lookupJob)
}

// visibleDefinition reads the definition id (a job's or a DAG's) through
// lookup, whoever owns it, and returns it when p may see its owner team.
// One that is missing, deleted or another team's is answered NotFound
// alike (notFound, naming kind), so that no answer tells another team's
// ids.
func visibleDefinition[Row any, Spec interface{ GetOwnerTeam() string }](ctx context.Context, p auth.Principal, kind, id string,
	lookup func(context.Context, string) (Row, Spec, bool, error)) (Row, Spec, error) {
	row, spec, found, err := lookup(ctx, id)
	if err == nil && (!found || !p.CanSee(spec.GetOwnerTeam())) {
		err = notVisible(kind, id)
	}
	if err != nil {
		var noRow Row
		var noSpec Spec
		return noRow, noSpec, err
	}
	return row, spec, nil
}

// jobOf is the answer for a stored job. Its secret values read
// jobspec.Redacted, whoever asks: spec is redacted in place, so it must be
// the caller's own decoded copy.
func jobOf(j store.Job, spec *sundialv1.JobSpec) *apiv1.Job {
	jobspec.Redact(spec)
	return &apiv1.Job{
		Spec:         spec,
		Revision:     j.Revision,
		UpdatedAt:    timestamppb.New(j.UpdatedAt),
		State:        stateOf(spec.GetPaused()),
		ScheduleKind: scheduleKindOf(spec.GetSchedule()),
	}
}

// answer waits for the registry's answer to a receipt.
func (s *JobService) answer(ctx context.Context, r client.Receipt) (*sundialv1.JobStatus, error) {
	return waitAnswer(ctx, s.cfg.Writer, s.cfg.AnswerTimeout, "registry", r)
}

// waitAnswer waits for the answer to a record produced to the jobs topic.
func waitAnswer(ctx context.Context, w interface {
	WaitStatus(context.Context, ...client.Receipt) ([]*sundialv1.JobStatus, error)
}, timeout time.Duration, who string, r client.Receipt,
) (*sundialv1.JobStatus, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sts, err := w.WaitStatus(wctx, r)
	if err != nil {
		if ctx.Err() != nil {
			return nil, connect.NewError(connect.CodeOf(ctx.Err()), ctx.Err())
		}
		return nil, connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf(
			"%s was produced to %s[%d]@%d but the %s did not answer within %v (it may still apply it): %w",
			r.ID, r.Topic, r.Partition, r.Offset, who, timeout, err))
	}
	return sts[0], nil
}

// rejected is the answer to a definition refused before it was produced,
// in the shape of the registry's own rejections.
func rejected(id string, errs []jobspec.FieldError) *sundialv1.JobStatus {
	st := &sundialv1.JobStatus{
		Subject: &sundialv1.JobStatus_JobId{JobId: id},
		Outcome: sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED,
	}
	for _, e := range errs {
		st.Errors = append(st.Errors, &sundialv1.FieldError{Field: e.Field, Reason: e.Reason})
	}
	return st
}

// ApplyJob implements apiv1connect.JobServiceHandler.
func (s *JobService) ApplyJob(ctx context.Context, req *connect.Request[apiv1.ApplyJobRequest]) (*connect.Response[apiv1.ApplyJobResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	spec := req.Msg.GetSpec()
	if doc := req.Msg.GetDocument(); doc != nil {
		if spec != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("document: give the definition as spec or as a document, not both"))
		}
		specs, problems, err := decodeDocument(doc)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		if len(problems) > 0 {
			st := rejected("", nil)
			st.Errors = problems
			return connect.NewResponse(&apiv1.ApplyJobResponse{Status: st}), nil
		}
		if len(specs) != 1 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("document: holds %d definitions; ApplyJob applies one", len(specs)))
		}
		spec = specs[0]
	}
	if spec == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("spec: required"))
	}
	if err := mayChange(p, spec.GetOwnerTeam(), "apply job "+spec.GetId()); err != nil {
		return nil, err
	}
	// A team must not take over another team's job by naming itself the
	// owner of the same id; such a job is not found, as everywhere.
	var (
		before    *sundialv1.JobSpec
		beforeRev int64
	)
	if spec.GetId() != "" {
		j, stored, found, err := s.lookupJob(ctx, spec.GetId())
		if err != nil {
			return nil, err
		}
		if found && !p.CanSee(stored.GetOwnerTeam()) {
			return nil, notVisible("job", spec.GetId())
		}
		before, beforeRev = stored, j.Revision
	}
	if err := checkExpectedRevision(req.Msg.ExpectedRevision, before != nil, beforeRev); err != nil {
		return nil, err
	}
	// A value the API showed as redacted keeps the stored one; the record
	// produced holds it, so the jobs topic stays the whole definition.
	if errs := jobspec.KeepRedacted(spec, before); len(errs) > 0 {
		return connect.NewResponse(&apiv1.ApplyJobResponse{Status: rejected(spec.GetId(), errs)}), nil
	}
	// The definition goes to its owner team's topic (client.Config.ByOwner),
	// the caller's or, for a cluster admin, the one it names.
	receipt, err := s.cfg.Writer.Apply(ctx, spec)
	if ve := (*jobspec.ValidationError)(nil); errors.As(err, &ve) {
		return connect.NewResponse(&apiv1.ApplyJobResponse{Status: rejected(spec.GetId(), ve.Errors)}), nil
	}
	if err != nil {
		return nil, produceError(fmt.Sprintf("apply job %q", spec.GetId()), err)
	}
	st, err := s.answer(ctx, receipt)
	if err != nil {
		return nil, err
	}
	s.record(ctx, p, receipt, st, before, beforeRev, spec)
	return connect.NewResponse(&apiv1.ApplyJobResponse{Accepted: st.GetAccepted(), Status: st}), nil
}

// checkExpectedRevision refuses an apply whose expected revision is not
// the one in force (inForce, when found; 0 means none is). Unset expects
// nothing. The check reads the store before the definition is produced:
// an apply that another one overtakes between that read and the
// registry's answer is not refused, so it narrows the window in which an
// edit overwrites another one but does not close it.
func checkExpectedRevision(expected *int64, found bool, inForce int64) error {
	if expected == nil {
		return nil
	}
	if !found {
		inForce = 0
	}
	if *expected == inForce {
		return nil
	}
	var why string
	switch {
	case inForce == 0:
		why = "no definition is in force (it was deleted, or never created)"
	case *expected == 0:
		why = fmt.Sprintf("a definition is in force, revision %d (it was created meanwhile)", inForce)
	default:
		why = fmt.Sprintf("the revision in force is %d: the definition changed since it was read", inForce)
	}
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("expected_revision %d: %s; read it again and reapply the edit", *expected, why))
}

// GetJob implements apiv1connect.JobServiceHandler.
func (s *JobService) GetJob(ctx context.Context, req *connect.Request[apiv1.GetJobRequest]) (*connect.Response[apiv1.GetJobResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := needID(req.Msg.GetId()); err != nil {
		return nil, err
	}
	j, spec, err := s.storedJob(ctx, p, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&apiv1.GetJobResponse{Job: jobOf(j, spec)}), nil
}

// ListJobs implements apiv1connect.JobServiceHandler.
func (s *JobService) ListJobs(ctx context.Context, req *connect.Request[apiv1.ListJobsRequest]) (*connect.Response[apiv1.ListJobsResponse], error) {
	jobs, next, err := s.list(ctx, req.Msg.GetFilter(), "", req.Msg.GetPage())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&apiv1.ListJobsResponse{Jobs: jobs, NextPageToken: next}), nil
}

// SearchJobs implements apiv1connect.JobServiceHandler.
func (s *JobService) SearchJobs(ctx context.Context, req *connect.Request[apiv1.SearchJobsRequest]) (*connect.Response[apiv1.SearchJobsResponse], error) {
	if req.Msg.GetText() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("text: required (use ListJobs to list without one)"))
	}
	jobs, next, err := s.list(ctx, req.Msg.GetFilter(), req.Msg.GetText(), req.Msg.GetPage())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&apiv1.SearchJobsResponse{Jobs: jobs, NextPageToken: next}), nil
}

// list reads store pages until the page is full, the listing ends or
// MaxScan definitions were read.
func (s *JobService) list(ctx context.Context, f *apiv1.DefinitionFilter, text string, page *apiv1.PageRequest) ([]*apiv1.Job, string, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, "", err
	}
	size, err := pageSize(page)
	if err != nil {
		return nil, "", err
	}
	fh := filterHash(f, text)
	after, err := decodeToken(page.GetToken(), fh)
	if err != nil {
		return nil, "", err
	}
	maxScan := cmp.Or(s.cfg.MaxScan, 20*size)
	var out []*apiv1.Job
	for scanned := 0; ; {
		sp, err := s.cfg.Store.ListJobs(ctx, after, min(size, maxScan-scanned))
		if err != nil {
			return nil, "", storeError("list jobs", err)
		}
		for _, j := range sp.Jobs {
			scanned++
			after = j.ID
			spec, ok := selectedSpec(p, f, text, j.Spec)
			if !ok {
				continue
			}
			out = append(out, jobOf(j, spec))
			if len(out) == size {
				return out, encodeToken(after, fh), nil
			}
		}
		if sp.Next == "" {
			return out, "", nil
		}
		after = sp.Next
		if scanned >= maxScan {
			return out, encodeToken(after, fh), nil
		}
	}
}

// DeleteJob implements apiv1connect.JobServiceHandler.
func (s *JobService) DeleteJob(ctx context.Context, req *connect.Request[apiv1.DeleteJobRequest]) (*connect.Response[apiv1.DeleteJobResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	id := req.Msg.GetId()
	if err := needID(id); err != nil {
		return nil, err
	}
	j, spec, err := s.storedJob(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if err := mayChange(p, spec.GetOwnerTeam(), "delete job "+id); err != nil {
		return nil, err
	}
	// The tombstone goes to the stored owner's topic: the registry takes
	// a delete only from the team that owns the job.
	receipt, err := s.cfg.Writer.Delete(client.WithTeam(ctx, spec.GetOwnerTeam()), id)
	if err != nil {
		return nil, produceError(fmt.Sprintf("delete job %q", id), err)
	}
	st, err := s.answer(ctx, receipt)
	if err != nil {
		return nil, err
	}
	s.record(ctx, p, receipt, st, spec, j.Revision, nil)
	return connect.NewResponse(&apiv1.DeleteJobResponse{Status: st}), nil
}

// GetJobView implements apiv1connect.JobServiceHandler.
func (s *JobService) GetJobView(ctx context.Context, req *connect.Request[apiv1.GetJobViewRequest]) (*connect.Response[apiv1.GetJobViewResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := needID(req.Msg.GetId()); err != nil {
		return nil, err
	}
	fires, err := bounded("next_fire_times", req.Msg.GetNextFireTimes(), defaultFireTimes, maxFireTimes)
	if err != nil {
		return nil, err
	}
	runs, err := bounded("last_runs", req.Msg.GetLastRuns(), defaultLastRuns, maxLastRuns)
	if err != nil {
		return nil, err
	}
	j, spec, err := s.storedJob(ctx, p, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	view, err := s.view(ctx, j, spec, fires, runs, true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(view), nil
}

// Limits of GetJobViews: one call does at most a page's worth of
// GetJobView calls, each of them lighter.
const (
	maxViews             = 100
	defaultViewFireTimes = 1
	maxViewFireTimes     = 10
	maxViewLastRuns      = 100
	// viewReaders bounds the store reads one GetJobViews call makes at
	// once.
	viewReaders = 8
)

// GetJobViews implements apiv1connect.JobServiceHandler.
func (s *JobService) GetJobViews(ctx context.Context, req *connect.Request[apiv1.GetJobViewsRequest]) (*connect.Response[apiv1.GetJobViewsResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	ids := req.Msg.GetIds()
	if err := checkViewIDs(ids); err != nil {
		return nil, err
	}
	fires, err := bounded("next_fire_times", req.Msg.GetNextFireTimes(), defaultViewFireTimes, maxViewFireTimes)
	if err != nil {
		return nil, err
	}
	runs, err := bounded("last_runs", req.Msg.GetLastRuns(), defaultLastRuns, maxViewLastRuns)
	if err != nil {
		return nil, err
	}
	views := make([]*apiv1.GetJobViewResponse, len(ids)) // nil: not found, or not the caller's to see
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(viewReaders)
	for i, id := range ids {
		g.Go(func() error {
			j, spec, found, err := s.lookupJob(gctx, id)
			if err != nil || !found || !p.CanSee(spec.GetOwnerTeam()) {
				return err
			}
			views[i], err = s.view(gctx, j, spec, fires, runs, req.Msg.GetWithRuns())
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := &apiv1.GetJobViewsResponse{}
	for i, v := range views {
		if v == nil {
			out.NotFound = append(out.NotFound, ids[i])
			continue
		}
		out.Views = append(out.Views, v)
	}
	return connect.NewResponse(out), nil
}

// checkViewIDs checks GetJobViews' ids: 1 to maxViews, none empty, each
// once.
func checkViewIDs(ids []string) error {
	if len(ids) == 0 {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("ids: required"))
	}
	if len(ids) > maxViews {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("ids: %d ids, at most %d", len(ids), maxViews))
	}
	seen := make(map[string]int, len(ids))
	for i, id := range ids {
		if id == "" {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("ids[%d]: required", i))
		}
		if first, ok := seen[id]; ok {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("ids[%d] %q: already ids[%d]", i, id, first))
		}
		seen[id] = i
	}
	return nil
}

// view is what a job's page shows of a stored job the caller may see: its
// next fires times and the stats of its last runs attempts, which it holds
// too withRuns.
func (s *JobService) view(ctx context.Context, j store.Job, spec *sundialv1.JobSpec, fires, runs int, withRuns bool) (*apiv1.GetJobViewResponse, error) {
	view := &apiv1.GetJobViewResponse{Job: jobOf(j, spec)}
	if sch := spec.GetSchedule(); sch != nil && !spec.GetPaused() {
		// The registry accepted this schedule; one that no longer compiles
		// (a time zone gone from the database) simply shows no fire time.
		if compiled, errs := jobspec.CompileSchedule(sch, j.UpdatedAt); len(errs) == 0 {
			times, err := schedule.PreviewContext(ctx, compiled, s.cfg.Now(), fires)
			if err != nil {
				return nil, connect.NewError(connect.CodeOf(err), fmt.Errorf("next fire times of job %q: %w", j.ID, err))
			}
			for _, t := range times {
				view.NextFireTimes = append(view.NextFireTimes, timestamppb.New(t))
			}
		}
	}
	recs, err := s.cfg.Store.ListRuns(ctx, j.ID, runs)
	if err != nil {
		return nil, storeError("read run history", err)
	}
	if withRuns {
		for _, r := range recs {
			view.LastRuns = append(view.LastRuns, attemptOf(r))
		}
	}
	view.Stats = statsOf(recs)
	return view, nil
}

// bounded reads an optional count: 0 is def, more than limit is refused.
func bounded(field string, n uint32, def, limit int) (int, error) {
	if n == 0 {
		return def, nil
	}
	if int64(n) > int64(limit) {
		return 0, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s %d: must be at most %d", field, n, limit))
	}
	return int(n), nil
}

func timestampOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func attemptOf(r store.RunRecord) *apiv1.RunAttempt {
	a := &apiv1.RunAttempt{
		RunId:          r.RunID,
		Attempt:        uint32(max(r.Attempt, 0)), //nolint:gosec // attempts count from 1
		DueTime:        timestampOrNil(r.Due),
		AttemptDueTime: timestampOrNil(r.AttemptDue),
		State:          string(r.State),
		StartedAt:      timestampOrNil(r.Started),
		FinishedAt:     timestampOrNil(r.Finished),
		Error:          r.Error,
	}
	if r.Duration > 0 {
		a.Duration = durationpb.New(r.Duration)
	}
	return a
}

// statsOf summarises attempts: the success rate over the finished ones and
// the trigger latency (start minus the attempt's due time) over the started
// ones, by nearest rank.
func statsOf(recs []store.RunRecord) *apiv1.RunStats {
	st := &apiv1.RunStats{}
	var lat []time.Duration
	for _, r := range recs {
		switch r.State {
		case store.StateSucceeded:
			st.Finished++
			st.Succeeded++
		case store.StateFailed:
			st.Finished++
		}
		if !r.Started.IsZero() {
			due := cmp.Or(r.AttemptDue, r.Due)
			lat = append(lat, max(r.Started.Sub(due), 0))
		}
	}
	if st.Finished > 0 {
		st.SuccessRate = float64(st.Succeeded) / float64(st.Finished)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		st.TriggerLatencyP50 = durationpb.New(percentile(lat, 50))
		st.TriggerLatencyP90 = durationpb.New(percentile(lat, 90))
		st.TriggerLatencyP99 = durationpb.New(percentile(lat, 99))
	}
	return st
}

// percentile is the nearest-rank q-th percentile of sorted.
func percentile(sorted []time.Duration, q int) time.Duration {
	rank := (q*len(sorted) + 99) / 100 // ceil(q/100 * n)
	return sorted[max(rank, 1)-1]
}

// record writes the audit record of a change the registry answered, when
// it changed something. Its ID is the definition's Kafka record, prefixed
// "api:", so that it sits beside the registry's record of the same change
// and a retried call rewrites it rather than adding one.
func (s *JobService) record(ctx context.Context, p auth.Principal, r client.Receipt, st *sundialv1.JobStatus, before *sundialv1.JobSpec, beforeRev int64, after *sundialv1.JobSpec) {
	if s.cfg.Audit == nil {
		return
	}
	var action string
	switch st.GetOutcome() {
	case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED:
		action = audit.ActionJobCreated
	case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED:
		action = audit.ActionJobUpdated
	case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED:
		action = audit.ActionJobDeleted
	default:
		return
	}
	team := after.GetOwnerTeam()
	if after == nil {
		team = before.GetOwnerTeam()
	}
	rec := audit.Record{
		ID:      fmt.Sprintf("api:%s/%d/%020d", r.Topic, r.Partition, r.Offset),
		At:      r.Timestamp,
		Actor:   p.Subject,
		Action:  action,
		Subject: r.ID,
		Team:    team, RevisionBefore: beforeRev, RevisionAfter: r.Revision,
		Changes: audit.Diff(before, after),
		Detail:  "through the API",
	}
	if action == audit.ActionJobCreated {
		rec.RevisionBefore = 0
	}
	if rec.Actor == "" {
		rec.Actor = "api:" + p.Team
	}
	if err := s.cfg.Audit.Record(ctx, rec); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "audit record not written", "action", action, "job", r.ID, "err", err)
	}
}
