package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/jobspec"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/deadletter"
	"github.com/sundialhq/sundial/store"
)

// Page sizes of ListDeadLetters.
const (
	defaultDeadLetterPageSize = 100
	maxDeadLetterPageSize     = 1000
)

// DeadLetterReader reads the dead-letter topic.
type DeadLetterReader interface {
	// ReadDeadLetters returns the dead letters that pass f, oldest dead_at
	// first.
	ReadDeadLetters(ctx context.Context, f deadletter.Filter) ([]*sundialv1.DeadLetter, error)
}

// KafkaDeadLetters reads sundial.dlq with deadletter.Read.
type KafkaDeadLetters struct {
	// Opts are the base client options: seed brokers, TLS, SASL.
	Opts []kgo.Opt
	// Topic is topics.Names.DLQ.
	Topic string
}

// ReadDeadLetters reads the whole topic as it is when the call begins.
func (k KafkaDeadLetters) ReadDeadLetters(ctx context.Context, f deadletter.Filter) ([]*sundialv1.DeadLetter, error) {
	return deadletter.Read(ctx, k.Opts, k.Topic, f)
}

// Enqueuer writes due entries; *enqueue.Enqueuer satisfies it.
type Enqueuer interface {
	Enqueue(ctx context.Context, entries ...store.DueEntry) error
}

// DlqServiceConfig holds the dead-letter service's dependencies.
type DlqServiceConfig struct {
	// DeadLetters reads sundial.dlq (required).
	DeadLetters DeadLetterReader
	// Jobs gives the current definition a replay runs with (required).
	Jobs JobReader
	// Enqueuer writes the replayed runs' due entries (required).
	Enqueuer Enqueuer
	// Now is the clock replays are due by (required).
	Now func() time.Time
	// Logger receives the backend failures a caller is not shown
	// (required).
	Logger *slog.Logger
}

// Validate reports every missing dependency.
func (c DlqServiceConfig) Validate() error {
	var errs []error
	if c.DeadLetters == nil {
		errs = append(errs, errors.New("dlq service: dead letters: required"))
	}
	if c.Jobs == nil {
		errs = append(errs, errors.New("dlq service: jobs: required"))
	}
	if c.Enqueuer == nil {
		errs = append(errs, errors.New("dlq service: enqueuer: required"))
	}
	if c.Now == nil {
		errs = append(errs, errors.New("dlq service: now: required"))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("dlq service: logger: required"))
	}
	return errors.Join(errs...)
}

// DlqService implements apiv1connect.DlqServiceHandler. A dead letter
// belongs to the team its run names (Run.owner_team, copied from the
// definition the run was built from).
type DlqService struct {
	cfg DlqServiceConfig
}

var _ apiv1connect.DlqServiceHandler = (*DlqService)(nil)

// NewDlqService returns a dead-letter service, or the config's errors.
func NewDlqService(cfg DlqServiceConfig) (*DlqService, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &DlqService{cfg: cfg}, nil
}

// deadLetterFilter converts and checks a filter.
func deadLetterFilter(f *apiv1.DeadLetterFilter) (deadletter.Filter, error) {
	out := deadletter.Filter{JobID: f.GetJobId(), RunID: f.GetRunId()}
	if f.GetDeadAfter() != nil {
		out.Since = f.GetDeadAfter().AsTime()
	}
	if f.GetDeadBefore() != nil {
		out.Until = f.GetDeadBefore().AsTime()
	}
	if !out.Since.IsZero() && !out.Until.IsZero() && !out.Since.Before(out.Until) {
		return out, errors.New("filter.dead_after: must be before filter.dead_before")
	}
	return out, nil
}

// visible reads the dead letters of f that p may see.
func (s *DlqService) visible(ctx context.Context, p auth.Principal, f deadletter.Filter) ([]*sundialv1.DeadLetter, error) {
	dls, err := s.cfg.DeadLetters.ReadDeadLetters(ctx, f)
	if err != nil {
		return nil, err
	}
	out := dls[:0]
	for _, dl := range dls {
		if p.CanSee(dl.GetRun().GetOwnerTeam()) {
			out = append(out, dl)
		}
	}
	return out, nil
}

