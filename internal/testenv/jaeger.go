package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// EnvJaeger names the Jaeger binary (all-in-one, v2), an OpenTelemetry
// collector that keeps traces in memory and answers queries. make test
// builds it (make jaeger) and sets this variable.
const EnvJaeger = "SUNDIAL_JAEGER"

// Jaeger is a Jaeger process of the test's own: OTLP in, queries out.
type Jaeger struct {
	// OTLPEndpoint is the OTLP/HTTP receiver's base URL, the value of
	// OTEL_EXPORTER_OTLP_ENDPOINT ("http://127.0.0.1:port").
	OTLPEndpoint string
	// QueryURL is the query service's base URL; GET
	// QueryURL+"/api/traces/<trace id>" returns a trace as JSON.
	QueryURL string
}

// jaegerConfig keeps traces in memory and listens on loopback ports of the
// test's choosing only (no metrics, sampling or health-check listeners), so
// that tests and a developer's own Jaeger never clash.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %[1]s
    grpc:
      endpoint: %[2]s
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: %[3]s
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// NeedJaeger starts Jaeger (the binary EnvJaeger names, else jaeger on the
// PATH) for the test and stops it at cleanup. Without one the test fails
// under CI and is skipped otherwise.
func NeedJaeger(t testing.TB) Jaeger {
	t.Helper()
	skipShort(t, "Jaeger")
	bin := os.Getenv(EnvJaeger)
	if bin == "" {
		p, err := exec.LookPath("jaeger")
		if err != nil {
			unavailable(t, "Jaeger", EnvJaeger, "no jaeger binary on the PATH (build it with `make jaeger`)")
			return Jaeger{}
		}
		bin = p
	}
	ports := freePorts(t, 3)
	query, grpc, otlp := ports[0], ports[1], ports[2]
	cfg := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(jaegerConfig, query, grpc, otlp)), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &SyncBuffer{}
	cmd := exec.CommandContext(context.Background(), bin, "--config", cfg)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start jaeger %s: %v", bin, err)
	}
	// exited closes when the process has exited, waitErr set.
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	j := Jaeger{OTLPEndpoint: "http://" + otlp, QueryURL: "http://" + query}
	// Ready once the query service answers.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, j.QueryURL+"/api/services", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return j
			}
		}
		select {
		case <-exited:
			t.Fatalf("jaeger exited before it served queries: %v\n%s", waitErr, logs.String())
		case <-ctx.Done():
			t.Fatalf("jaeger did not serve queries within 2 minutes\n%s", logs.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePorts returns n loopback addresses whose ports were free a moment
// ago.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var (
		out []string
		ls  []net.Listener
	)
	for range n {
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	var errs []error
	for _, l := range ls {
		errs = append(errs, l.Close())
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}
