package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/internal/deps"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	"github.com/sundialhq/sundial/quota"
)

// QuotaServiceConfig configures a QuotaService.
type QuotaServiceConfig struct {
	// Store reads the quotas and the per-team job index. Required.
	Store quota.Store
	// Runs counts the team slots held in Redis; nil reports concurrent
	// runs as not counted (-1).
	Runs quota.RunCounter
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
// row of its own and the default.
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
			return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("get quotas: team %q: the caller reads its own team's quota only", t))
		}
	}
	usages, err := quota.Usages(ctx, s.cfg.Store, s.cfg.Runs, teams...)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "get quotas", "err", err)
		return nil, internalError("get quotas")
	}
	out := &apiv1.GetQuotasResponse{}
	for _, u := range usages {
		out.Quotas = append(out.Quotas, &apiv1.TeamQuota{
			Team: u.Team, MaxJobs: uint32(u.MaxJobs), MaxConcurrentRuns: uint32(u.MaxConcurrentRuns), MaxRunsPerMinute: uint32(u.MaxRunsPerMinute),
			Jobs: int64(u.Jobs), ConcurrentRuns: int64(u.ConcurrentRuns),
		})
	}
	return connect.NewResponse(out), nil
}
