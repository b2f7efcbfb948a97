package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/internal/version"
	"github.com/sundialhq/sundial/runner"
)

// poolFlags say which pool a runner serves, how many of the pool's runs it
// executes at once and what it does when they are all busy; the runner
// announces them on sundial.executors.
func poolFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "pool", Value: discovery.DefaultPool, Usage: "the pool this runner serves, in its announcements on sundial.executors", Sources: envVar("pool")},
		&cli.IntFlag{Name: "pool-slots", Usage: "runs of the pool executing at once on this runner (0: --concurrency); below --concurrency with --pool-blocking discard", Sources: envVar("pool-slots")},
		&cli.StringFlag{Name: "pool-blocking", Value: string(runner.BlockingConcurrent), Usage: "when every slot is busy: fifo (runs wait and start in arrival order), discard (the run is SKIPPED, reason pool_busy, never retried) or concurrent (runs wait; the next is picked by priority)", Sources: envVar("pool-blocking")},
		&cli.StringSliceFlag{Name: "labels", Usage: "key=value labels announced with this runner, comma-separated (zone=a,class=gpu)", Sources: envVar("labels")},
		&cli.DurationFlag{Name: "announce-interval", Value: discovery.DefaultInterval, Usage: "how often the runner announces itself; readers drop it after three intervals without one", Sources: envVar("announce-interval")},
	}
}

// applyPoolFlags sets the pool fields of cfg from the flags.
func applyPoolFlags(cmd *cli.Command, cfg *runner.Config) error {
	var bad []error
	blocking, err := runner.ParsePoolBlocking(cmd.String("pool-blocking"))
	if err != nil {
		bad = append(bad, fmt.Errorf("--pool-blocking: %w", err))
	}
	labels := map[string]string{}
	for _, l := range cmd.StringSlice("labels") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
		if !ok || k == "" {
			bad = append(bad, fmt.Errorf("--labels %q: want key=value", l))
			continue
		}
		labels[k] = v
	}
	if cmd.Int("pool-slots") < 0 {
		bad = append(bad, fmt.Errorf("--pool-slots: %d is negative", cmd.Int("pool-slots")))
	}
	cfg.Pool = cmd.String("pool")
	cfg.PoolSlots = cmd.Int("pool-slots")
	cfg.PoolBlocking = blocking
	cfg.Labels = labels
	cfg.AnnounceInterval = cmd.Duration("announce-interval")
	cfg.Version = version.Version // the release, as `sundial version` prints it
	return errors.Join(bad...)
}
