package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/jobspec"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// DagStore is what DagService reads.
type DagStore interface {
	GetDag(ctx context.Context, id string) (store.Dag, error)
	ListDags(ctx context.Context) ([]store.Dag, error)
}

// DagWriter produces DAG definitions and tombstones to the jobs topic and
// waits for the DAG engine's answers; KafkaDagWriter is one.
type DagWriter interface {
	ApplyDag(ctx context.Context, spec *sundialv1.DagSpec) (client.Receipt, error)
	DeleteDag(ctx context.Context, id string) (client.Receipt, error)
	WaitStatus(ctx context.Context, receipts ...client.Receipt) ([]*sundialv1.JobStatus, error)
}

// KafkaDagWriter produces DAG records through the client, which frames
// them (client.Client.ApplyDag), after checking them with the DAG engine's
// rules.
type KafkaDagWriter struct {
	// Client produces the records and reads the answers.
	Client *client.Client
}

// ApplyDag validates spec with the engine's rules and produces it; an
// invalid spec is not produced and the error is a *dag.ValidationError.
func (w KafkaDagWriter) ApplyDag(ctx context.Context, spec *sundialv1.DagSpec) (client.Receipt, error) {
	if _, errs := dag.Compile(spec, dag.Options{}); len(errs) > 0 {
		return client.Receipt{}, &dag.ValidationError{DagID: spec.GetId(), Errors: errs}
	}
	return w.Client.ApplyDag(ctx, spec)
}

// DeleteDag produces the DAG's tombstone, to the topic of the team
// client.WithTeam put in ctx (the stored owner).
func (w KafkaDagWriter) DeleteDag(ctx context.Context, id string) (client.Receipt, error) {
	return w.Client.DeleteDag(ctx, id)
}

// WaitStatus waits for the engine's answers.
func (w KafkaDagWriter) WaitStatus(ctx context.Context, receipts ...client.Receipt) ([]*sundialv1.JobStatus, error) {
	return w.Client.WaitStatus(ctx, receipts...)
}

// DagServiceConfig configures a DagService.
type DagServiceConfig struct {
	// Store reads DAG definitions. Required.
	Store DagStore
	// Writer produces changes and reads the engine's answers. Required.
	Writer DagWriter
	// AnswerTimeout bounds the wait for the DAG engine's answer. Default
	// 30 s.
	AnswerTimeout time.Duration
	// Runs resumes DAG runs (dagengine.Runs, the code `sundial dag resume`
	// calls); without it ResumeDagRun answers Unimplemented.
	Runs DagRunResumer
	// Audit records every resume; nil records none.
	Audit audit.Recorder
	// Now is the clock of plans' next fire times and audit records.
	// Default time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
}

// Validate reports every bad field.
func (c DagServiceConfig) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("dag service config: store: required"))
	}
	if c.Writer == nil {
		errs = append(errs, errors.New("dag service config: writer: required"))
	}
	if c.AnswerTimeout < 0 {
		errs = append(errs, fmt.Errorf("dag service config: answer timeout %v: must not be negative", c.AnswerTimeout))
	}
	return errors.Join(errs...)
}

// DagService implements apiv1connect.DagServiceHandler.
type DagService struct {
	cfg DagServiceConfig
}

var _ apiv1connect.DagServiceHandler = (*DagService)(nil)

// NewDagService checks cfg and fills its defaults.
func NewDagService(cfg DagServiceConfig) (*DagService, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.AnswerTimeout = cmp.Or(cfg.AnswerTimeout, 30*time.Second)
	cfg.Now = deps.Clock(cfg.Now)
	cfg.Logger = deps.Logger(cfg.Logger)
	return &DagService{cfg: cfg}, nil
}

// Service mounts the DAG service on a Server.
func (s *DagService) Service() Service {
	return ConnectService(apiv1connect.NewDagServiceHandler, apiv1connect.DagServiceHandler(s))
}

