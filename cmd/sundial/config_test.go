package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v3"
)

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sundial.yaml")
	require.NoError(t, os.WriteFile(p, []byte(yaml), 0o600))
	return p
}

func TestConfigPath(t *testing.T) {
	t.Setenv(envName("config"), "from-env.yaml")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"sundial", "runner"}, "from-env.yaml"},
		{[]string{"sundial", "--config", "a.yaml", "runner"}, "a.yaml"},
		{[]string{"sundial", "runner", "-config=b.yaml"}, "b.yaml"},
		{[]string{"sundial", "--config=a.yaml", "runner", "--config", "c.yaml"}, "c.yaml"},
		{[]string{"sundial", "jobs", "apply", "--", "--config", "d.yaml"}, "from-env.yaml"},
		{[]string{"sundial", "runner", "--configx", "e.yaml"}, "from-env.yaml"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, configPath(tt.args), "%v", tt.args)
	}
}

// captured runs the command at path with args, the config file and the
// current environment, and returns the command as its action saw it.
func captured(t *testing.T, file string, path []string, args ...string) *cli.Command {
	t.Helper()
	full := append(append([]string{"sundial"}, path...), args...)
	if file != "" {
		full = append(full, "--config", file)
	}
	cf, err := loadConfigFile(configPath(full))
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	app := newAppWithConfig(&out, &errOut, cf)
	require.NoError(t, cf.attach(app))
	target := app
	for _, name := range path {
		target = target.Command(name)
		require.NotNil(t, target, name)
	}
	var seen *cli.Command
	target.Action = func(_ context.Context, cmd *cli.Command) error { seen = cmd; return nil }
	require.NoError(t, app.Run(t.Context(), full), "stderr: %s", errOut.String())
	require.NotNil(t, seen, "the action ran")
	return seen
}

// Not parallel: it sets the environment.
func TestConfigPrecedence(t *testing.T) {
	for _, k := range []string{"kafka-sasl-username", "kafka-brokers", "concurrency", "lease-ttl", "history", "group-id"} {
		t.Setenv(envName(k), "")
		require.NoError(t, os.Unsetenv(envName(k)))
	}
	runner := []string{"runner"}
	top := writeConfig(t, `
kafka-sasl-username: top
kafka-brokers: [k1:9093, k2:9093]
lease-ttl: 45s
history: true
group-id: everyone
`)
	section := writeConfig(t, `
kafka-sasl-username: top
group-id: everyone
runner:
  kafka-sasl-username: section
  concurrency: 7
dag engine:
  group-id: engines
`)
	// default
	cmd := captured(t, "", runner)
	assert.Empty(t, cmd.String("kafka-sasl-username"))
	assert.False(t, cmd.Bool("history"))

	// the file's top level, with lists, durations and booleans
	cmd = captured(t, top, runner)
	assert.Equal(t, "top", cmd.String("kafka-sasl-username"))
	assert.Equal(t, []string{"k1:9093", "k2:9093"}, cmd.StringSlice("kafka-brokers"))
	assert.Equal(t, 45*time.Second, cmd.Duration("lease-ttl"))
	assert.True(t, cmd.Bool("history"))

	// a command's section wins over the top level, for that command only
	cmd = captured(t, section, runner)
	assert.Equal(t, "section", cmd.String("kafka-sasl-username"))
	assert.Equal(t, 7, cmd.Int("concurrency"))
	assert.Equal(t, "everyone", cmd.String("group-id"))
	cmd = captured(t, section, []string{"dag", "engine"})
	assert.Equal(t, "top", cmd.String("kafka-sasl-username"))
	assert.Equal(t, "engines", cmd.String("group-id"))

	// the environment wins over the file
	t.Setenv(envName("kafka-sasl-username"), "env")
	t.Setenv(envName("concurrency"), "9")
	cmd = captured(t, section, runner)
	assert.Equal(t, "env", cmd.String("kafka-sasl-username"))
	assert.Equal(t, 9, cmd.Int("concurrency"))

	// a flag wins over everything
	cmd = captured(t, section, runner, "--kafka-sasl-username", "flag", "--concurrency", "11")
	assert.Equal(t, "flag", cmd.String("kafka-sasl-username"))
	assert.Equal(t, 11, cmd.Int("concurrency"))

	// SUNDIAL_CONFIG names the file when --config does not
	t.Setenv(envName("config"), top)
	cmd = captured(t, "", runner)
	assert.Equal(t, []string{"k1:9093", "k2:9093"}, cmd.StringSlice("kafka-brokers"))
}

func TestConfigFileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"unknown key", "kafka-broker: [a:1]\n", []string{`unknown key "kafka-broker"`}},
		{"unknown section", "dagengine:\n  group-id: x\n", []string{`unknown section "dagengine"`}},
		{"flag of another command", "runner:\n  lookahead: 1m\n", []string{`unknown key "lookahead" in section "runner"`}},
		{"all at once", "a: 1\nb: 2\n", []string{`unknown key "a"`, `unknown key "b"`}},
		{"no value", "kafka-brokers:\n", []string{"kafka-brokers: no value"}},
		{"not YAML", "kafka-brokers: [a\n", []string{"config file"}},
		{"a value a flag cannot take", "runner:\n  concurrency: many\n", []string{`"many"`, "concurrency"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := runCLI(t, "--config", writeConfig(t, tt.yaml), "runner", "--kafka-brokers", "127.0.0.1:1")
			assert.Equal(t, 1, code)
			for _, w := range tt.want {
				assert.Contains(t, errOut, w)
			}
		})
	}
	code, _, errOut := runCLI(t, "--config", filepath.Join(t.TempDir(), "missing.yaml"), "version")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--config: open")
}

// Not parallel: it sets the environment.
func TestConfigPrint(t *testing.T) {
	t.Setenv(envName("redis-password"), "redis-secret-from-env")
	t.Setenv(envName("concurrency"), "")
	require.NoError(t, os.Unsetenv(envName("concurrency")))
	file := writeConfig(t, `
kafka-sasl-mechanism: PLAIN
kafka-sasl-password: kafka-secret-from-file
runner:
  concurrency: 99
`)
	code, out, errOut := runCLI(t, "config", "print", "--config", file)
	require.Equal(t, 0, code, errOut)
	t.Log(out)
	assert.Regexp(t, `kafka-sasl-mechanism\s+PLAIN\s+config file `+file+`\n`, out)
	assert.Regexp(t, `kafka-sasl-password\s+\*{8}\s+config file `, out)
	assert.Regexp(t, `redis-password\s+\*{8}\s+environment variable "SUNDIAL_REDIS_PASSWORD"`, out)
	assert.Regexp(t, `cassandra-consistency\s+LOCAL_QUORUM\s+default`, out)
	assert.NotContains(t, out, "concurrency", "without a command, only the connection settings")

	code, out, errOut = runCLI(t, "--config", file, "config", "print", "runner")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `concurrency\s+99\s+config file \S+, section "runner"`, out)
	assert.Regexp(t, `group-id\s+default`, out)
	for _, s := range []string{"kafka-secret-from-file", "redis-secret-from-env"} {
		assert.NotContains(t, out, s)
	}

	code, _, errOut = runCLI(t, "config", "print", "nope")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `no command "nope"`)
	assert.True(t, strings.HasPrefix(errOut, "sundial: config print"), errOut)
}

// TestConfigurationDocExample keeps docs/configuration.md's production file
// true: it loads, every key is a flag of its command, and it sets every flag
// of the long-running commands and migrate (passwords through their files).
func TestConfigurationDocExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "## A complete production file")
	require.True(t, ok, "the section is there")
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	require.True(t, ok, "the section holds a YAML block")
	example, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)

	file, err := loadConfigFile(writeConfig(t, example))
	require.NoError(t, err)
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	require.NoError(t, file.attach(app), "every key of the example is a flag of its command")

	walkPaths(app, func(cmd *cli.Command, path string) {
		switch path {
		case "migrate", "registry", "dispatcher", "runner", "dag engine":
		default:
			return
		}
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			if secretFlags[name] {
				// The example reads passwords from their files.
				continue
			}
			_, top := file.values[name]
			_, own := file.sections[path][name]
			assert.True(t, top || own, "the example sets --%s of sundial %s", name, path)
		}
	})
}
