package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/internal/deps"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

// Limits of ListAudit.
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)

// AuditLister reads the trail (*audit.Trail).
type AuditLister interface {
	List(ctx context.Context, q audit.Query) ([]audit.Record, error)
}

// AuditServiceConfig configures an AuditService.
type AuditServiceConfig struct {
	// Trail reads the records. Required.
	Trail AuditLister
	// Jobs reads definitions (tombstones included), to find the team of a
	// job asked for. Required.
	Jobs JobReader
	// Logger; nil discards.
	Logger *slog.Logger
}

// Validate reports every bad field.
func (c AuditServiceConfig) Validate() error {
	var errs []error
	if c.Trail == nil {
		errs = append(errs, errors.New("audit service config: trail: required"))
	}
	if c.Jobs == nil {
		errs = append(errs, errors.New("audit service config: jobs: required"))
	}
	return errors.Join(errs...)
}

// AuditService implements apiv1connect.AuditServiceHandler: a team's
// principal (viewer and up) reads its own team's records, the cluster admin
// any team's. A job of another team is NotFound; a record of another team
// is never returned, whatever the query.
type AuditService struct {
	cfg AuditServiceConfig
}

var _ apiv1connect.AuditServiceHandler = (*AuditService)(nil)

// NewAuditService checks cfg.
func NewAuditService(cfg AuditServiceConfig) (*AuditService, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = deps.Logger(cfg.Logger)
	return &AuditService{cfg: cfg}, nil
}

// Service mounts the audit service on a Server.
func (s *AuditService) Service() Service {
	return ConnectService(apiv1connect.NewAuditServiceHandler, apiv1connect.AuditServiceHandler(s))
}

// ListAudit implements apiv1connect.AuditServiceHandler.
func (s *AuditService) ListAudit(ctx context.Context, req *connect.Request[apiv1.ListAuditRequest]) (*connect.Response[apiv1.ListAuditResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if (m.GetJobId() == "") == (m.GetTeam() == "") {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("job_id, team: set exactly one"))
	}
	if m.GetLimit() > maxAuditLimit {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("limit %d: at most %d", m.GetLimit(), maxAuditLimit))
	}
	q := audit.Query{Subject: m.GetJobId(), Team: m.GetTeam(), Limit: defaultAuditLimit}
	if m.GetLimit() > 0 {
		q.Limit = int(m.GetLimit())
	}
	if m.Since != nil {
		q.Since = m.GetSince().AsTime()
	}
	switch {
	case q.Team != "" && !p.Allows(q.Team, auth.RoleViewer):
		return nil, notVisible("team", q.Team)
	case q.Subject != "" && !p.ClusterAdmin:
		// A deleted job's records stay readable by its team: the tombstone
		// still names the owner.
		spec, _, found, err := jobSpec(ctx, s.cfg.Jobs, q.Subject)
		if err != nil {
			s.cfg.Logger.ErrorContext(ctx, "list audit: read job", "job", q.Subject, "err", err)
			return nil, internalError("list audit")
		}
		if !found || !p.CanSee(spec.GetOwnerTeam()) {
			return nil, notVisible("job", q.Subject)
		}
	}
	recs, err := s.cfg.Trail.List(ctx, q)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "list audit", "err", err)
		return nil, internalError("list audit")
	}
	out := &apiv1.ListAuditResponse{}
	for _, r := range recs {
		if !p.CanSee(r.Team) {
			continue
		}
		out.Records = append(out.Records, &apiv1.AuditRecord{
			Id: r.ID, At: timestamppb.New(r.At), Actor: r.Actor, Action: r.Action, Subject: r.Subject, Team: r.Team,
			RevisionBefore: r.RevisionBefore, RevisionAfter: r.RevisionAfter, Changes: fieldChanges(r.Changes), Detail: r.Detail,
		})
	}
	return connect.NewResponse(out), nil
}

// fieldChanges is a diff on the wire.
func fieldChanges(cs []audit.Change) []*apiv1.FieldChange {
	out := make([]*apiv1.FieldChange, 0, len(cs))
	for _, c := range cs {
		out = append(out, &apiv1.FieldChange{Field: c.Field, Before: c.Before, After: c.After})
	}
	return out
}

// sortedBuckets are a load map's buckets in time order.
func sortedBuckets(load map[time.Time]int) []time.Time {
	return slices.SortedFunc(maps.Keys(load), func(a, b time.Time) int { return a.Compare(b) })
}