// decodeDag decodes a stored DAG definition.
func decodeDag(d store.Dag) (*sundialv1.DagSpec, error) {
	spec := &sundialv1.DagSpec{}
	if err := sundialv1.Unmarshal(sundialv1.ContentTypeProtobuf, d.Spec, spec); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("DAG %q: the stored definition does not decode: %w", d.ID, err))
	}
	return spec, nil
}

// lookupDag reads a live DAG definition, whoever owns it.
func (s *DagService) lookupDag(ctx context.Context, id string) (store.Dag, *sundialv1.DagSpec, bool, error) {
	d, err := s.cfg.Store.GetDag(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && d.Deleted) {
		return store.Dag{}, nil, false, nil
	}
	if err != nil {
		return store.Dag{}, nil, false, storeError("read DAG", err)
	}
	spec, err := decodeDag(d)
	if err != nil {
		return store.Dag{}, nil, false, err
	}
	return d, spec, true, nil
}

// storedDag reads a DAG the caller may see, or answers NotFound.
func (s *DagService) storedDag(ctx context.Context, p auth.Principal, id string) (store.Dag, *sundialv1.DagSpec, error) {
	return visibleDefinition(ctx, p, "DAG", id, s.lookupDag)
}

// dagOf is the answer for a stored DAG, its inline jobs' secret values
// redacted in place (see jobOf).
func dagOf(d store.Dag, spec *sundialv1.DagSpec) *apiv1.Dag {
	jobspec.Redact(spec)
	return &apiv1.Dag{
		Spec:         spec,
		Revision:     d.Revision,
		UpdatedAt:    timestamppb.New(d.UpdatedAt),
		State:        stateOf(spec.GetPaused()),
		ScheduleKind: scheduleKindOf(spec.GetSchedule()),
	}
}

// dagInForce is the definition in force of DAG id and its revision, nil
// and 0 for none (or no id); another team's DAG is NotFound, so that a
// team cannot take over another team's DAG by naming itself the owner of
// the same id.
func (s *DagService) dagInForce(ctx context.Context, p auth.Principal, id string) (*sundialv1.DagSpec, int64, error) {
	if id == "" {
		return nil, 0, nil
	}
	d, stored, found, err := s.lookupDag(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	if !found {
		return nil, 0, nil
	}
	if !p.CanSee(stored.GetOwnerTeam()) {
		return nil, 0, notVisible("DAG", id)
	}
	return stored, d.Revision, nil
}

// dagRejected is the answer to a DAG definition refused before it was
// produced.
func dagRejected(id string, errs []dag.FieldError) *sundialv1.JobStatus {
	st := rejected(id, errs)
	st.Subject = &sundialv1.JobStatus_DagId{DagId: id}
	return st
}

// ApplyDag implements apiv1connect.DagServiceHandler.
func (s *DagService) ApplyDag(ctx context.Context, req *connect.Request[apiv1.ApplyDagRequest]) (*connect.Response[apiv1.ApplyDagResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	spec := req.Msg.GetSpec()
	if spec == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("spec: required"))
	}
	if err := mayChange(p, spec.GetOwnerTeam(), "apply DAG "+spec.GetId()); err != nil {
		return nil, err
	}
	before, beforeRev, err := s.dagInForce(ctx, p, spec.GetId())
	if err != nil {
		return nil, err
	}
	if err := checkExpectedRevision(req.Msg.ExpectedRevision, before != nil, beforeRev); err != nil {
		return nil, err
	}
	// As for jobs: a value shown redacted keeps the stored node's. The
	// checks are PlanDag's (dagProblems).
	if _, errs, err := s.dagProblems(ctx, spec, before); err != nil {
		return nil, err
	} else if len(errs) > 0 {
		return connect.NewResponse(&apiv1.ApplyDagResponse{Status: dagRejected(spec.GetId(), errs)}), nil
	}
	receipt, err := s.cfg.Writer.ApplyDag(ctx, spec)
	if ve := (*dag.ValidationError)(nil); errors.As(err, &ve) {
		return connect.NewResponse(&apiv1.ApplyDagResponse{Status: dagRejected(spec.GetId(), ve.Errors)}), nil
	}
	if err != nil {
		return nil, produceError(fmt.Sprintf("apply DAG %q", spec.GetId()), err)
	}
	st, err := waitAnswer(ctx, s.cfg.Writer, s.cfg.AnswerTimeout, "DAG engine", receipt)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&apiv1.ApplyDagResponse{Accepted: st.GetAccepted(), Status: st}), nil
}

