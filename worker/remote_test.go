package worker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRemoteConfigNeedsTheAPIAndATokenOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"api and token", Config{APIURL: "https://sundial.example:8480", Token: "s3cret"}, nil},
		{"no token", Config{APIURL: "http://127.0.0.1:8480"}, []string{"Token: is required with APIURL"}},
		{"not a URL", Config{APIURL: "127.0.0.1:8480", Token: "t"}, []string{`APIURL: "127.0.0.1:8480": want an http or https URL`}},
		{"backends too", Config{APIURL: "http://a:1", Token: "t", RedisAddr: "r:6379"}, []string{"APIURL: a worker of the API holds no backend"}},
		{"neither", Config{}, []string{"KafkaBrokers: at least one broker is required (or APIURL and Token)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.cfg.Validate()
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

func TestFromEnvReadsTheCLIsKeys(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("from-file\n"), 0o600))
	t.Setenv(EnvAPIURL, "https://api.example")
	t.Setenv(EnvAPIToken, "")
	t.Setenv(EnvAPITokenFile, tokenFile)
	t.Setenv(EnvAPICAFile, filepath.Join(dir, "ca.pem"))
	t.Setenv(EnvWorkerID, "w-1")
	c, err := FromEnv()
	require.NoError(t, err)
	assert.Equal(t, Config{APIURL: "https://api.example", Token: "from-file", TLSCAFile: filepath.Join(dir, "ca.pem"), ID: "w-1"}, c)
	_, err = c.httpClient()
	assert.ErrorContains(t, err, "TLSCAFile", "a missing CA file is reported")

	t.Setenv(EnvAPIToken, "from-env")
	c, err = FromEnv()
	require.NoError(t, err)
	assert.Equal(t, "from-env", c.Token, "the variable wins over the file")
}
