package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v3"
	"go.yaml.in/yaml/v3"
)

// composeDir holds the one-machine trial (docker compose).
const composeDir = "../../deploy/compose"

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   yaml.Node         `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Ports   []string `yaml:"ports"`
	Volumes []string `yaml:"volumes"`
}

// dependencies returns the services a service waits for and the condition
// of each ("" for the list form).
func (s composeService) dependencies(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch s.DependsOn.Kind {
	case 0:
	case yaml.SequenceNode:
		var names []string
		require.NoError(t, s.DependsOn.Decode(&names))
		for _, n := range names {
			out[n] = ""
		}
	case yaml.MappingNode:
		var m map[string]struct {
			Condition string `yaml:"condition"`
		}
		require.NoError(t, s.DependsOn.Decode(&m))
		for n, c := range m {
			out[n] = c.Condition
		}
	default:
		t.Fatalf("depends_on: neither a list nor a mapping")
	}
	return out
}

// resolve finds the command args name in the command tree and returns it
// with the arguments that follow the command's name.
func resolve(root *cli.Command, args []string) (*cli.Command, []string, error) {
	cmd := root
	for i, a := range args {
		if strings.HasPrefix(a, "-") {
			return cmd, args[i:], nil
		}
		sub := cmd.Command(a)
		if sub == nil {
			return nil, nil, fmt.Errorf("%q has no subcommand %q", cmd.FullName(), a)
		}
		cmd = sub
	}
	return cmd, nil, nil
}

// TestComposeFile checks deploy/compose/compose.yaml without a container
// engine: every sundial service runs a command this binary has, with flags and
// SUNDIAL_* variables that command defines and the backends it needs; what
// services wait for exists and can become healthy; mounted files exist; and
// Prometheus scrapes every process under the component label the dashboards
// select.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(composeDir, "compose.yaml"))
	require.NoError(t, err)
	var file struct {
		Services map[string]composeService `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(b, &file))
	require.NotEmpty(t, file.Services)
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})

	metricsPorts := map[string]string{} // service: port
	var sundialServices []string
	for name, s := range file.Services {
		for dep, cond := range s.dependencies(t) {
			d, ok := file.Services[dep]
			if !assert.True(t, ok, "%s depends on %s, which is not a service", name, dep) {
				continue
			}
			if cond == "service_healthy" {
				assert.NotNil(t, d.Healthcheck, "%s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
		for _, v := range s.Volumes {
			if src, _, ok := strings.Cut(v, ":"); ok && strings.HasPrefix(src, ".") {
				_, err := os.Stat(filepath.Join(composeDir, src))
				assert.NoError(t, err, "%s mounts %s", name, src)
			}
		}
		if !strings.HasPrefix(s.Image, "sundial:") {
			continue
		}
		sundialServices = append(sundialServices, name)
		require.NotNil(t, s.Build, "%s: how the image is built", name)
		_, err := os.Stat(filepath.Join(composeDir, s.Build.Context, s.Build.Dockerfile))
		assert.NoError(t, err, "%s: the Dockerfile", name)

		cmd, rest, err := resolve(app, s.Command)
		if !assert.NoError(t, err, "%s: command %v", name, s.Command) {
			continue
		}
		require.Empty(t, cmd.Commands, "%s: %q is a group of commands, not one", name, cmd.FullName())
		flags, envs := map[string]bool{}, map[string]string{}
		for _, f := range cmd.Flags {
			for _, n := range f.Names() {
				flags[n] = true
			}
			if doc, ok := f.(cli.DocGenerationFlag); ok {
				for _, e := range doc.GetEnvVars() {
					envs[e] = f.Names()[0]
				}
			}
		}
		for _, a := range rest {
			if f, ok := strings.CutPrefix(a, "--"); ok {
				f, _, _ = strings.Cut(f, "=")
				assert.True(t, flags[f], "%s: --%s is not a flag of %q", name, f, cmd.FullName())
			}
		}
		for k := range s.Environment {
			if strings.HasPrefix(k, "SUNDIAL_") {
				assert.Contains(t, envs, k, "%s: %s sets no flag of %q", name, k, cmd.FullName())
			}
		}
		for _, required := range []string{"SUNDIAL_KAFKA_BROKERS", "SUNDIAL_CASSANDRA_HOSTS"} {
			assert.NotEmpty(t, s.Environment[required], "%s: %s", name, required)
		}
		if cmd.Name == "runner" {
			assert.NotEmpty(t, s.Environment["SUNDIAL_REDIS_ADDR"], "%s: the runner's leases", name)
			_, ok := s.dependencies(t)["redis"]
			assert.True(t, ok, "%s waits for Redis", name)
		}
		if addr, ok := s.Environment["SUNDIAL_METRICS_ADDR"]; ok {
			port := strings.TrimPrefix(addr, ":")
			metricsPorts[name] = port
			assert.Contains(t, s.Ports, port+":"+port, "%s: its metrics port is published", name)
		} else {
			assert.Equal(t, "migrate", cmd.Name, "%s: every long-running process serves /metrics, /healthz and /readyz", name)
		}
		if cmd.Name != "migrate" {
			assert.Equal(t, "service_completed_successfully", s.dependencies(t)["migrate"], "%s starts after migrate", name)
		}
	}
	assert.ElementsMatch(t, []string{"migrate", "registry", "dispatcher", "runner", "dagengine", "history"}, sundialServices)

	// Prometheus scrapes each of them, labelled as the dashboards expect.
	pb, err := os.ReadFile(filepath.Join(composeDir, "prometheus.yml"))
	require.NoError(t, err)
	var prom struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string          `yaml:"targets"`
				Labels  map[string]string `yaml:"labels"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	require.NoError(t, yaml.Unmarshal(pb, &prom))
	targets := map[string]string{}
	for _, sc := range prom.ScrapeConfigs {
		assert.Equal(t, "sundial", sc.JobName, "the dashboards and alerts select job=\"sundial\"")
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				targets[tg] = st.Labels["component"]
			}
		}
	}
	want := map[string]string{}
	for svc, port := range metricsPorts {
		want[svc+":"+port] = svc
	}
	assert.Equal(t, want, targets)
}
