package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/operator"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

// Forecaster counts the runs due per minute (*operator.Operator).
type Forecaster interface {
	Forecast(ctx context.Context, q operator.ForecastQuery) (operator.Forecast, error)
}

// ForecastServiceConfig configures a ForecastService.
type ForecastServiceConfig struct {
	// Forecaster computes the forecasts. Required.
	Forecaster Forecaster
	// Shards is the cluster's shard count, reported with each forecast.
	// Required.
	Shards int
	// Logger; nil discards.
	Logger *slog.Logger
}

// Validate reports every bad field.
func (c ForecastServiceConfig) Validate() error {
	var errs []error
	if c.Forecaster == nil {
		errs = append(errs, errors.New("forecast service config: forecaster: required"))
	}
	if c.Shards < 1 {
		errs = append(errs, fmt.Errorf("forecast service config: shards %d: must be at least 1", c.Shards))
	}
	return errors.Join(errs...)
}

// ForecastService implements apiv1connect.ForecastServiceHandler: any
// role reads the forecast of its own team's runs, the cluster admin of
// every team's.
type ForecastService struct {
	cfg ForecastServiceConfig
}

var _ apiv1connect.ForecastServiceHandler = (*ForecastService)(nil)

// NewForecastService checks cfg.
func NewForecastService(cfg ForecastServiceConfig) (*ForecastService, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = deps.Logger(cfg.Logger)
	return &ForecastService{cfg: cfg}, nil
}

// Service mounts the forecast service on a Server.
func (s *ForecastService) Service() Service {
	return ConnectService(apiv1connect.NewForecastServiceHandler, apiv1connect.ForecastServiceHandler(s))
}

// forecastGroups maps the API's groups to the operator's.
var forecastGroups = map[apiv1.ForecastGroup]operator.ForecastGroup{
	apiv1.ForecastGroup_FORECAST_GROUP_UNSPECIFIED: operator.ByShard,
	apiv1.ForecastGroup_FORECAST_GROUP_SHARD:       operator.ByShard,
	apiv1.ForecastGroup_FORECAST_GROUP_TEAM:        operator.ByTeam,
	apiv1.ForecastGroup_FORECAST_GROUP_POOL:        operator.ByPool,
}

// ForecastFires implements apiv1connect.ForecastServiceHandler.
func (s *ForecastService) ForecastFires(ctx context.Context, req *connect.Request[apiv1.ForecastFiresRequest]) (*connect.Response[apiv1.ForecastFiresResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	horizon := operator.MaxForecastHorizon
	if req.Msg.GetHorizon() != nil {
		horizon = req.Msg.GetHorizon().AsDuration()
	}
	if horizon < time.Minute || horizon > operator.MaxForecastHorizon || horizon%time.Minute != 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("horizon %v: a whole number of minutes from 1m to %v", horizon, operator.MaxForecastHorizon))
	}
	group, ok := forecastGroups[req.Msg.GetGroup()]
	if !ok {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("group %v: unknown", req.Msg.GetGroup()))
	}
	q := operator.ForecastQuery{Horizon: horizon, Group: group}
	if !p.ClusterAdmin {
		q.Team = p.Team
	}
	f, err := s.cfg.Forecaster.Forecast(ctx, q)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "forecast fires", "err", err)
		return nil, internalError("forecast fires")
	}
	out := &apiv1.ForecastFiresResponse{
		Start: timestamppb.New(f.Start), Minutes: uint32(f.Minutes), ShardCount: uint32(s.cfg.Shards),
		Truncated: f.Truncated, EntriesRead: uint32(f.EntriesRead),
	}
	keys := make([]string, 0, len(f.Rows))
	for k := range f.Rows {
		keys = append(keys, k)
	}
	// Shards in number order, teams and pools by name.
	slices.SortFunc(keys, func(a, b string) int {
		if len(a) != len(b) && group == operator.ByShard {
			return len(a) - len(b)
		}
		if a < b {
			return -1
		}
		if a > b {
			return 1
		}
		return 0
	})
	for _, k := range keys {
		row := &apiv1.ForecastRow{Key: k}
		for _, n := range f.Rows[k] {
			row.Counts = append(row.Counts, uint32(n))
			row.Total += uint32(n)
		}
		out.Rows = append(out.Rows, row)
	}
	return connect.NewResponse(out), nil
}
