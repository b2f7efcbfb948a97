package main

import (
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/internal/configfile"
)

// envVar returns the value source for a flag: every flag named "foo-bar" can
// also be set with SUNDIAL_FOO_BAR. TestEveryFlagHasEnvVar keeps this true.
func envVar(flag string) cli.ValueSourceChain {
	return cli.EnvVars(envName(flag))
}

func envName(flag string) string { return configfile.EnvName(flag) }
