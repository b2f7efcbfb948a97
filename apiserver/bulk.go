package apiserver

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/operator"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
)

// Limits of BulkJobs.
const (
	// MaxBulkJobs is the most jobs one BulkJobs call selects; a larger
	// selection is refused and the caller narrows it.
	MaxBulkJobs = 1000
	// MaxBulkScan is the most definitions one BulkJobs call reads to find
	// its selection; past it the call is refused rather than unbounded.
	MaxBulkScan = 200_000
	// bulkScanPage is how many definitions BulkJobs reads per store call.
	bulkScanPage = 1000
)

// bulkMatch is one selected job.
type bulkMatch struct {
	id, team string
	paused   bool
}

// bulkApplies is the pure decision of whether an action touches a job
// the caller may see: it names why not when it does not.
func bulkApplies(p auth.Principal, action apiv1.BulkAction, m bulkMatch) (bool, string) {
	if !p.Allows(m.team, auth.RoleOperator) {
		return false, fmt.Sprintf("needs the operator role in team %q", m.team)
	}
	switch action {
	case apiv1.BulkAction_BULK_ACTION_PAUSE:
		if m.paused {
			return false, "already paused"
		}
	case apiv1.BulkAction_BULK_ACTION_RESUME:
		if !m.paused {
			return false, "not paused"
		}
	}
	return true, ""
}

// checkBulk reports every bad field of a BulkJobs request.
func checkBulk(m *apiv1.BulkJobsRequest) error {
	var errs []error
	switch m.GetAction() {
	case apiv1.BulkAction_BULK_ACTION_PAUSE, apiv1.BulkAction_BULK_ACTION_RESUME, apiv1.BulkAction_BULK_ACTION_TRIGGER:
	default:
		errs = append(errs, fmt.Errorf("action %v: must be pause, resume or trigger", m.GetAction()))
	}
	f := m.GetFilter()
	if m.GetText() == "" && f.GetTeam() == "" && len(f.GetLabels()) == 0 &&
		f.GetState() == apiv1.DefinitionState_DEFINITION_STATE_UNSPECIFIED && f.GetScheduleKind() == apiv1.ScheduleKind_SCHEDULE_KIND_UNSPECIFIED {
		errs = append(errs, errors.New("filter, text: at least one is required (a bulk action never selects every job by default)"))
	}
	return errors.Join(errs...)
}

// selectBulk reads the jobs that f and text select for p, in the
// listing's order, refusing more than MaxBulkJobs matches or more than
// MaxBulkScan definitions read.
func (s *OperatorService) selectBulk(ctx context.Context, p auth.Principal, f *apiv1.DefinitionFilter, text string) ([]bulkMatch, error) {
	var (
		out     []bulkMatch
		after   string
		scanned int
	)
	for {
		page, err := s.cfg.Lister.ListJobs(ctx, after, bulkScanPage)
		if err != nil {
			return nil, storeError("list jobs", err)
		}
		for _, j := range page.Jobs {
			scanned++
			spec, ok := selectedSpec(p, f, text, j.Spec)
			if !ok {
				continue
			}
			out = append(out, bulkMatch{id: j.ID, team: spec.GetOwnerTeam(), paused: spec.GetPaused()})
			if len(out) > MaxBulkJobs {
				return nil, connect.NewError(connect.CodeInvalidArgument,
					fmt.Errorf("filter, text: more than %d jobs match; narrow the selection", MaxBulkJobs))
			}
		}
		if page.Next == "" {
			return out, nil
		}
		if scanned >= MaxBulkScan {
			return nil, connect.NewError(connect.CodeInvalidArgument,
				fmt.Errorf("filter, text: more than %d definitions to read to find the selection; narrow it by team", MaxBulkScan))
		}
		after = page.Next
	}
}

// BulkJobs implements apiv1connect.OperatorServiceHandler: the same
// selection answers the dry run and the action, each job is acted on as
// its own call would (mayOperate, then the operator, which audits it).
func (s *OperatorService) BulkJobs(ctx context.Context, req *connect.Request[apiv1.BulkJobsRequest]) (*connect.Response[apiv1.BulkJobsResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if err := checkBulk(m); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if s.cfg.Lister == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("bulk jobs: this server lists no jobs"))
	}
	matches, err := s.selectBulk(ctx, p, m.GetFilter(), m.GetText())
	if err != nil {
		return nil, err
	}
	resp := &apiv1.BulkJobsResponse{Jobs: make([]*apiv1.BulkJobOutcome, len(matches))}
	for i, j := range matches {
		touched, skipped := bulkApplies(p, m.GetAction(), j)
		resp.Jobs[i] = &apiv1.BulkJobOutcome{JobId: j.id, OwnerTeam: j.team, State: stateOf(j.paused), Touched: touched, Skipped: skipped}
		if touched {
			resp.Touched++
		}
	}
	if m.GetDryRun() {
		return connect.NewResponse(resp), nil
	}
	if resp.Touched != m.GetExpectedCount() {
		return nil, connect.NewError(connect.CodeFailedPrecondition,
			fmt.Errorf("expected_count %d: the selection now touches %d jobs; preview it again", m.GetExpectedCount(), resp.Touched))
	}
	for _, o := range resp.Jobs {
		if !o.GetTouched() {
			continue
		}
		runID, err := s.bulkOne(ctx, p, m.GetAction(), o.GetJobId())
		o.RunId = runID
		if err != nil {
			o.Error = err.Error()
			resp.Failed++
		}
	}
	return connect.NewResponse(resp), nil
}

// bulkOne acts on one job as its own call would.
func (s *OperatorService) bulkOne(ctx context.Context, p auth.Principal, action apiv1.BulkAction, jobID string) (string, error) {
	switch action {
	case apiv1.BulkAction_BULK_ACTION_PAUSE:
		if _, err := s.mayOperate(ctx, "pause job", jobID); err != nil {
			return "", err
		}
		_, err := s.cfg.Operator.Pause(ctx, jobID)
		return "", s.bulkError(ctx, "pause job", err)
	case apiv1.BulkAction_BULK_ACTION_RESUME:
		if _, err := s.mayOperate(ctx, "resume job", jobID); err != nil {
			return "", err
		}
		_, err := s.cfg.Operator.Resume(ctx, jobID)
		return "", s.bulkError(ctx, "resume job", err)
	default:
		if _, err := s.mayOperate(ctx, "trigger job", jobID); err != nil {
			return "", err
		}
		res, err := s.cfg.Operator.Trigger(ctx, jobID, operator.TriggerOptions{Caller: p.Subject})
		return res.RunID, s.bulkError(ctx, "trigger job", err)
	}
}

// bulkError is actionError, or nil.
func (s *OperatorService) bulkError(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	return s.actionError(ctx, what, err)
}
