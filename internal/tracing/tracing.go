package tracing

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The W3C Trace Context headers, on HTTP requests and Kafka records alike.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// instrumentation is the instrumentation scope every Sundial tracer names.
const instrumentation = "github.com/sundialhq/sundial"

// propagator is stateless; W3C Trace Context is the one format Sundial
// speaks.
var propagator propagation.TraceContext

// Tracer returns the tracer of tp for Sundial's spans, or a no-op tracer
// when tp is nil (tracing off).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return noop.NewTracerProvider().Tracer(instrumentation)
	}
	return tp.Tracer(instrumentation)
}

// Traceparent returns the W3C traceparent of the span in ctx, or "" when ctx
// carries no valid span context.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c[HeaderTraceparent]
}

// WithTraceparent returns ctx carrying the remote span context that
// traceparent names, the parent of the next span started from it. An empty
// or malformed traceparent returns ctx unchanged.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{HeaderTraceparent: traceparent})
}

// TraceID returns the trace id of the span in ctx as 32 hex digits, or ""
// when there is none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// TraceIDOf returns the trace id a traceparent names, or "" when it is
// empty or malformed.
func TraceIDOf(traceparent string) string {
	// version-traceid-parentid-flags, the trace id 32 lower-case hex
	// digits, not all zero (W3C Trace Context, level 1).
	parts := strings.Split(traceparent, "-")
	if len(parts) < 4 || len(parts[0]) != 2 || len(parts[2]) != 16 {
		return ""
	}
	id, err := trace.TraceIDFromHex(parts[1])
	if err != nil || !id.IsValid() {
		return ""
	}
	return id.String()
}

// Inject sets the trace context of ctx on the carrier (an HTTP header,
// RecordCarrier): what the next hop continues. Nothing is set when ctx
// carries no valid span context, so tracing that is off adds no header.
func Inject(ctx context.Context, c propagation.TextMapCarrier) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, c)
}

// FromRecord returns ctx carrying the remote span context of rec's
// traceparent header; ctx unchanged when it has none.
func FromRecord(ctx context.Context, rec *kgo.Record) context.Context {
	if !hasTraceparent(rec) {
		return ctx
	}
	return propagator.Extract(ctx, RecordCarrier{rec})
}

func hasTraceparent(rec *kgo.Record) bool {
	for _, h := range rec.Headers {
		if h.Key == HeaderTraceparent {
			return true
		}
	}
	return false
}

// RecordCarrier reads and writes trace context headers of a Kafka record.
// Set replaces a header of the same key, so a record carries one
// traceparent.
type RecordCarrier struct{ Record *kgo.Record }

var _ propagation.TextMapCarrier = RecordCarrier{}

// Get returns the value of the record's header key, or "".
func (c RecordCarrier) Get(key string) string {
	for _, h := range c.Record.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Set sets the record's header key to value, replacing it if present.
func (c RecordCarrier) Set(key, value string) {
	for i, h := range c.Record.Headers {
		if h.Key == key {
			c.Record.Headers[i].Value = []byte(value)
			return
		}
	}
	c.Record.Headers = append(c.Record.Headers, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

// Keys returns the record's header keys.
func (c RecordCarrier) Keys() []string {
	keys := make([]string, len(c.Record.Headers))
	for i, h := range c.Record.Headers {
		keys[i] = h.Key
	}
	return keys
}
