package telemetry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/telemetry"
)

func startServer(t *testing.T) (*telemetry.Server, *prometheus.Registry, string) {
	t.Helper()
	reg := telemetry.NewRegistry()
	srv, err := telemetry.NewServer(telemetry.Config{Addr: "127.0.0.1:0", Gatherer: reg, Registerer: reg, CheckTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, srv.Start(t.Context()))
	t.Cleanup(srv.Stop)
	return srv, reg, "http://" + srv.Addr().String()
}

func get(t *testing.T, url string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body), resp.Header
}

func TestMetricsServesTheRegistry(t *testing.T) {
	t.Parallel()
	_, reg, base := startServer(t)
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sundial_test_things_total", Help: "Things."})
	reg.MustRegister(c)
	c.Add(3)

	code, body, _ := get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "sundial_test_things_total 3")
	assert.Contains(t, body, "go_goroutines")
	assert.Contains(t, body, "process_cpu_seconds_total")
	// The handler's own metrics are on the registry it was given.
	code, body, _ = get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `promhttp_metric_handler_requests_total{code="200"}`)
}

// A Prometheus that asks for protobuf gets the native buckets of histograms
// built with HistogramOpts, and their classic buckets as well.
func TestMetricsServesNativeAndClassicHistograms(t *testing.T) {
	t.Parallel()
	_, reg, base := startServer(t)
	h := prometheus.NewHistogram(telemetry.HistogramOpts("sundial_test_latency_seconds", "Latency.", nil))
	reg.MustRegister(h)
	h.Observe(0.3)
	h.Observe(2)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	for {
		mf := new(dto.MetricFamily)
		if err := dec.Decode(mf); err != nil {
			require.NoError(t, err, "the histogram was not in the response")
		}
		if mf.GetName() != "sundial_test_latency_seconds" {
			continue
		}
		hist := mf.GetMetric()[0].GetHistogram()
		assert.EqualValues(t, 2, hist.GetSampleCount())
		assert.NotNil(t, hist.Schema, "native histogram schema")
		assert.NotEmpty(t, hist.GetPositiveSpan(), "native buckets")
		var le1 uint64
		for _, b := range hist.GetBucket() {
			if b.GetUpperBound() == 1 {
				le1 = b.GetCumulativeCount()
			}
		}
		assert.EqualValues(t, 1, le1, "classic bucket le=1 (the trigger-latency objective)")
		return
	}
}

func TestHealthzIsAliveWhateverTheChecks(t *testing.T) {
	t.Parallel()
	srv, _, base := startServer(t)
	require.NoError(t, srv.AddCheck("broken", func(context.Context) error { return errors.New("down") }))
	code, body, _ := get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	srv, _, base := startServer(t)
	var kafkaErr error
	require.NoError(t, srv.AddCheck("kafka", func(context.Context) error { return kafkaErr }))
	require.NoError(t, srv.AddCheck("redis", func(context.Context) error { return nil }))

	code, body, _ := get(t, base+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code, "not ready before MarkStarted")
	assert.Contains(t, body, "fail started")

	srv.MarkStarted()
	code, body, _ = get(t, base+"/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok   kafka\nok   redis\n", body)

	kafkaErr = errors.New("dial tcp 127.0.0.1:9092: connection refused\nsecond line")
	code, body, _ = get(t, base+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "fail kafka: dial tcp 127.0.0.1:9092: connection refused second line\nok   redis\n", body)
}

func TestReadyzSurvivesHangingAndPanickingChecks(t *testing.T) {
	t.Parallel()
	srv, _, base := startServer(t)
	srv.MarkStarted()
	require.NoError(t, srv.AddCheck("hangs", func(ctx context.Context) error { <-ctx.Done(); time.Sleep(50 * time.Millisecond); return nil }))
	require.NoError(t, srv.AddCheck("panics", func(context.Context) error { panic("boom") }))
	code, body, _ := get(t, base+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "fail hangs: no answer: context deadline exceeded\n")
	assert.Contains(t, body, "fail panics: check panicked: boom\n")
}

func TestAddCheckRejectsBadNames(t *testing.T) {
	t.Parallel()
	srv, err := telemetry.NewServer(telemetry.Config{Gatherer: prometheus.NewRegistry()})
	require.NoError(t, err)
	ok := func(context.Context) error { return nil }
	require.NoError(t, srv.AddCheck("kafka", ok))
	for name, check := range map[string]telemetry.Check{"kafka": ok, "": ok, "two words": ok, "nil": nil} {
		assert.Error(t, srv.AddCheck(name, check), name)
	}
}

func TestConfigValidateReportsEveryField(t *testing.T) {
	t.Parallel()
	err := telemetry.Config{Addr: "nonsense", CheckTimeout: -1, StopTimeout: -1}.Validate()
	require.Error(t, err)
	for _, field := range []string{"Gatherer", "Addr", "CheckTimeout", "StopTimeout"} {
		assert.Contains(t, err.Error(), field+":")
	}
	_, err = telemetry.NewServer(telemetry.Config{})
	assert.ErrorContains(t, err, "Gatherer: is required")
}

func TestStartAndStopLifecycle(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	srv, err := telemetry.NewServer(telemetry.Config{Addr: "127.0.0.1:0", Gatherer: reg})
	require.NoError(t, err)
	srv.Stop() // safe before Start
	require.NoError(t, srv.Start(t.Context()))
	addr := srv.Addr().String()
	require.Error(t, srv.Start(t.Context()), "second Start")

	// A second server on the same port fails at Start, not later.
	other, err := telemetry.NewServer(telemetry.Config{Addr: addr, Gatherer: reg})
	require.NoError(t, err)
	assert.ErrorContains(t, other.Start(t.Context()), "listen on "+addr)

	srv.Stop()
	srv.Stop() // idempotent
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/healthz", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "refused"), err.Error())

	// Started again, it serves again, and stops again.
	require.NoError(t, srv.Start(t.Context()))
	req, err = http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+srv.Addr().String()+"/healthz", nil)
	require.NoError(t, err)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	srv.Stop()
	srv.Stop()
}