// checkNodeJobs returns an error for each job_id node of spec whose job is
// not a live job of the DAG's team, when the DagStore is also a JobReader
// (the store of `sundial api` is). A missing
// job and another team's job get the same reason (dag.JobNotFound), so
// that the answer tells nothing of other teams' jobs. The DAG engine checks
// again when the node starts, against the job stored then. A spec that
// does not compile is left to the writer, which reports its errors.
func (s *DagService) checkNodeJobs(ctx context.Context, spec *sundialv1.DagSpec) ([]dag.FieldError, error) {
	jobs, ok := s.cfg.Store.(JobReader)
	if !ok {
		return nil, nil
	}
	if _, errs := dag.Compile(spec, dag.Options{}); len(errs) > 0 {
		return nil, nil
	}
	team := spec.GetOwnerTeam()
	owned := map[string]bool{}
	var errs []dag.FieldError
	for i, n := range spec.GetNodes() {
		id := n.GetJobId()
		if id == "" {
			continue
		}
		ok, seen := owned[id]
		if !seen {
			j, err := jobs.GetJob(ctx, id)
			switch {
			case errors.Is(err, store.ErrNotFound) || (err == nil && j.Deleted):
			case err != nil:
				return nil, storeError("read job", err)
			default:
				js := &sundialv1.JobSpec{}
				ok = sundialv1.Unmarshal(sundialv1.ContentTypeProtobuf, j.Spec, js) == nil && dag.MayRunJob(js.GetOwnerTeam(), team)
			}
			owned[id] = ok
		}
		if !ok {
			errs = append(errs, dag.FieldError{Field: fmt.Sprintf("nodes[%d].job_id", i),
				Reason: dag.JobNotFound(id, team) + ": a node runs a job of the DAG's team; apply the job first"})
		}
	}
	return errs, nil
}

