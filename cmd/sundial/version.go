package main

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/internal/version"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print Sundial's release version, the module version of the build and its Go toolchain",
		Action: func(_ context.Context, cmd *cli.Command) error {
			info, ok := debug.ReadBuildInfo()
			if !ok {
				return fmt.Errorf("build information is not available")
			}
			fmt.Fprintf(cmd.Root().Writer, "sundial %s (module %s, %s)\n", version.Version, info.Main.Version, info.GoVersion)
			return nil
		},
	}
}
