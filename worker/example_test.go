package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"

	"github.com/sundialhq/sundial/worker"
)

// A team's worker serves one handler through the API's worker gateway: it
// holds the team's token and no backend credential. The handler's runs
// execute here; the gateway's runner keeps their leases, events and
// retries. (Compiled, not run: it needs `sundial api --worker-gateway`.)
func Example() {
	w, err := worker.New(worker.Config{APIURL: "https://sundial.example.com", Token: os.Getenv("SUNDIAL_TOKEN")})
	if err != nil {
		panic(err)
	}
	w.Handle("billing.invoice", func(ctx context.Context, r *worker.Run) error {
		var inv struct{ Customer string }
		if err := json.Unmarshal(r.Payload, &inv); err != nil {
			return worker.Permanent(fmt.Errorf("payload: %w", err)) // not retried: dead-lettered
		}
		r.Log.Info("invoicing", "customer", inv.Customer)
		return nil // an error other than Permanent is retried by the job's retry policy
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil {
		panic(err)
	}
}