// GetDag implements apiv1connect.DagServiceHandler.
func (s *DagService) GetDag(ctx context.Context, req *connect.Request[apiv1.GetDagRequest]) (*connect.Response[apiv1.GetDagResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := needID(req.Msg.GetId()); err != nil {
		return nil, err
	}
	d, spec, err := s.storedDag(ctx, p, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&apiv1.GetDagResponse{Dag: dagOf(d, spec)}), nil
}

// ListDags implements apiv1connect.DagServiceHandler. DAGs are few (one
// small row each), so the store returns them all, by id, and the page is
// cut here.
func (s *DagService) ListDags(ctx context.Context, req *connect.Request[apiv1.ListDagsRequest]) (*connect.Response[apiv1.ListDagsResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	size, err := pageSize(req.Msg.GetPage())
	if err != nil {
		return nil, err
	}
	f := req.Msg.GetFilter()
	fh := filterHash(f, "")
	after, err := decodeToken(req.Msg.GetPage().GetToken(), fh)
	if err != nil {
		return nil, err
	}
	all, err := s.cfg.Store.ListDags(ctx)
	if err != nil {
		return nil, storeError("list DAGs", err)
	}
	res := &apiv1.ListDagsResponse{}
	for _, d := range all {
		if d.ID <= after {
			continue
		}
		spec, err := decodeDag(d)
		if err != nil {
			continue // not this caller's to fix; GetDag reports it
		}
		if !selects(p, f, "", definition{
			id: spec.GetId(), team: spec.GetOwnerTeam(), labels: spec.GetLabels(),
			paused: spec.GetPaused(), schedule: spec.GetSchedule(), description: spec.GetDescription(),
		}) {
			continue
		}
		if len(res.Dags) == size {
			res.NextPageToken = encodeToken(res.Dags[size-1].GetSpec().GetId(), fh)
			break
		}
		res.Dags = append(res.Dags, dagOf(d, spec))
	}
	return connect.NewResponse(res), nil
}

// DeleteDag implements apiv1connect.DagServiceHandler.
func (s *DagService) DeleteDag(ctx context.Context, req *connect.Request[apiv1.DeleteDagRequest]) (*connect.Response[apiv1.DeleteDagResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	id := req.Msg.GetId()
	if err := needID(id); err != nil {
		return nil, err
	}
	_, spec, err := s.storedDag(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if err := mayChange(p, spec.GetOwnerTeam(), "delete DAG "+id); err != nil {
		return nil, err
	}
	receipt, err := s.cfg.Writer.DeleteDag(client.WithTeam(ctx, spec.GetOwnerTeam()), id)
	if err != nil {
		return nil, produceError(fmt.Sprintf("delete DAG %q", id), err)
	}
	st, err := waitAnswer(ctx, s.cfg.Writer, s.cfg.AnswerTimeout, "DAG engine", receipt)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&apiv1.DeleteDagResponse{Status: st}), nil
}

// DagRunLister reads and lists DAG runs as the DAG engine stores them; a
// DagStore that is one (the store of `sundial api` is) serves ListDagRuns
// and GetDagRun, and any other answers Unimplemented.
type DagRunLister interface {
	DagRunReader
	ListDagRuns(ctx context.Context, dagID string, limit int) ([]store.DagRun, error)
}

// maxDagRuns bounds ListDagRuns.
const maxDagRuns = 100

func (s *DagService) dagRuns() (DagRunLister, error) {
	r, ok := s.cfg.Store.(DagRunLister)
	if !ok {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this server's store does not keep DAG runs"))
	}
	return r, nil
}

// dagRunSummary is the listing's view of a stored DAG run.
func dagRunSummary(r store.DagRun) *apiv1.DagRunSummary {
	return &apiv1.DagRunSummary{
		DagRunId:  r.ID,
		DagId:     r.DagID,
		DueTime:   timeOrNil(r.Due),
		Status:    r.Status,
		Origin:    r.Origin,
		Summary:   r.Summary,
		Active:    r.Active,
		CreatedAt: timeOrNil(r.CreatedAt),
		UpdatedAt: timeOrNil(r.UpdatedAt),
	}
}

func timeOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// ListDagRuns implements apiv1connect.DagServiceHandler: the DAG's newest
// runs, for a caller who may see the DAG.
func (s *DagService) ListDagRuns(ctx context.Context, req *connect.Request[apiv1.ListDagRunsRequest]) (*connect.Response[apiv1.ListDagRunsResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	id := req.Msg.GetDagId()
	if err := needID(id); err != nil {
		return nil, err
	}
	limit := int(req.Msg.GetLimit())
	if limit < 0 || limit > maxDagRuns {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("limit %d: must be 0 to %d", limit, maxDagRuns))
	}
	limit = cmp.Or(limit, 20)
	runs, err := s.dagRuns()
	if err != nil {
		return nil, err
	}
	if _, _, err := s.storedDag(ctx, p, id); err != nil {
		return nil, err
	}
	rows, err := runs.ListDagRuns(ctx, id, limit)
	if err != nil {
		return nil, storeError("list DAG runs", err)
	}
	res := &apiv1.ListDagRunsResponse{}
	for _, r := range rows {
		res.DagRuns = append(res.DagRuns, dagRunSummary(r))
	}
	return connect.NewResponse(res), nil
}

// GetDagRun implements apiv1connect.DagServiceHandler: one DAG run with
// its nodes, for a caller who may see the team of the definition it
// follows; to anyone else it does not exist.
func (s *DagService) GetDagRun(ctx context.Context, req *connect.Request[apiv1.GetDagRunRequest]) (*connect.Response[apiv1.GetDagRunResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	r, err := s.visibleDagRun(ctx, p, req.Msg.GetDagRunId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&apiv1.GetDagRunResponse{DagRun: r.detail()}), nil
}

// storedDagRun is a DAG run as stored, decoded.
type storedDagRun struct {
	row   store.DagRun
	state dagrun.State
	// spec is the definition the run follows: the one a resume adopted,
	// else the one it was created with (as the DAG engine reads it).
	spec *sundialv1.DagSpec
	// team is the run's: the team of the definition it was created with,
	// as for the runs of its nodes (dagRunSpec).
	team string
}

// visibleDagRun reads DAG run id for p: NotFound when there is none or p
// may not see its team.
func (s *DagService) visibleDagRun(ctx context.Context, p auth.Principal, id string) (storedDagRun, error) {
	if err := needID(id); err != nil {
		return storedDagRun{}, err
	}
	runs, err := s.dagRuns()
	if err != nil {
		return storedDagRun{}, err
	}
	row, err := runs.GetDagRun(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return storedDagRun{}, notVisible("DAG run", id)
	}
	if err != nil {
		return storedDagRun{}, storeError("read DAG run", err)
	}
	r, err := decodeDagRun(row)
	if err != nil {
		return storedDagRun{}, connect.NewError(connect.CodeInternal, err)
	}
	if !p.CanSee(r.team) {
		return storedDagRun{}, notVisible("DAG run", id)
	}
	return r, nil
}

// DagRunDetail is a stored DAG run as GetDagRun answers it, its inline
// jobs' secret values redacted: `sundial dag resume` prints it alike
// whether it went through the API or read the store.
func DagRunDetail(row store.DagRun) (*apiv1.DagRunDetail, error) {
	r, err := decodeDagRun(row)
	if err != nil {
		return nil, err
	}
	return r.detail(), nil
}

// decodeDagRun decodes a stored DAG run's state and definitions.
func decodeDagRun(row store.DagRun) (storedDagRun, error) {
	st, err := dagrun.Unmarshal(row.State)
	if err != nil {
		return storedDagRun{}, fmt.Errorf("DAG run %q: the stored state does not decode: %w", row.ID, err)
	}
	created := &sundialv1.DagSpec{}
	if err := sundialv1.Unmarshal(sundialv1.ContentTypeProtobuf, row.Spec, created); err != nil {
		return storedDagRun{}, fmt.Errorf("DAG run %q: the stored definition does not decode: %w", row.ID, err)
	}
	spec := created
	if st.Definition != nil {
		spec = &sundialv1.DagSpec{}
		if err := sundialv1.Unmarshal(sundialv1.ContentTypeProtobuf, st.Definition, spec); err != nil {
			return storedDagRun{}, fmt.Errorf("DAG run %q: the stored definition does not decode: %w", row.ID, err)
		}
	}
	return storedDagRun{row: row, state: st, spec: spec, team: created.GetOwnerTeam()}, nil
}

// detail is the answer for r, its inline jobs' secret values redacted.
func (r storedDagRun) detail() *apiv1.DagRunDetail {
	spec := proto.CloneOf(r.spec)
	parents := map[string][]string{}
	for _, n := range spec.GetNodes() {
		parents[n.GetId()] = n.GetParents()
	}
	jobspec.Redact(spec)
	st := r.state
	out := &apiv1.DagRunDetail{Run: dagRunSummary(r.row), Spec: spec, EndedAt: timeOrNil(st.EndedAt), Resumable: st.Resumable(),
		Resumes: int32(st.Resumes)} //nolint:gosec // a count of resumes
	for _, n := range st.Nodes {
		out.Nodes = append(out.Nodes, &apiv1.DagNodeRun{
			NodeId:    n.ID,
			Phase:     n.Phase.String(),
			RunId:     n.RunID(st.DagRunID),
			Attempt:   uint32(max(n.Attempt, 0)), //nolint:gosec // checked non-negative
			RunState:  n.RunState,
			StartedAt: timeOrNil(n.StartedAt),
			EndedAt:   timeOrNil(n.EndedAt),
			Deadline:  timeOrNil(n.Deadline),
			Reason:    n.Reason,
			Parents:   parents[n.ID],
		})
	}
	return out
}
