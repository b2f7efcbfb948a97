package apiserver

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sundialhq/sundial/internal/tracing"
)

// TestTracingInterceptorContinuesTheCaller: a call's server span is the
// child of the caller's traceparent header, and what the handler produces
// (client.Client injects ctx's span) continues it; a failed call's span says
// so.
func TestTracingInterceptorContinuesTheCaller(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

	var handled context.Context
	call := tracingInterceptor{tracing.Tracer(tp)}.WrapUnary(func(ctx context.Context, _ connect.AnyRequest) (connect.AnyResponse, error) {
		handled = ctx
		return nil, connect.NewError(connect.CodeNotFound, assert.AnError)
	})
	req := connect.NewRequest(&emptypb.Empty{})
	req.Header().Set("traceparent", caller)
	_, err := call(t.Context(), req)
	require.Error(t, err)

	spans := rec.Ended()
	require.Len(t, spans, 1)
	s := spans[0]
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", s.SpanContext().TraceID().String(), "the call continues the caller's trace")
	assert.Equal(t, "00f067aa0ba902b7", s.Parent().SpanID().String(), "under the caller's span")
	assert.Equal(t, s.SpanContext().SpanID().String(), tracing.Traceparent(handled)[36:52], "the handler runs inside the call's span")
	assert.Equal(t, "Error", s.Status().Code.String())
}
