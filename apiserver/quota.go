package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"connectrpc.com/connect"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/internal/deps"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	"github.com/sundialhq/sundial/quota"
)

// AuditQuotaSet is the audit action of SetQuotas.
const AuditQuotaSet = "quota.set"

// QuotaServiceConfig configures a QuotaService.
type QuotaServiceConfig struct {
	// Store reads and writes the quotas, and reads the per-team job index.
	// Required.
	Store quota.Store
	// Runs counts the team slots held in Redis; nil reports concurrent
	// runs as not counted (-1).
	Runs quota.RunCounter
	// Audit records every change; nil records none.
	Audit audit.Recorder
	// Now is the clock of the audit records. Default time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
}

// Validate reports every bad field.
func (c QuotaServiceConfig) Validate() error {
	if c.Store == nil {
		return errors.New("quota service config: store: required")
	}
	return nil
}

// QuotaService implements apiv1connect.QuotaServiceHandler: a team's
// principal (viewer and up) reads its own team's quota and usage; the
// cluster admin reads any team's, or with none named every team with a
// row of its own and the default, and alone sets them (another team is
// NotFound to a team's principal).
type QuotaService struct {
	cfg QuotaServiceConfig
}

var _ apiv1connect.QuotaServiceHandler = (*QuotaService)(nil)

// NewQuotaService checks cfg.
func NewQuotaService(cfg QuotaServiceConfig) (*QuotaService, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = deps.Logger(cfg.Logger)
	cfg.Now = deps.Clock(cfg.Now)
	return &QuotaService{cfg: cfg}, nil
}

// Service mounts the quota service on a Server.
func (s *QuotaService) Service() Service {
	return ConnectService(apiv1connect.NewQuotaServiceHandler, apiv1connect.QuotaServiceHandler(s))
}

// maxQuotaTeams bounds the teams one GetQuotas names: each costs a count.
const maxQuotaTeams = 100

// GetQuotas implements apiv1connect.QuotaServiceHandler.
func (s *QuotaService) GetQuotas(ctx context.Context, req *connect.Request[apiv1.GetQuotasRequest]) (*connect.Response[apiv1.GetQuotasResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	teams := req.Msg.GetTeams()
	if len(teams) > maxQuotaTeams {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("teams: %d named, at most %d", len(teams), maxQuotaTeams))
	}
	if len(teams) == 0 && !p.ClusterAdmin {
		teams = []string{p.Team}
	}
	for i, t := range teams {
		if t == "" {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("teams[%d]: empty", i))
		}
		if !p.Allows(t, auth.RoleViewer) {
			// As SetQuotas answers: another team does not exist for the
			// caller; the default row does, and is the cluster admin's.
			if t != quota.DefaultTeam {
				return nil, notVisible("team", t)
			}
			return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("get quotas: team %q: cluster admin only; a team reads its own quota", t))
		}
	}
	usages, err := quota.Usages(ctx, s.cfg.Store, s.cfg.Runs, teams...)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "get quotas", "err", err)
		return nil, internalError("get quotas")
	}
	out := &apiv1.GetQuotasResponse{}
	for _, u := range usages {
		out.Quotas = append(out.Quotas, teamQuotaView(u))
	}
	return connect.NewResponse(out), nil
}

// SetQuotas implements apiv1connect.QuotaServiceHandler.
func (s *QuotaService) SetQuotas(ctx context.Context, req *connect.Request[apiv1.SetQuotasRequest]) (*connect.Response[apiv1.SetQuotasResponse], error) {
	m := req.Msg
	p, err := requireClusterAdminOf(ctx, "set quotas", m.GetTeam())
	if err != nil {
		return nil, err
	}
	c := quota.Change{Team: m.GetTeam(), MaxJobs: m.MaxJobs, MaxConcurrentRuns: m.MaxConcurrentRuns, MaxRunsPerMinute: m.MaxRunsPerMinute}
	bad := []error{c.Validate()}
	if c.Team != "" && c.Team != quota.DefaultTeam {
		if err := auth.CheckTeamName(c.Team); err != nil {
			bad = append(bad, fmt.Errorf("team: %w", err))
		}
	}
	if err := errors.Join(bad...); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	before, after, err := quota.Set(ctx, s.cfg.Store, c)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "set quotas", "team", c.Team, "err", err)
		return nil, internalError("set quotas")
	}
	recordAudit(ctx, s.cfg.Audit, s.cfg.Logger, p, s.cfg.Now().UTC(), AuditQuotaSet, c.Team, c.Team, "through the API: "+quota.Diff(before, after))
	// The usage beside the row: the default row has none, and a failure
	// to count leaves the change stored and the counts unknown.
	u := quota.Usage{Quota: after, Jobs: -1, ConcurrentRuns: -1}
	if c.Team != quota.DefaultTeam {
		switch usages, err := quota.Usages(ctx, s.cfg.Store, s.cfg.Runs, c.Team); {
		case err != nil:
			s.cfg.Logger.WarnContext(ctx, "set quotas: count the usage", "team", c.Team, "err", err)
		case len(usages) == 1:
			u = usages[0]
		}
	}
	return connect.NewResponse(&apiv1.SetQuotasResponse{Quota: teamQuotaView(u)}), nil
}

// teamQuotaView is a team's quota and usage as the API answers them.
func teamQuotaView(u quota.Usage) *apiv1.TeamQuota {
	return &apiv1.TeamQuota{
		Team: u.Team, MaxJobs: uint32(u.MaxJobs), MaxConcurrentRuns: uint32(u.MaxConcurrentRuns), MaxRunsPerMinute: uint32(u.MaxRunsPerMinute),
		Jobs: int64(u.Jobs), ConcurrentRuns: int64(u.ConcurrentRuns),
	}
}
