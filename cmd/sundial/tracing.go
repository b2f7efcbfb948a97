package main

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// newTracerProvider builds the process's tracer provider for --tracing: spans
// are batched and exported over OTLP/HTTP, configured as every OpenTelemetry
// SDK is, by the standard variables (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, default http://localhost:4318;
// OTEL_EXPORTER_OTLP_HEADERS; OTEL_TRACES_SAMPLER and its argument;
// OTEL_BSP_*). The service is named sundial-<component> unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names it. Nothing is set
// globally: the provider is handed to each component's Config.
func newTracerProvider(ctx context.Context, component string) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("--tracing: OTLP exporter: %w", err)
	}
	// Later options win: the variables override the default name.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "sundial-"+component)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
	)
	if err != nil {
		return nil, fmt.Errorf("--tracing: resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// tracerShutdownTimeout bounds the export of the spans still buffered when
// the process stops.
const tracerShutdownTimeout = 5 * time.Second
