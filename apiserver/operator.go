package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/jobspec"
	"github.com/sundialhq/sundial/operator"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// Operator carries out the operator actions (*operator.Operator).
type Operator interface {
	Pause(ctx context.Context, jobID string) (operator.PauseResult, error)
	Resume(ctx context.Context, jobID string) (operator.PauseResult, error)
	Trigger(ctx context.Context, jobID string, opts operator.TriggerOptions) (operator.TriggerResult, error)
	Backfill(ctx context.Context, jobID string, opts operator.BackfillOptions) (operator.BackfillResult, error)
	PlanApply(ctx context.Context, specs []*sundialv1.JobSpec, fires int) ([]operator.DefinitionPlan, error)
	Cancel(ctx context.Context, jobID, runID string, opts operator.CancelOptions) (operator.CancelResult, error)
	Retry(ctx context.Context, runID string) (operator.RetryResult, error)
}

// Limits of OperatorService.
const (
	defaultWait       = time.Minute
	maxWait           = 10 * time.Minute
	defaultPlanFires  = 5
	maxPlanFires      = 100
	maxPlanJobs       = 500
	maxListedBackfill = 100
)

// OperatorServiceConfig configures an OperatorService.
type OperatorServiceConfig struct {
	// Operator acts. Its Config.Audit should be an operator.AuditTrail, so
	// that every action is recorded with the caller as actor. Required.
	Operator Operator
	// Jobs reads definitions, to find a job's owning team. Required.
	Jobs JobReader
	// Lister lists definitions, for BulkJobs' selection; without it
	// BulkJobs answers Unimplemented.
	Lister store.JobLister
	// Logger; nil discards.
	Logger *slog.Logger
}

// Validate reports every bad field.
func (c OperatorServiceConfig) Validate() error {
	var errs []error
	if c.Operator == nil {
		errs = append(errs, errors.New("operator service config: operator: required"))
	}
	if c.Jobs == nil {
		errs = append(errs, errors.New("operator service config: jobs: required"))
	}
	return errors.Join(errs...)
}

// OperatorService implements apiv1connect.OperatorServiceHandler. Every
// call needs RoleOperator in the owning team of the job acted on; another
// team's job is NotFound (visibility.go).
type OperatorService struct {
	cfg OperatorServiceConfig
}

var _ apiv1connect.OperatorServiceHandler = (*OperatorService)(nil)

// NewOperatorService checks cfg.
func NewOperatorService(cfg OperatorServiceConfig) (*OperatorService, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = deps.Logger(cfg.Logger)
	return &OperatorService{cfg: cfg}, nil
}

// Service mounts the operator service on a Server.
func (s *OperatorService) Service() Service {
	return ConnectService(apiv1connect.NewOperatorServiceHandler, apiv1connect.OperatorServiceHandler(s))
}

// mayOperate checks that the caller may act on jobID: the job must exist
// and be visible (else NotFound), and the caller must hold RoleOperator in
// its team (else PermissionDenied).
func (s *OperatorService) mayOperate(ctx context.Context, what, jobID string) (auth.Principal, error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return p, err
	}
	if jobID == "" {
		return p, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: job_id: required", what))
	}
	spec, job, found, err := jobSpec(ctx, s.cfg.Jobs, jobID)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, what+": read job", "job", jobID, "err", err)
		return p, internalError(what)
	}
	if !found || job.Deleted || !p.CanSee(spec.GetOwnerTeam()) {
		return p, notVisible("job", jobID)
	}
	if !p.Allows(spec.GetOwnerTeam(), auth.RoleOperator) {
		return p, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s: needs the operator role in team %q; the caller is %s", what, spec.GetOwnerTeam(), p.Role))
	}
	return p, nil
}

// actionError maps an operator error to an answer.
func (s *OperatorService) actionError(ctx context.Context, what string, err error) error {
	switch {
	case errors.Is(err, operator.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, operator.ErrNotRunning), errors.Is(err, operator.ErrRejected), errors.Is(err, client.ErrNoTeamTopic),
		errors.Is(err, operator.ErrNotRetryable):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, operator.ErrRangeTooLarge):
		// It can never succeed: the caller must ask for less.
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeOf(err), fmt.Errorf("%s: %w", what, err))
	}
	s.cfg.Logger.ErrorContext(ctx, what, "err", err)
	return internalError(what)
}

