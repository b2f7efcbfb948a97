package telemetry_test

import (
	"context"
	"os"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/telemetry"
)

// How a Sundial process wires its telemetry: one registry, one logger, one
// server; each backend client instrumented under a name; each component's
// readiness registered; ready once everything has started.
func Example() {
	ctx := context.Background()
	log, err := telemetry.NewLogger(os.Stderr, telemetry.LogConfig{Format: "json", Level: "info"})
	if err != nil {
		panic(err)
	}
	reg := telemetry.NewRegistry()
	srv, err := telemetry.NewServer(telemetry.Config{Addr: "127.0.0.1:0", Gatherer: reg, Registerer: reg, Logger: log})
	if err != nil {
		panic(err)
	}
	if err := srv.Start(ctx); err != nil { // /healthz answers from here on
		panic(err)
	}
	defer srv.Stop()

	kafka, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"), telemetry.KafkaMetrics(reg, "runner-producer"))
	if err != nil {
		panic(err)
	}
	defer kafka.Close()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	if err := telemetry.InstrumentRedis(rdb, reg, "leases"); err != nil {
		panic(err)
	}
	_ = srv.AddCheck("kafka", telemetry.KafkaCheck(kafka))
	_ = srv.AddCheck("redis", telemetry.RedisCheck(rdb))
	// A dispatcher adds: srv.AddCheck("shards", telemetry.ShardsCheck(d.Owned))

	// ... construct the components with Registerer: reg and Logger: log,
	// start them, then:
	srv.MarkStarted()

	// Per run, where its context is made:
	runCtx := telemetry.ContextWithRun(ctx, "billing", "billing@1700000000000")
	log.InfoContext(runCtx, "run started") // carries job_id and run_id
}
