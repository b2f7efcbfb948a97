package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	op   string // upper case
	args string
}

// stage is a FROM and the instructions up to the next one.
type stage struct {
	from, name string
	body       []instruction
}

// parseDockerfile reads the instructions of a Dockerfile, grouped by stage.
// It understands what this repository's Dockerfile uses: comments, line
// continuations, ARG before the first FROM, "FROM image AS name".
func parseDockerfile(text string) (args map[string]string, stages []stage, err error) {
	args = map[string]string{}
	var insts []instruction
	var cur strings.Builder
	start := 0
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue // also inside a continued instruction, as the engines do
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		op, rest, _ := strings.Cut(cur.String(), " ")
		insts = append(insts, instruction{line: start, op: strings.ToUpper(op), args: strings.TrimSpace(rest)})
		cur.Reset()
	}
	if cur.Len() > 0 {
		return nil, nil, fmt.Errorf("line %d: continued past the end of the file", start)
	}
	for _, in := range insts {
		switch {
		case in.op == "FROM":
			f := strings.Fields(in.args)
			s := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			} else if len(f) != 1 {
				return nil, nil, fmt.Errorf("line %d: FROM %s: want an image and an optional AS name", in.line, in.args)
			}
			stages = append(stages, s)
		case len(stages) == 0 && in.op == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		case len(stages) == 0:
			return nil, nil, fmt.Errorf("line %d: %s before the first FROM", in.line, in.op)
		default:
			stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
		}
	}
	return args, stages, nil
}

func (s stage) all(op string) []string {
	var out []string
	for _, in := range s.body {
		if in.op == op {
			out = append(out, in.args)
		}
	}
	return out
}

// goVersion is the go directive of the repository's go.mod.
func goVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("go.mod has no go directive")
	return ""
}

// TestDockerfile checks what can be checked of the Dockerfile without a
// container engine: its shape, and that it builds the image `make image`
// builds (same paths, user, entrypoint, account files).
func TestDockerfile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	args, stages, err := parseDockerfile(string(b))
	require.NoError(t, err)
	require.Len(t, stages, 2, "a builder stage and the final stage")
	build, final := stages[0], stages[1]

	assert.Equal(t, goVersion(t), args["GO_VERSION"], "the builder's Go is go.mod's")
	assert.Equal(t, "golang:${GO_VERSION}", build.from)
	assert.Equal(t, "build", build.name)
	runs := strings.Join(build.all("RUN"), "\n")
	assert.Contains(t, runs, "CGO_ENABLED=0", "the binary must be static: the final stage has no libc")
	assert.Contains(t, runs, "-o /rootfs"+BinaryPath+" ./cmd/sundial")
	assert.Contains(t, runs, "cp /etc/ssl/certs/ca-certificates.crt /rootfs"+CABundlePath)
	// The account files are those of the engine-free image.
	passwd, group := accountFiles()
	assert.Contains(t, runs, fmt.Sprintf("printf '%s' >/rootfs/etc/passwd", strings.ReplaceAll(passwd, "\n", `\n`)))
	assert.Contains(t, runs, fmt.Sprintf("printf '%s' >/rootfs/etc/group", strings.ReplaceAll(group, "\n", `\n`)))

	assert.Equal(t, "scratch", final.from, "no shell in the final image")
	assert.Empty(t, final.all("RUN"), "the final stage has nothing to run a command with")
	assert.Equal(t, []string{fmt.Sprintf("%d:%d", UID, GID)}, final.all("USER"), "numeric, so runAsNonRoot can check it")
	assert.Equal(t, []string{HomeDir}, final.all("WORKDIR"))
	for _, c := range final.all("COPY") {
		assert.Contains(t, c, "--from=build", "the final stage copies only from the builder")
	}
	entry := final.all("ENTRYPOINT")
	require.Len(t, entry, 1)
	var argv []string
	require.NoError(t, json.Unmarshal([]byte(entry[0]), &argv), "ENTRYPOINT in exec form (a JSON array): the shell form needs /bin/sh")
	assert.Equal(t, []string{BinaryPath}, argv)

	// Both images carry the same environment.
	assert.Equal(t, []string{strings.Join(imageEnv(), " ")}, final.all("ENV"))

	ignore, err := os.ReadFile("Dockerfile.dockerignore")
	require.NoError(t, err)
	for _, p := range []string{".git", ".stack", ".out", "dist"} {
		assert.Contains(t, strings.Split(string(ignore), "\n"), p, "the build context leaves out %s", p)
	}
}

func TestParseDockerfileRefuses(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"RUN true\nFROM scratch\n",
		"FROM scratch\nRUN a \\\n\n",
		"FROM golang AS\n",
	} {
		_, _, err := parseDockerfile(text)
		assert.Error(t, err, "%q", text)
	}
}
