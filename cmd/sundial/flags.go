package main

import (
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/internal/configfile"
)

// envVar returns the value source for a flag: every flag named "foo-bar" can
// also be set with SUNDIAL_FOO_BAR. TestEveryFlagHasEnvVar keeps this true.
func envVar(flag string) cli.ValueSourceChain {
	return cli.EnvVars(envName(flag))
}

func envName(flag string) string { return configfile.EnvName(flag) }

// oneArg returns the command's single argument, or an error naming what
// it is (the name) when there is not exactly one or it is empty: the one
// check of every command that takes one id.
func oneArg(cmd *cli.Command, name string) (string, error) {
	if cmd.Args().Len() != 1 || cmd.Args().First() == "" {
		return "", fmt.Errorf("want exactly one argument, the %s; got %d", name, cmd.Args().Len())
	}
	return cmd.Args().First(), nil
}