// waitTimeout checks a request's wait_timeout: nil is defaultWait.
func waitTimeout(d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return defaultWait, nil
	}
	w := d.AsDuration()
	if w <= 0 || w > maxWait {
		return 0, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("wait_timeout %s: must be positive and at most %s", w, maxWait))
	}
	return w, nil
}

// waitContext checks a request's wait_timeout (waitTimeout) and, when the
// request waits, bounds ctx by it; cancel is never nil, and w is the
// timeout checked. A request that does not wait still has its
// wait_timeout checked.
func waitContext(ctx context.Context, wait bool, d *durationpb.Duration) (_ context.Context, cancel context.CancelFunc, w time.Duration, err error) {
	if w, err = waitTimeout(d); err != nil {
		return ctx, func() {}, 0, err
	}
	if !wait {
		return ctx, func() {}, w, nil
	}
	ctx, cancel = context.WithTimeout(ctx, w)
	return ctx, cancel, w, nil
}

// PauseJob implements apiv1connect.OperatorServiceHandler.
func (s *OperatorService) PauseJob(ctx context.Context, req *connect.Request[apiv1.PauseJobRequest]) (*connect.Response[apiv1.PauseJobResponse], error) {
	if _, err := s.mayOperate(ctx, "pause job", req.Msg.GetJobId()); err != nil {
		return nil, err
	}
	res, err := s.cfg.Operator.Pause(ctx, req.Msg.GetJobId())
	if err != nil {
		return nil, s.actionError(ctx, "pause job", err)
	}
	return connect.NewResponse(&apiv1.PauseJobResponse{Changed: res.Changed, Status: res.Status}), nil
}

// ResumeJob implements apiv1connect.OperatorServiceHandler.
func (s *OperatorService) ResumeJob(ctx context.Context, req *connect.Request[apiv1.ResumeJobRequest]) (*connect.Response[apiv1.ResumeJobResponse], error) {
	if _, err := s.mayOperate(ctx, "resume job", req.Msg.GetJobId()); err != nil {
		return nil, err
	}
	res, err := s.cfg.Operator.Resume(ctx, req.Msg.GetJobId())
	if err != nil {
		return nil, s.actionError(ctx, "resume job", err)
	}
	return connect.NewResponse(&apiv1.ResumeJobResponse{Changed: res.Changed, Status: res.Status}), nil
}

// TriggerJob implements apiv1connect.OperatorServiceHandler. With wait,
// a run that has not ended within wait_timeout is answered
// DeadlineExceeded naming the run, which goes on.
func (s *OperatorService) TriggerJob(ctx context.Context, req *connect.Request[apiv1.TriggerJobRequest]) (*connect.Response[apiv1.TriggerJobResponse], error) {
	m := req.Msg
	p, err := s.mayOperate(ctx, "trigger job", m.GetJobId())
	if err != nil {
		return nil, err
	}
	ctx, cancel, wait, err := waitContext(ctx, m.GetWait(), m.GetWaitTimeout())
	if err != nil {
		return nil, err
	}
	defer cancel()
	res, err := s.cfg.Operator.Trigger(ctx, m.GetJobId(), operator.TriggerOptions{
		IdempotencyKey: m.GetIdempotencyKey(), Payload: m.GetPayload(), Wait: m.GetWait(), Caller: p.Subject,
	})
	if err != nil {
		if res.RunID != "" && errors.Is(err, context.DeadlineExceeded) {
			return nil, connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("trigger job %q: run %s had not ended after %s; it goes on", m.GetJobId(), res.RunID, wait))
		}
		return nil, s.actionError(ctx, "trigger job", err)
	}
	return connect.NewResponse(&apiv1.TriggerJobResponse{RunId: res.RunID, Event: res.Event}), nil
}

