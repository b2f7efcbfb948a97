package worker

import (
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/connect/testpki"
)

// write writes content to name in dir and returns its path.
func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestSettingsComeFromFlagsThenEnvironmentThenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := write(t, dir, "token", "from-token-file\n")
	file := write(t, dir, "sundial.yaml", `
api-url: http://top.example:8480
pool: top-pool
kafka-brokers: [kafka-1:9093] # the CLI's; a worker leaves it alone
worker:
  pool: gpu
  concurrency: 4
  api-token-file: `+token+`
`)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want Config
		errs []string
	}{
		{"the file's worker section wins over its top level", []string{"--config", file}, nil,
			Config{APIURL: "http://top.example:8480", Token: "from-token-file", Pool: "gpu", Concurrency: 4}, nil},
		{"SUNDIAL_CONFIG names the file", nil, map[string]string{"SUNDIAL_CONFIG": file},
			Config{APIURL: "http://top.example:8480", Token: "from-token-file", Pool: "gpu", Concurrency: 4}, nil},
		{"the environment wins over the file", []string{"--config", file},
			map[string]string{"SUNDIAL_API_URL": "https://env.example", "SUNDIAL_POOL": "env-pool", "SUNDIAL_WORKER_ID": "w-env"},
			Config{APIURL: "https://env.example", Token: "from-token-file", Pool: "env-pool", ID: "w-env", Concurrency: 4}, nil},
		{"a flag wins over the environment", []string{"--config", file, "--pool", "flag-pool", "--concurrency=2", "--api-tls-ca-file", "ca.pem"},
			map[string]string{"SUNDIAL_POOL": "env-pool"},
			Config{APIURL: "http://top.example:8480", Token: "from-token-file", Pool: "flag-pool", Concurrency: 2, TLSCAFile: "ca.pem"}, nil},
		{"every TLS setting", []string{"--api-url", "https://a", "--api-token", "t", "--api-tls-ca-file", "ca", "--api-tls-cert-file", "c", "--api-tls-key-file", "k", "--api-tls-server-name", "api.internal"}, nil,
			Config{APIURL: "https://a", Token: "t", TLSCAFile: "ca", TLSCertFile: "c", TLSKeyFile: "k", TLSServerName: "api.internal"}, nil},
		{"a token and a token file are an error, as for the CLI", []string{"--config", file, "--api-token", "t"}, nil,
			Config{}, []string{"--api-token and --api-token-file: set one, not both"}},
		{"a bad number names its setting", []string{"--concurrency", "many"}, nil,
			Config{}, []string{`--concurrency: "many" is not a whole number`}},
		{"a missing file is an error", []string{"--config", filepath.Join(dir, "none.yaml")}, nil,
			Config{}, []string{"--config: open"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			load := flagsWith(fs, func(k string) string { return tc.env[k] })
			require.NoError(t, fs.Parse(tc.args))
			got, err := load()
			if tc.errs == nil {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
				return
			}
			for _, e := range tc.errs {
				assert.ErrorContains(t, err, e)
			}
		})
	}
}

func TestUnknownKeyOfTheWorkerSectionIsAnError(t *testing.T) {
	t.Parallel()
	file := write(t, t.TempDir(), "sundial.yaml", "worker:\n  api-url: http://a\n  kafka-brokers: [k:9092]\n")
	_, err := resolve(map[string]string{KeyConfig: file}, func(string) string { return "" })
	assert.ErrorContains(t, err, `unknown key "kafka-brokers" in section "worker" (not a worker setting)`)
}

func TestLoadParsesTheCommandLine(t *testing.T) {
	t.Setenv("SUNDIAL_CONFIG", "")
	t.Setenv("SUNDIAL_API_TOKEN", "")
	t.Setenv("SUNDIAL_API_TOKEN_FILE", "")
	c, err := Load([]string{"--api-url", "http://127.0.0.1:8480", "--api-token", "t", "--pool", "blue"})
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:8480", c.APIURL)
	assert.Equal(t, "blue", c.Pool)
	_, err = Load([]string{"--no-such-flag"})
	assert.ErrorContains(t, err, "no-such-flag")
}

// TestWorkerClientPresentsItsCertificateToAMutualTLSAPI: the client built
// from the TLS settings trusts the private CA and presents the client
// certificate; without the certificate the API refuses it.
func TestWorkerClientPresentsItsCertificateToAMutualTLSAPI(t *testing.T) {
	t.Parallel()
	pki := testpki.New(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = pki.ServerTLS(true)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
		err  string
	}{
		{"CA and client certificate", Config{TLSCAFile: pki.CA, TLSCertFile: pki.ClientCert, TLSKeyFile: pki.ClientKey}, true, ""},
		{"no client certificate", Config{TLSCAFile: pki.CA}, false, ""},
		{"another CA", Config{TLSCAFile: pki.OtherCA, TLSCertFile: pki.ClientCert, TLSKeyFile: pki.ClientKey}, false, ""},
		{"a certificate without its key", Config{TLSCAFile: pki.CA, TLSCertFile: pki.ClientCert}, false, "--api-tls-key-file: required with a cert file"},
		{"a missing CA file", Config{TLSCAFile: filepath.Join(t.TempDir(), "none.pem")}, false, "--api-tls-ca-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hc, err := tc.cfg.httpClient()
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
			require.NoError(t, err)
			res, err := hc.Do(req)
			if !tc.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			defer res.Body.Close()
			assert.Equal(t, http.StatusOK, res.StatusCode)
		})
	}
}