// ListDeadLetters returns one page of the caller's dead letters.
func (s *DlqService) ListDeadLetters(ctx context.Context, req *connect.Request[apiv1.ListDeadLettersRequest]) (*connect.Response[apiv1.ListDeadLettersResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	var errs []error
	f, err := deadLetterFilter(m.GetFilter())
	if err != nil {
		errs = append(errs, err)
	}
	size := int(m.GetPageSize())
	switch {
	case size == 0:
		size = defaultDeadLetterPageSize
	case size < 0 || size > maxDeadLetterPageSize:
		errs = append(errs, fmt.Errorf("page_size %d: must be between 1 and %d", size, maxDeadLetterPageSize))
	}
	offset := 0
	if tok := m.GetPageToken(); tok != "" {
		key := proto.CloneOf(m)
		key.PageSize, key.PageToken = 0, ""
		if offset, err = parsePageToken(key, tok); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	dls, err := s.visible(ctx, p, f)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "list dead letters", "err", err)
		return nil, internalError("list dead letters")
	}
	page := dls[min(offset, len(dls)):min(offset+size, len(dls))]
	resp := &apiv1.ListDeadLettersResponse{DeadLetters: make([]*sundialv1.DeadLetter, len(page))}
	for i, dl := range page {
		// A dead run carries its job's target as the runner received it.
		resp.DeadLetters[i] = proto.CloneOf(dl)
		jobspec.Redact(resp.DeadLetters[i])
	}
	if len(dls) > offset+size {
		key := proto.CloneOf(m)
		key.PageSize, key.PageToken = 0, ""
		resp.NextPageToken = pageToken(key, offset+size)
	}
	return connect.NewResponse(resp), nil
}

// ReplayDeadLetters replays the selected dead runs of the caller's team
// with each job's current definition.
func (s *DlqService) ReplayDeadLetters(ctx context.Context, req *connect.Request[apiv1.ReplayDeadLettersRequest]) (*connect.Response[apiv1.ReplayDeadLettersResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	f, err := deadLetterFilter(m.GetFilter())
	if err == nil && f == (deadletter.Filter{}) && !m.GetAll() {
		err = errors.New("filter: select runs by job_id, run_id, dead_after or dead_before, or set all")
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	// A team caller below operator may not replay; saying so names only its
	// own team. A cluster admin acts on every team.
	if !p.Allows(p.Team, auth.RoleOperator) {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("replay: needs the operator role"))
	}
	dls, err := s.visible(ctx, p, f)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "replay dead letters: read", "err", err)
		return nil, internalError("replay dead letters")
	}
	entries, err := deadletter.ReplayEntries(dls, s.cfg.Now())
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "replay dead letters: entries", "err", err)
		return nil, internalError("replay dead letters")
	}
	resp := &apiv1.ReplayDeadLettersResponse{}
	var replay []store.DueEntry
	for _, e := range entries {
		ok, err := s.withCurrentDefinition(ctx, p, &e)
		if err != nil {
			s.cfg.Logger.ErrorContext(ctx, "replay dead letters: definition", "run_id", e.RunID, "err", err)
			return nil, internalError("replay dead letters")
		}
		if !ok {
			resp.SkippedRunIds = append(resp.SkippedRunIds, e.RunID)
			continue
		}
		replay = append(replay, e)
		resp.RunIds = append(resp.RunIds, e.RunID)
	}
	if m.GetDryRun() || len(replay) == 0 {
		return connect.NewResponse(resp), nil
	}
	if err := s.cfg.Enqueuer.Enqueue(ctx, replay...); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "replay dead letters: enqueue", "runs", len(replay), "err", err)
		return nil, internalError("replay dead letters")
	}
	return connect.NewResponse(resp), nil
}

// withCurrentDefinition rewrites a replay entry's run with what the job's
// current definition says (deadletter.WithDefinition, the rule the CLI
// follows too), keeping the run's identity. ok is false when the job is
// gone, or now belongs to a team p may not act for.
func (s *DlqService) withCurrentDefinition(ctx context.Context, p auth.Principal, e *store.DueEntry) (ok bool, _ error) {
	spec, job, found, err := jobSpec(ctx, s.cfg.Jobs, e.JobID)
	if err != nil || !found || job.Deleted || !p.Allows(spec.GetOwnerTeam(), auth.RoleOperator) {
		return false, err
	}
	if err := deadletter.WithDefinition(e, spec, job.Revision); err != nil {
		return false, err
	}
	return true, nil
}
