// Command teamworker is a team's Sundial worker, the main.go of
// docs/workers.md's quickstart: it needs the API's address and the team's
// token, nothing else, and executes the runs of the team's jobs whose
// target is the handler "hello".
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sundialhq/sundial/worker"
)

// hello is the handler: its effect is a log line, keyed by the run's id.
func hello(_ context.Context, r *worker.Run) error {
	r.Log.Info("hello from my function", "run_id", r.ID, "attempt", r.Attempt, "replay", r.Replay)
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "teamworker:", err)
		os.Exit(1)
	}
}

func run() error {
	// --api-url, --api-token, --pool, ... or SUNDIAL_API_URL, ... or the
	// file --config names: the CLI's keys (docs/configuration.md).
	cfg, err := worker.Load(os.Args[1:])
	if err != nil {
		return err
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	w, err := worker.New(cfg)
	if err != nil {
		return err
	}
	w.Handle("hello", hello)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return w.Run(ctx)
}
