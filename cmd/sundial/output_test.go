package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v3"
	"go.yaml.in/yaml/v3"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestEveryReadTakesOutput: each command that reads takes -o table, json
// or yaml.
func TestEveryReadTakesOutput(t *testing.T) {
	reads := []string{
		"jobs list", "jobs get", "runs list", "runs get", "dlq list", "dag runs", "dag show", "audit list",
		"quotas list", "teams list", "tokens list", "executors list", "cluster", "schedule preview", "events tail",
	}
	app := newAppWithConfig(io.Discard, io.Discard, &configFile{})
	for _, path := range reads {
		cmd := app
		for _, name := range strings.Fields(path) {
			cmd = cmd.Command(name)
			require.NotNil(t, cmd, "no command %q", path)
		}
		var found *cli.StringFlag
		for _, f := range cmd.Flags {
			if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "output" {
				found = sf
			}
		}
		if assert.NotNil(t, found, "%s has no -o", path) {
			assert.Contains(t, found.Aliases, "o", path)
			assert.Equal(t, outputTable, found.Value, path)
		}
	}
}

// TestEmitKeepsValuesAndOrder: YAML and JSON carry the same values, in
// the fields' order, and YAML quotes a string that would read as another
// type.
func TestEmitKeepsValuesAndOrder(t *testing.T) {
	type row struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
		Text  string `json:"text"`
		Flag  string `json:"flag"`
	}
	tests := []struct {
		name string
		v    any
		json string
		yaml string
	}{
		{"struct", row{Name: "a: b", Count: 3, Text: "123", Flag: "true"},
			`{"name":"a: b","count":3,"text":"123","flag":"true"}` + "\n",
			"---\nname: 'a: b'\ncount: 3\ntext: \"123\"\nflag: \"true\"\n"},
		{"protobuf", &sundialv1.Trigger{JobId: "billing.x", IdempotencyKey: "k"},
			`{"jobId":"billing.x","idempotencyKey":"k"}` + "\n",
			"---\njobId: billing.x\nidempotencyKey: k\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var j, y bytes.Buffer
			require.NoError(t, emitter{w: &j, form: outputJSON}.emit(tt.v))
			require.NoError(t, emitter{w: &y, form: outputYAML}.emit(tt.v))
			assert.JSONEq(t, tt.json, j.String())
			if tt.name == "struct" {
				assert.Equal(t, tt.json, j.String())
			}
			assert.Equal(t, tt.yaml, y.String())
			// The YAML reads back to the JSON's values.
			var fromYAML, fromJSON map[string]any
			require.NoError(t, yaml.Unmarshal(y.Bytes(), &fromYAML))
			require.NoError(t, yaml.Unmarshal(j.Bytes(), &fromJSON))
			assert.Equal(t, fromJSON, fromYAML)
		})
	}
}
