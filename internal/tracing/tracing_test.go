package tracing_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/sundialhq/sundial/internal/tracing"
)

const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func TestTraceparentRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, traceID string
	}{
		{"a valid traceparent names its trace", parent, "0af7651916cd43dd8448eb211c80319c"},
		{"an empty traceparent names none", "", ""},
		{"a malformed traceparent is ignored", "00-zz-yy-01", ""},
		{"an all-zero trace id is invalid", "00-00000000000000000000000000000000-b7ad6b7169203331-01", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := tracing.WithTraceparent(t.Context(), tt.in)
			assert.Equal(t, tt.traceID, tracing.TraceID(ctx))
			assert.Equal(t, tt.traceID, tracing.TraceIDOf(tt.in))
			if tt.traceID != "" {
				assert.Equal(t, tt.in, tracing.Traceparent(ctx))
			} else {
				assert.Empty(t, tracing.Traceparent(ctx))
			}
		})
	}
}

func TestNilProviderAddsNothing(t *testing.T) {
	t.Parallel()
	ctx, span := tracing.Tracer(nil).Start(t.Context(), "step")
	defer span.End()
	assert.False(t, span.IsRecording())
	assert.Empty(t, tracing.Traceparent(ctx), "tracing off: no trace context to send")
	rec := &kgo.Record{}
	tracing.Inject(ctx, tracing.RecordCarrier{Record: rec})
	assert.Empty(t, rec.Headers)
	h := http.Header{}
	tracing.Inject(ctx, propagation.HeaderCarrier(h))
	assert.Empty(t, h)
}

func TestRecordCarrierContinuesTheTrace(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	ctx, span := tracing.Tracer(tp).Start(tracing.WithTraceparent(t.Context(), parent), "produce")
	defer span.End()
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", tracing.TraceID(ctx), "a child keeps its parent's trace")

	rec := &kgo.Record{Headers: []kgo.RecordHeader{{Key: tracing.HeaderTraceparent, Value: []byte("stale")}}}
	tracing.Inject(ctx, tracing.RecordCarrier{Record: rec})
	require.Len(t, rec.Headers, 1, "the record's traceparent is replaced, not repeated")
	got := tracing.FromRecord(t.Context(), rec)
	assert.Equal(t, span.SpanContext().SpanID(), trace(got).SpanID(), "the reader's parent is the writer's span")
	assert.Equal(t, tracing.Traceparent(ctx), string(rec.Headers[0].Value))

	assert.Equal(t, t.Context(), tracing.FromRecord(t.Context(), &kgo.Record{}), "no header: ctx unchanged")
}

func trace(ctx context.Context) oteltrace.SpanContext { return oteltrace.SpanContextFromContext(ctx) }
