package telemetry_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/telemetry"
)

func startPprof(t *testing.T) (*telemetry.PprofServer, string) {
	t.Helper()
	srv, err := telemetry.NewPprofServer(telemetry.PprofConfig{Addr: "127.0.0.1:0"})
	require.NoError(t, err)
	require.NoError(t, srv.Start(t.Context()))
	t.Cleanup(srv.Stop)
	return srv, "http://" + srv.Addr().String()
}

func TestPprofServesIndexAndProfiles(t *testing.T) {
	t.Parallel()
	_, base := startPprof(t)

	code, body, _ := get(t, base+"/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	for _, name := range []string{"goroutine", "heap", "allocs", "profile", "trace"} {
		assert.Contains(t, body, name)
	}
	code, body, _ = get(t, base+"/debug/pprof/cmdline")
	require.Equal(t, http.StatusOK, code)
	assert.NotEmpty(t, body)

	code, body, _ = get(t, base+"/debug/pprof/heap")
	require.Equal(t, http.StatusOK, code)
	heap, err := profile.Parse(strings.NewReader(body))
	require.NoError(t, err)
	assert.NotEmpty(t, heap.SampleType)

	code, body, _ = get(t, base+"/debug/pprof/profile?seconds=1")
	require.Equal(t, http.StatusOK, code)
	cpu, err := profile.Parse(strings.NewReader(body))
	require.NoError(t, err)
	var types []string
	for _, st := range cpu.SampleType {
		types = append(types, st.Type)
	}
	assert.Contains(t, types, "cpu")
	assert.Positive(t, cpu.DurationNanos)
}

func TestPprofServesNothingElse(t *testing.T) {
	t.Parallel()
	_, base := startPprof(t)
	// Its own mux: neither the metrics nor anything registered on
	// http.DefaultServeMux.
	for _, path := range []string{"/metrics", "/healthz", "/"} {
		code, _, _ := get(t, base+path)
		assert.Equal(t, http.StatusNotFound, code, path)
	}
}

func TestPprofStopEndsServing(t *testing.T) {
	t.Parallel()
	srv, base := startPprof(t)
	srv.Stop()
	srv.Stop()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/debug/pprof/", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	require.Error(t, err)
}

func TestPprofConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  telemetry.PprofConfig
		want string
	}{
		{"no address", telemetry.PprofConfig{}, "Addr: is required"},
		{"not host:port", telemetry.PprofConfig{Addr: "localhost"}, "is not host:port"},
		{"negative stop timeout", telemetry.PprofConfig{Addr: "127.0.0.1:0", StopTimeout: -1}, "StopTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := telemetry.NewPprofServer(tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
	var srv telemetry.PprofServer
	srv.Stop() // safe before Start
}
