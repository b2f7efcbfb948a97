package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics counts requests by procedure and code. Procedures are the
// schema's methods, a bounded set: teams, jobs and callers stay out of the
// labels.
type metrics struct {
	now      func() time.Time
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer, now func() time.Time) (*metrics, error) {
	m := &metrics{
		now: now,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_api_requests_total",
			Help: "API requests handled, by procedure and Connect code (ok for success).",
		}, []string{"procedure", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sundial_api_request_duration_seconds",
			Help:    "Time to answer an API request, or a stream's lifetime, by procedure.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"procedure"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("api server metrics: %w", err)
		}
	}
	return m, nil
}

// codeLabel is "ok" for success, else the Connect code's name.
func codeLabel(err error) string {
	if err == nil {
		return "ok"
	}
	if errors.Is(err, context.Canceled) && connect.CodeOf(err) == connect.CodeUnknown {
		return connect.CodeCanceled.String()
	}
	return connect.CodeOf(err).String()
}

func (m *metrics) observe(procedure string, start time.Time, err error) {
	m.requests.WithLabelValues(procedure, codeLabel(err)).Inc()
	m.duration.WithLabelValues(procedure).Observe(m.now().Sub(start).Seconds())
}

func (m *metrics) interceptor() connect.Interceptor { return metricsInterceptor{m} }

type metricsInterceptor struct{ m *metrics }

func (i metricsInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := i.m.now()
		res, err := next(ctx, req)
		i.m.observe(req.Spec().Procedure, start, err)
		return res, err
	}
}

func (i metricsInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i metricsInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := i.m.now()
		err := next(ctx, conn)
		i.m.observe(conn.Spec().Procedure, start, err)
		return err
	}
}
