package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDagValidate(t *testing.T) {
	t.Parallel()
	cyclic := filepath.Join(t.TempDir(), "cyclic.json")
	require.NoError(t, os.WriteFile(cyclic, []byte(`{"id":"t.c","ownerTeam":"t","nodes":[
		{"id":"a","jobId":"j","parents":["b"]},{"id":"b","jobId":"j","parents":["a"]},{"id":"x","jobId":"j","parents":["x"]}]}`), 0o600))
	tests := []struct {
		name    string
		file    string
		code    int
		out     []string
		errText string
	}{
		{name: "valid", file: "../../proto/sundial/v1/testdata/dagspec/nightly-etl.json",
			out: []string{"DAG data.daily-etl is valid: 4 nodes, 2 roots, policy continue_independent"}},
		{name: "cycle and self-edge", file: cyclic, code: 1,
			out:     []string{"nodes[2].parents[0]: self-edge: node \"x\" lists itself as a parent", "nodes: cycle a -> b -> a"},
			errText: `DAG "t.c": 2 problem(s)`},
		{name: "missing file", file: filepath.Join(t.TempDir(), "nope.json"), code: 1, errText: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(t.Context(), []string{"sundial", "dag", "validate", tt.file}, &out, &errOut)
			assert.Equal(t, tt.code, code, errOut.String())
			for _, o := range tt.out {
				assert.Contains(t, out.String(), o)
			}
			assert.Contains(t, errOut.String(), tt.errText)
		})
	}
}

func TestDagCommandsNeedTheirArgument(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"runs", "show"} {
		var out, errOut bytes.Buffer
		code := run(t.Context(), []string{"sundial", "dag", sub, "--cassandra-hosts", "127.0.0.1:1"}, &out, &errOut)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut.String(), "want exactly one argument", sub)
	}
}

// TestDagApplyFileFlag: dag apply takes -f FILE like jobs apply, and the
// bare file still works; either way the file is read and validated before
// anything is produced.
func TestDagApplyFileFlag(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "dag.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"id": "etl.broken", "ownerTeam": "etl"}`), 0o600))
	tests := []struct {
		name    string
		args    []string
		errText string
	}{
		{"flag", []string{"-f", file}, `"etl.broken"`},
		{"long flag", []string{"--file", file}, `"etl.broken"`},
		{"bare file", []string{file}, `"etl.broken"`},
		{"both", []string{"-f", file, file}, "not both"},
		{"neither", nil, "--file: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := runCLI(t, append([]string{"dag", "apply", "--kafka-brokers", "127.0.0.1:1"}, tt.args...)...)
			assert.Equal(t, 1, code)
			assert.Contains(t, errOut, tt.errText)
		})
	}
}
