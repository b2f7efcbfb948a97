package main

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v3"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the build's version and Go toolchain",
		Action: func(_ context.Context, cmd *cli.Command) error {
			info, ok := debug.ReadBuildInfo()
			if !ok {
				return fmt.Errorf("build information is not available")
			}
			fmt.Fprintf(cmd.Root().Writer, "sundial %s (%s)\n", info.Main.Version, info.GoVersion)
			return nil
		},
	}
}
