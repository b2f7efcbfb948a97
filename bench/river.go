package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverVersion is the River release of the peer, named in the report.
const riverVersion = "v0.51.2"

// riverArgs are a River job's arguments: the job index and the due time in
// unix ms, the run id's two parts. Unique by its arguments, so scheduling
// an occurrence twice inserts it once.
type riverArgs struct {
	Job   uint32 `json:"job" river:"unique"`
	DueMs int64  `json:"due_ms" river:"unique"`
}

// Kind names the one kind of job of the peer run.
func (riverArgs) Kind() string { return "bench_run" }

// riverPeer runs a plan's workload on River over PostgreSQL, in a schema
// of the run's own: each job a chain of jobs scheduled at their due times
// (ScheduledAt), unique by (job, due time).
type riverPeer struct {
	*peerRun
	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	schema  string
	workers int
}

// riverWorker executes the peer's jobs.
type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	p *riverPeer
}

func (w *riverWorker) Work(ctx context.Context, job *river.Job[riverArgs]) error {
	return w.p.execute(ctx, job.Args.Job, job.Args.DueMs, job.Attempt, w.p.schedule)
}

func (r *riverPeer) schedule(ctx context.Context, job uint32, dueMs int64) error {
	_, err := r.client.Insert(ctx, riverArgs{Job: job, DueMs: dueMs}, &river.InsertOpts{
		ScheduledAt: time.UnixMilli(dueMs), MaxAttempts: 4,
		UniqueOpts: river.UniqueOpts{ByArgs: true},
	})
	return err
}

func (r *riverPeer) start(ctx context.Context) error { return r.client.Start(ctx) }

func (r *riverPeer) stop(ctx context.Context) {
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = r.client.Stop(stop)
	_, _ = r.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{r.schema}.Sanitize()+" CASCADE")
	r.pool.Close()
}

func (r *riverPeer) note() string {
	return fmt.Sprintf("River %s over PostgreSQL (schema %s): each job a chain of jobs with ScheduledAt (unique by job and due time), %d workers, River's defaults otherwise (its scheduler makes scheduled jobs available every 5 s, not configurable); %d worker errors; no dispatch latency",
		riverVersion, r.schema, r.workers, r.errs.Load())
}

// runRiver runs the same workload (same jobs, rate, phases and window
// length) on River, on the PostgreSQL at Backends.PostgresURL.
func (b *Bench) runRiver(ctx context.Context, cfg *Config, ns Namespace) (System, error) {
	if b.Backends.PostgresURL == "" {
		return System{Name: "river"}, errors.New("river: no PostgreSQL: start it with deploy/local/postgres.sh up and pass --postgres-url (SUNDIAL_POSTGRES_URL)")
	}
	return b.runQueue(ctx, cfg, ns, "river", []string{"postgres"}, func(p *peerRun, workers int) (queue, error) {
		pc, err := pgxpool.ParseConfig(b.Backends.PostgresURL)
		if err != nil {
			return nil, fmt.Errorf("river: postgres url: %w", err)
		}
		pc.MaxConns = int32(min(workers+16, 200))
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return nil, fmt.Errorf("river: postgres: %w", err)
		}
		schema := "bench_" + ns.ID
		if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
			pool.Close()
			return nil, fmt.Errorf("river: create schema: %w", err)
		}
		driver := riverpgxv5.New(pool)
		m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		}
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("river: migrate: %w", err)
		}
		peer := &riverPeer{peerRun: p, pool: pool, schema: schema, workers: workers}
		workersReg := river.NewWorkers()
		river.AddWorker(workersReg, &riverWorker{p: peer})
		peer.client, err = river.NewClient(driver, &river.Config{
			Schema:  schema,
			Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
			Workers: workersReg,
			Logger:  slog.New(slog.DiscardHandler),
		})
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("river: client: %w", err)
		}
		b.say("river: schema %s on %s", schema, redactURL(b.Backends.PostgresURL))
		return peer, nil
	})
}
