// Command worker is an example Sundial worker: a Go program that executes
// the runs of jobs whose target is the handler "billing.invoice". It is
// what docs/workers.md builds step by step.
//
// Run it against the local stack:
//
//	source <(deploy/local/stack.sh env) && go run ./examples/worker
//
// and give a job the target {"handler": {"name": "billing.invoice"}}.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/worker"
)

// invoice is the payload of a billing.invoice job.
type invoice struct {
	Customer string `json:"customer"`
	Lines    int    `json:"lines"`
}

// register adds the example's handlers to w.
func register(w *worker.Worker) {
	w.Handle("billing.invoice", invoiceHandler)
}

// invoiceHandler bills one customer. Its effect must be idempotent: a run
// can be delivered twice (a runner dies after the effect, before its
// record), so the downstream call carries r.ID as its idempotency key, and
// r.FencingToken lets the downstream refuse a late write from a runner
// whose lease was taken over.
func invoiceHandler(ctx context.Context, r *worker.Run) error {
	var inv invoice
	if err := json.Unmarshal(r.Payload, &inv); err != nil {
		// Another attempt cannot fix a bad payload: dead-letter it now.
		return worker.Permanent(fmt.Errorf("payload: %w", err))
	}
	if inv.Customer == "" || inv.Lines <= 0 {
		return worker.Permanent(errors.New("payload: customer and a positive lines count are required"))
	}
	r.Log.Info("invoicing", "customer", inv.Customer, "lines", inv.Lines, "idempotency_key", r.ID, "fencing_token", r.FencingToken)
	for i := 1; i <= inv.Lines; i++ {
		select {
		case <-ctx.Done():
			// The job's timeout passed or the lease was lost: stop; the
			// runner records the outcome and retries as the job says.
			return ctx.Err()
		case <-time.After(10 * time.Millisecond): // stands for the work of one line
		}
		r.Progress(int64(i), int64(inv.Lines), "line billed")
	}
	r.Log.Info("invoice sent", "customer", inv.Customer)
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run() error {
	env := func(name, def string) string {
		if v := os.Getenv("SUNDIAL_" + name); v != "" {
			return v
		}
		return def
	}
	list := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	brokers := flag.String("kafka-brokers", env("KAFKA_BROKERS", ""), "Kafka seed brokers, comma-separated (SUNDIAL_KAFKA_BROKERS)")
	redisAddr := flag.String("redis-addr", env("REDIS_ADDR", ""), "Redis of the leases, host:port (SUNDIAL_REDIS_ADDR)")
	hosts := flag.String("cassandra-hosts", env("CASSANDRA_HOSTS", ""), "Cassandra contact points, comma-separated (SUNDIAL_CASSANDRA_HOSTS)")
	keyspace := flag.String("keyspace", env("KEYSPACE", ""), "Cassandra keyspace (SUNDIAL_KEYSPACE; default the installation's)")
	prefix := flag.String("topic-prefix", env("TOPIC_PREFIX", ""), "topic name prefix of the installation (SUNDIAL_TOPIC_PREFIX)")
	pool := flag.String("pool", env("POOL", worker.DefaultPool), "pool to join (SUNDIAL_POOL)")
	concurrency := flag.Int("concurrency", worker.DefaultConcurrency, "runs executing at once")
	metricsAddr := flag.String("metrics-addr", env("METRICS_ADDR", ""), "serve /metrics here, e.g. :9466 (empty: no metrics server)")
	flag.Parse()

	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	reg := prometheus.NewRegistry()
	w, err := worker.New(worker.Config{
		Pool: *pool, Kafka: []kgo.Opt{kgo.SeedBrokers(list(*brokers)...)}, TopicPrefix: *prefix, RedisAddr: *redisAddr,
		CassandraHosts: list(*hosts), Keyspace: *keyspace, Concurrency: *concurrency,
		Registerer: reg, Logger: logger,
	})
	if err != nil {
		return err
	}
	register(w)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *metricsAddr != "" {
		srv := &http.Server{Addr: *metricsAddr, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics server", "err", err)
			}
		}()
		defer func() {
			_ = srv.Close()
			<-served
		}()
	}
	logger.Info("worker started", "pool", *pool)
	return w.Run(ctx)
}
