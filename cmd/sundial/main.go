// Command sundial is the single binary of the Sundial scheduler. Every
// component (registry, dispatcher, runner, DAG engine, tools) is a subcommand;
// main only wires flags to configuration, starts, and waits for a signal.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/urfave/cli/v3"
)

func main() {
	// The first SIGINT or SIGTERM cancels ctx, which every subcommand runs
	// under, so that services drain and computations stop. Handling is then
	// handed back to the runtime: a second signal ends the process at once,
	// whatever the command is blocked in.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	file, err := loadConfigFile(configPath(args))
	if err != nil {
		fmt.Fprintf(stderr, "sundial: %v\n", err)
		return 1
	}
	app := newAppWithConfig(stdout, stderr, file)
	if err := file.attach(app); err != nil {
		fmt.Fprintf(stderr, "sundial: %v\n", err)
		return 1
	}
	if err := app.Run(ctx, args); err != nil {
		fmt.Fprintf(stderr, "sundial: %v\n", err)
		return 1
	}
	return 0
}

// newApp builds the command tree without a config file.
func newApp(stdout, stderr io.Writer) *cli.Command {
	return newAppWithConfig(stdout, stderr, &configFile{})
}

// newAppWithConfig builds the command tree. Subcommands are defined in the
// files of this package, one file per command, each a thin layer over a
// library package. file is what config print reports; run attaches it to
// every flag.
func newAppWithConfig(stdout, stderr io.Writer, file *configFile) *cli.Command {
	return &cli.Command{
		Name:      "sundial",
		Usage:     "a Kafka-partitioned distributed job scheduler",
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			// Read before the command line is parsed (configPath); declared
			// here so that it is accepted anywhere on the line and shown in
			// help.
			&cli.StringFlag{Name: "config", Usage: "YAML file of settings: keys are flag names, sections are commands (see docs/configuration.md)", Sources: envVar("config")},
		},
		// The commands by what a user does with them; `sundial --help`
		// lists them in these groups. docs/architecture.md §2 says which
		// backend each one touches.
		Commands: slices.Concat(
			inCategory("Servers (the long-running processes)",
				registryCommand(), dispatcherCommand(), runnerCommand(), historyCommand(), apiCommand(), devCommand()),
			inCategory("Team work (jobs, runs, DAGs)",
				jobsCommand(), triggerCommand(), runsCommand(), dlqCommand(), dagCommand(), eventsCommand()),
			inCategory("Operations (teams, access, capacity, health)",
				teamsCommand(), tokensCommand(), quotasCommand(), auditCommand(), clusterCommand(), executorsCommand()),
			inCategory("Tools",
				migrateCommand(), configCommand(file), scheduleCommand(), benchCommand(), loadgenCommand(), versionCommand()),
		),
	}
}

// inCategory files cmds under one heading of `sundial --help`.
func inCategory(category string, cmds ...*cli.Command) []*cli.Command {
	for _, c := range cmds {
		c.Category = category
	}
	return cmds
}
