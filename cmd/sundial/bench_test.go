package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/bench"
)

func TestBenchScenarioHelp(t *testing.T) {
	t.Parallel()
	for _, sc := range bench.Scenarios {
		t.Run(sc, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{"sundial", "bench", sc, "--help"}, &out, &errOut)
			require.Equal(t, 0, code, "a scenario named before --help prints the help: %s", errOut.String())
			help := out.String()
			assert.Contains(t, help, "sundial bench "+sc+" [options]")
			for _, flag := range []string{"--rate", "--duration", "--noisy", "--api-watch", "--max-rate", "--capacity-steps"} {
				assert.Contains(t, help, flag)
			}
			assert.NotContains(t, help, "`", "a backquote in a usage becomes the flag's placeholder")
			for line := range strings.Lines(help) {
				assert.LessOrEqual(t, strings.Count(line, "(default"), 1, "the default is shown once: %q", line)
				assert.NotRegexp(t, regexp.MustCompile(`\(default: (0|0s|"")\)`), line, "a zero that stands for a per-scenario default is not shown as the default")
			}
		})
	}
}

func TestBenchHelpListsScenarios(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"sundial", "bench", "--help"}, &out, &errOut), errOut.String())
	for _, sc := range bench.Scenarios {
		assert.Regexp(t, `(?m)^\s+`+sc+`\s`, out.String())
	}
	assert.NotRegexp(t, `(?m)^\s+hog\s`, out.String(), "the CPU hog is an internal command")
}

func TestBenchUnknownScenario(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"sundial", "bench", "soak"}, &out, &errOut)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut.String(), `unknown scenario "soak"`)
}

func TestBenchScenarioTakesNoArguments(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"sundial", "bench", "steady", "extra"}, &out, &errOut)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut.String(), "unexpected arguments [extra]")
}

func TestBenchCompare(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"sundial", "bench", "--help"}, &out, &errOut), errOut.String())
	assert.Regexp(t, `(?m)^\s+compare\s`, out.String())

	out.Reset()
	errOut.Reset()
	assert.Equal(t, 1, run(context.Background(), []string{"sundial", "bench", "compare", "one"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "want two results folders A_DIR B_DIR, got 1 arguments")

	errOut.Reset()
	dir := t.TempDir()
	assert.Equal(t, 1, run(context.Background(), []string{"sundial", "bench", "compare", dir, dir}, &out, &errOut))
	assert.Contains(t, errOut.String(), "report.json")
}
