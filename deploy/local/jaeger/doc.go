// Package jaeger pins the Jaeger all-in-one (v2: an OpenTelemetry collector
// that keeps traces in memory and answers queries) that the tracing tests
// send their spans to and query (internal/testenv.NeedJaeger). It is a
// module of its own, so that Jaeger's dependencies stay out of Sundial's
// go.mod: `make jaeger` builds the binary once into a cache outside the
// clone, and `make test` hands its path to the tests in SUNDIAL_JAEGER.
package jaeger
