package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v3"
)

// walk calls fn for every command of the tree, root included.
func walk(cmd *cli.Command, fn func(*cli.Command)) {
	fn(cmd)
	for _, sub := range cmd.Commands {
		walk(sub, fn)
	}
}

func TestEveryFlagHasEnvVar(t *testing.T) {
	t.Parallel()
	walk(newApp(&bytes.Buffer{}, &bytes.Buffer{}), func(cmd *cli.Command) {
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			if name == "help" {
				continue
			}
			doc, ok := f.(cli.DocGenerationFlag)
			require.True(t, ok, "flag %s of %s", name, cmd.FullName())
			assert.Contains(t, doc.GetEnvVars(), envName(name), "flag --%s of %q must be settable from the environment", name, cmd.FullName())
		}
	})
}

func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	var paths [][]string
	var collect func(cmd *cli.Command, prefix []string)
	collect = func(cmd *cli.Command, prefix []string) {
		for _, sub := range cmd.Commands {
			p := append(append([]string{}, prefix...), sub.Name)
			paths = append(paths, p)
			collect(sub, p)
		}
	}
	collect(newApp(&bytes.Buffer{}, &bytes.Buffer{}), nil)
	require.NotEmpty(t, paths)
	for _, p := range paths {
		var out, errOut bytes.Buffer
		args := append(append([]string{"sundial"}, p...), "--help")
		code := run(context.Background(), args, &out, &errOut)
		assert.Equal(t, 0, code, "%v: %s", args, errOut.String())
		assert.Contains(t, out.String(), "USAGE", "%v prints usage", args)
		assert.NotEmpty(t, newApp(&bytes.Buffer{}, &bytes.Buffer{}).Usage)
	}
}
