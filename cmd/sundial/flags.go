package main

import (
	"strings"

	"github.com/urfave/cli/v3"
)

// envVar returns the value source for a flag: every flag named "foo-bar" can
// also be set with SUNDIAL_FOO_BAR. TestEveryFlagHasEnvVar keeps this true.
func envVar(flag string) cli.ValueSourceChain {
	return cli.EnvVars(envName(flag))
}

func envName(flag string) string {
	return "SUNDIAL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}