// BackfillJob implements apiv1connect.OperatorServiceHandler. Without
// dry_run it answers once every enqueued run has ended, so a long range
// needs a client deadline to match.
func (s *OperatorService) BackfillJob(ctx context.Context, req *connect.Request[apiv1.BackfillJobRequest]) (*connect.Response[apiv1.BackfillJobResponse], error) {
	m := req.Msg
	if _, err := s.mayOperate(ctx, "backfill job", m.GetJobId()); err != nil {
		return nil, err
	}
	opts := operator.BackfillOptions{MaxConcurrent: int(m.GetMaxConcurrent()), DryRun: m.GetDryRun()}
	if m.From != nil {
		opts.From = m.GetFrom().AsTime()
	}
	if m.To != nil {
		opts.To = m.GetTo().AsTime()
	}
	switch m.GetPolicy() {
	case apiv1.BackfillPolicy_BACKFILL_POLICY_UNSPECIFIED, apiv1.BackfillPolicy_BACKFILL_POLICY_EVERY:
		opts.Policy = operator.BackfillEvery
	case apiv1.BackfillPolicy_BACKFILL_POLICY_ONE_PER_WINDOW:
		opts.Policy = operator.BackfillOnePerWindow
		opts.Window = m.GetWindow().AsDuration()
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("policy %d: unknown", m.GetPolicy()))
	}
	if err := opts.Validate(); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("backfill job %q: %w", m.GetJobId(), err))
	}
	res, err := s.cfg.Operator.Backfill(ctx, m.GetJobId(), opts)
	if err != nil {
		return nil, s.actionError(ctx, "backfill job", err)
	}
	out := &apiv1.BackfillJobResponse{
		OccurrenceCount: uint32(len(res.Occurrences)),
		AlreadyDone:     uint32(res.AlreadyDone),
		Enqueued:        uint32(res.Enqueued),
	}
	for _, t := range res.Occurrences[:min(len(res.Occurrences), maxListedBackfill)] {
		out.Occurrences = append(out.Occurrences, timestamppb.New(t))
	}
	if len(res.Finished) > 0 {
		out.Finished = map[string]uint32{}
		for state, n := range res.Finished {
			out.Finished[state.String()] = uint32(n)
		}
	}
	return connect.NewResponse(out), nil
}

// PlanApply implements apiv1connect.OperatorServiceHandler. Each
// definition must name an owner_team the caller may operate in; a
// definition whose id is another team's job is NotFound, as an apply
// would be.
func (s *OperatorService) PlanApply(ctx context.Context, req *connect.Request[apiv1.PlanApplyRequest]) (*connect.Response[apiv1.PlanApplyResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	jobs, fromDocument := m.GetJobs(), m.GetDocument() != nil
	// which names a definition in errors: by its place in jobs, or in the
	// document.
	which := func(i int) string { return fmt.Sprintf("jobs[%d]", i) }
	if fromDocument {
		if len(jobs) > 0 {
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("document: give the definitions as jobs or as a document, not both"))
		}
		specs, problems, err := decodeDocument(m.GetDocument())
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		if len(problems) > 0 {
			return connect.NewResponse(&apiv1.PlanApplyResponse{Plans: []*apiv1.DefinitionPlan{{Errors: problems}}}), nil
		}
		jobs = specs
		which = func(i int) string { return fmt.Sprintf("document: definition %d", i+1) }
	}
	switch {
	case len(jobs) == 0:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("jobs: at least one definition is required"))
	case len(jobs) > maxPlanJobs:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("jobs: %d definitions, at most %d", len(jobs), maxPlanJobs))
	case m.GetNextFires() > maxPlanFires:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("next_fires %d: at most %d", m.GetNextFires(), maxPlanFires))
	}
	for i, spec := range jobs {
		team := spec.GetOwnerTeam()
		if team == "" {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s.owner_team: required", which(i)))
		}
		var before *sundialv1.JobSpec
		if spec.GetId() != "" {
			stored, job, found, err := jobSpec(ctx, s.cfg.Jobs, spec.GetId())
			if err != nil {
				s.cfg.Logger.ErrorContext(ctx, "plan apply: read job", "job", spec.GetId(), "err", err)
				return nil, internalError("plan apply")
			}
			if found && !job.Deleted && !p.CanSee(stored.GetOwnerTeam()) {
				return nil, notVisible("job", spec.GetId())
			}
			if found && !job.Deleted {
				before = stored
			}
		}
		if !p.Allows(team, auth.RoleOperator) {
			return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("plan apply: %s: needs the operator role in team %q; the caller is %s of team %q", which(i), team, p.Role, p.Team))
		}
		// A plan reads "<redacted>" as ApplyJob does: the stored value.
		if errs := jobspec.KeepRedacted(spec, before); len(errs) > 0 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s.%w", which(i), errs[0]))
		}
	}
	fires := defaultPlanFires
	if m.GetNextFires() > 0 {
		fires = int(m.GetNextFires())
	}
	plans, err := s.cfg.Operator.PlanApply(ctx, jobs, fires)
	if err != nil {
		return nil, s.actionError(ctx, "plan apply", err)
	}
	out := &apiv1.PlanApplyResponse{}
	for i, pl := range plans {
		dp := &apiv1.DefinitionPlan{JobId: pl.JobID, Created: pl.Created, Shard: uint32(pl.Shard)}
		if fromDocument && i < len(jobs) {
			dp.Spec = jobs[i]
		}
		for _, e := range pl.Errors {
			dp.Errors = append(dp.Errors, &sundialv1.FieldError{Field: e.Field, Reason: e.Reason})
		}
		dp.Changes = fieldChanges(pl.Changes)
		for _, t := range pl.NextFires {
			dp.NextFires = append(dp.NextFires, timestamppb.New(t))
		}
		for _, b := range sortedBuckets(pl.Load) {
			dp.Load = append(dp.Load, &apiv1.BucketLoad{Bucket: timestamppb.New(b), Delta: int32(pl.Load[b])})
		}
		out.Plans = append(out.Plans, dp)
	}
	return connect.NewResponse(out), nil
}

