package bench

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// asynqTaskType is the one task type of the peer run.
const asynqTaskType = "bench:run"

// asynqPeer runs a plan's workload on asynq over the same Redis (queue:
// chains of ProcessAt tasks, TaskID = the run id).
type asynqPeer struct {
	*peerRun
	rc      *redis.Client
	client  *asynq.Client
	srv     *asynq.Server
	queue   string
	workers int
	check   time.Duration
}

// payload of a task: the job index and the due time in unix ms.
func encodeTask(job uint32, dueMs int64) []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint32(b, job)
	binary.BigEndian.PutUint64(b[4:], uint64(dueMs))
	return b
}

func decodeTask(b []byte) (uint32, int64, error) {
	if len(b) != 12 {
		return 0, 0, fmt.Errorf("task payload of %d bytes, want 12", len(b))
	}
	return binary.BigEndian.Uint32(b), int64(binary.BigEndian.Uint64(b[4:])), nil
}

func (a *asynqPeer) schedule(ctx context.Context, job uint32, dueMs int64) error {
	runID := a.plan.JobID(int(job)) + "@" + strconv.FormatInt(dueMs, 10)
	_, err := a.client.EnqueueContext(ctx, asynq.NewTask(asynqTaskType, encodeTask(job, dueMs)),
		asynq.ProcessAt(time.UnixMilli(dueMs)), asynq.TaskID(runID), asynq.Queue(a.queue), asynq.MaxRetry(3), asynq.Retention(time.Hour))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil // already enqueued: the chain goes on once
	}
	return err
}

func (a *asynqPeer) handle(ctx context.Context, t *asynq.Task) error {
	job, dueMs, err := decodeTask(t.Payload())
	if err != nil {
		return fmt.Errorf("%w: %w", asynq.SkipRetry, err)
	}
	retry, _ := asynq.GetRetryCount(ctx)
	return a.execute(ctx, job, dueMs, retry+1, a.schedule)
}

func (a *asynqPeer) start(context.Context) error {
	mux := asynq.NewServeMux()
	mux.HandleFunc(asynqTaskType, a.handle)
	return a.srv.Start(mux)
}

func (a *asynqPeer) stop(ctx context.Context) {
	a.srv.Shutdown()
	insp := asynq.NewInspectorFromRedisClient(a.rc)
	_ = insp.DeleteQueue(a.queue, true)
	// DeleteQueue leaves the hashes of the tasks asynq completed (kept for
	// their retention, without a TTL of their own). Left behind, they grew
	// the stack's Redis by about 50,000 keys a run, and with them the AOF
	// rewrites (a forked child writing the whole dataset) that stalled
	// later runs for seconds.
	_ = deleteKeys(ctx, a.rc, "asynq:{"+a.queue+"}:*")
	_ = a.rc.Close()
}

func (a *asynqPeer) note() string {
	return fmt.Sprintf("asynq v0.26.0 over the same Redis: each job a chain of ProcessAt tasks (TaskID = run id), %d workers, DelayedTaskCheckInterval %s; %d handler errors; no dispatch latency (asynq has no separate dispatch step)",
		a.workers, a.check, a.errs.Load())
}

// runAsynq runs the same workload (same jobs, rate, phases and window
// length) on asynq.
func (b *Bench) runAsynq(ctx context.Context, cfg *Config, ns Namespace) (System, error) {
	check := cmp.Or(cfg.AsynqDelayedCheck, 5*time.Second)
	cfg.AsynqDelayedCheck = check
	return b.runQueue(ctx, cfg, ns, "asynq", []string{"redis"}, func(p *peerRun, workers int) (queue, error) {
		cfg.AsynqConcurrency = workers
		rc := redis.NewClient(&redis.Options{Addr: b.Backends.RedisAddr, PoolSize: 128})
		queue := "bench-" + ns.ID
		b.say("asynq: delayed-task check every %s, queue %s", check, queue)
		return &asynqPeer{peerRun: p, rc: rc, client: asynq.NewClientFromRedisClient(rc), queue: queue, workers: workers, check: check,
			srv: asynq.NewServerFromRedisClient(rc, asynq.Config{Concurrency: workers, Queues: map[string]int{queue: 1},
				DelayedTaskCheckInterval: check, LogLevel: asynq.ErrorLevel, ShutdownTimeout: 10 * time.Second})}, nil
	})
}
