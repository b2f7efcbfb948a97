package configfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEnvNameOfASetting(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "SUNDIAL_API_TLS_CA_FILE", EnvName("api-tls-ca-file"))
	assert.Equal(t, "SUNDIAL_CONFIG", EnvName("config"))
}

func TestPathIsConfigsFlagElseTheEnvironment(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "from-env.yaml" }
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a separate value", []string{"prog", "runner", "--config", "a.yaml"}, "a.yaml"},
		{"an equals sign", []string{"prog", "-config=b.yaml"}, "b.yaml"},
		{"none: the environment", []string{"prog", "runner"}, "from-env.yaml"},
		{"after -- it is an argument", []string{"prog", "--", "--config", "c.yaml"}, "from-env.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, Path(tc.args, env))
		})
	}
}

func TestLoadReadsTopLevelAndSections(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "s.yaml")
	require.NoError(t, os.WriteFile(p, []byte("api-url: http://a\nbrokers: [k1, k2]\nworker:\n  api-url: http://w\n  pool: gpu\n"), 0o600))
	f, err := Load(p)
	require.NoError(t, err)
	for _, tc := range []struct{ section, key, want, source string }{
		{WorkerSection, "api-url", "http://w", `config file ` + p + `, section "worker"`},
		{"runner", "api-url", "http://a", "config file " + p},
		{"runner", "brokers", "k1,k2", "config file " + p},
	} {
		v, ok := f.Lookup(tc.section, tc.key)
		assert.True(t, ok)
		assert.Equal(t, tc.want, v, "%s.%s", tc.section, tc.key)
		assert.Equal(t, tc.source, f.Source(tc.section, tc.key))
	}
	_, ok := f.Lookup("runner", "pool")
	assert.False(t, ok, "a section's key leaks to another")

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("a:\nb: [[1]]\nc:\n  d: {e: 1}\n"), 0o600))
	_, err = Load(bad)
	for _, want := range []string{"a: no value", "b: a list of lists", "c.d: a mapping"} {
		assert.ErrorContains(t, err, want)
	}
}