// mayOperateRun checks runID and that the caller operates its job, and
// returns the job's id. A run of another team's job is not found, as one
// that does not exist.
func (s *OperatorService) mayOperateRun(ctx context.Context, action, runID string) (string, error) {
	if runID == "" {
		return "", connect.NewError(connect.CodeInvalidArgument, errors.New("run_id: required"))
	}
	jobID := operator.JobOfRun(runID)
	if jobID == "" {
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("run_id %q: not a job's run id (job id + \"@\" + due ms)", runID))
	}
	if _, err := s.mayOperate(ctx, action, jobID); err != nil {
		if connect.CodeOf(err) == connect.CodeNotFound {
			return "", notVisible("run", runID)
		}
		return "", err
	}
	return jobID, nil
}

// CancelRun implements apiv1connect.OperatorServiceHandler. A run that is
// not running is answered FailedPrecondition.
func (s *OperatorService) CancelRun(ctx context.Context, req *connect.Request[apiv1.CancelRunRequest]) (*connect.Response[apiv1.CancelRunResponse], error) {
	m := req.Msg
	jobID, err := s.mayOperateRun(ctx, "cancel run", m.GetRunId())
	if err != nil {
		return nil, err
	}
	ctx, cancel, _, err := waitContext(ctx, m.GetWait(), m.GetWaitTimeout())
	if err != nil {
		return nil, err
	}
	defer cancel()
	res, err := s.cfg.Operator.Cancel(ctx, jobID, m.GetRunId(), operator.CancelOptions{Wait: m.GetWait()})
	if err != nil {
		return nil, s.actionError(ctx, "cancel run", err)
	}
	return connect.NewResponse(&apiv1.CancelRunResponse{Event: res.Event}), nil
}

// RetryRun implements apiv1connect.OperatorServiceHandler: operator.Retry,
// for a run of a job the caller operates. A run of another team's job is
// not found; a run that is not failed, timed out or cancelled is
// FailedPrecondition, naming its state.
func (s *OperatorService) RetryRun(ctx context.Context, req *connect.Request[apiv1.RetryRunRequest]) (*connect.Response[apiv1.RetryRunResponse], error) {
	m := req.Msg
	_, err := s.mayOperateRun(ctx, "retry run", m.GetRunId())
	if err != nil {
		return nil, err
	}
	res, err := s.cfg.Operator.Retry(ctx, m.GetRunId())
	if errors.Is(err, operator.ErrNotFound) {
		return nil, notVisible("run", m.GetRunId())
	}
	if err != nil {
		return nil, s.actionError(ctx, "retry run", err)
	}
	return connect.NewResponse(&apiv1.RetryRunResponse{JobId: res.JobID, Attempt: uint32(res.Attempt)}), nil
}
