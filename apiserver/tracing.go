package apiserver

import (
	"context"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sundialhq/sundial/internal/tracing"
)

// tracingInterceptor starts a server span per unary call, named by its
// procedure, that continues the caller's traceparent header. A change the
// call produces (ApplyJob, TriggerJob) carries the span to the registry
// (client.Client injects it into the record).
type tracingInterceptor struct{ tracer trace.Tracer }

func (i tracingInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if h := req.Header(); h.Get(tracing.HeaderTraceparent) != "" {
			ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h))
		}
		ctx, span := i.tracer.Start(ctx, req.Spec().Procedure, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("rpc.system", "connect_rpc"), attribute.String("rpc.method", req.Spec().Procedure)))
		defer span.End()
		res, err := next(ctx, req)
		if err != nil {
			span.SetStatus(codes.Error, connect.CodeOf(err).String())
			span.SetAttributes(attribute.String("rpc.connect_rpc.error_code", connect.CodeOf(err).String()))
		}
		return res, err
	}
}

// Streams are not traced: a watch lives for minutes and is no step of a run.
func (i tracingInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i tracingInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
