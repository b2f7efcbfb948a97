package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/checkpoint"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// Jobs reads stored job definitions (*cassandra.Store, *memory.Store).
type Jobs interface {
	GetJob(ctx context.Context, id string) (store.Job, error)
}

// Producer produces definitions and triggers and reads the registry's
// answers (*client.Client).
type Producer interface {
	Apply(ctx context.Context, spec *sundialv1.JobSpec) (client.Receipt, error)
	WaitStatus(ctx context.Context, receipts ...client.Receipt) ([]*sundialv1.JobStatus, error)
	SendTrigger(ctx context.Context, t *sundialv1.Trigger) (client.Receipt, error)
}

// Leases says whether a run holds a live lease (*leasing.Store).
type Leases interface {
	Holding(ctx context.Context, jobID, runID string) (bool, error)
	Done(ctx context.Context, jobID, runID string) (bool, error)
	Revoke(ctx context.Context, jobID, runID string) (bool, error)
}

// Enqueuer stores due entries and wakes their shards (*enqueue.Enqueuer).
type Enqueuer interface {
	Enqueue(ctx context.Context, entries ...store.DueEntry) error
}

// Recorder receives one Action per operator action that changed
// something. The audit trail implements it.
type Recorder interface {
	Record(ctx context.Context, a Action) error
}

// Action is what an operator did, for the audit trail.
type Action struct {
	// Kind is "pause", "resume", "cancel", "suspend", "resume-run",
	// "retry", "trigger" or "backfill".
	Kind  string
	JobID string
	// Team owns the job; filled from the stored definition when the
	// action did not read it.
	Team string
	// RunID is the run acted on (cancel, trigger); empty otherwise.
	RunID string
	// Detail says more in a few words (a backfill's range and count).
	Detail string
	At     time.Time
}

// Config configures an Operator. Each action needs only some of the
// fields; an action whose fields are missing fails naming them.
type Config struct {
	// Jobs reads the definitions in force. Needed by Pause, Resume,
	// Backfill and PlanApply.
	Jobs Jobs
	// Producer produces definitions and triggers. Needed by Pause, Resume
	// and Trigger.
	Producer Producer
	// Leases and Redis find and signal a running run. Needed by Cancel
	// (Leases also by Backfill, to skip runs already done).
	Leases Leases
	Redis  redis.UniversalClient
	// RunnerKeyPrefix is the runners' runner.Config.KeyPrefix. Needed by
	// Cancel.
	RunnerKeyPrefix string
	// Kafka are the client options (seed brokers included) of the events
	// follower, and Topics the topic names. Needed to wait for a result
	// and by Backfill.
	Kafka  []kgo.Opt
	Topics topics.Names
	// Enqueuer enqueues backfilled runs, resumed ones and retries. Needed
	// by Backfill, ResumeRun and Retry.
	Enqueuer Enqueuer
	// History reads the run history. Needed by Retry.
	History History
	// Checkpoints keeps the suspended runs. Needed by ResumeRun.
	Checkpoints checkpoint.Store
	// Shards is the cluster's shard count. Needed by PlanApply and
	// Forecast.
	Shards int
	// Due reads the schedule's buckets. Needed by Forecast.
	Due Due
	// Members counts the live executors of a pool (the length of
	// discovery.Directory.Live), for the load of a BROADCAST job in
	// PlanApply. Optional: nil counts such a job's occurrence as one run
	// and says its load is a lower bound.
	Members func(pool string) int
	// Audit receives an Action for every change made; nil records nothing.
	Audit Recorder
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Operator carries out operator actions. It holds no goroutine between
// calls; it is safe for concurrent use.
type Operator struct {
	cfg Config
}

// New returns an Operator. It does no I/O.
func New(cfg Config) *Operator {
	cfg.Now = deps.Clock(cfg.Now)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Operator{cfg: cfg}
}

// Sentinels callers branch on.
var (
	// ErrNotFound: the job does not exist or was deleted.
	ErrNotFound = errors.New("not found")
	// ErrNotRunning: the run holds no live lease, so no runner executes it.
	ErrNotRunning = errors.New("not running")
	// ErrRejected: the registry rejected the definition produced.
	ErrRejected = errors.New("rejected by the registry")
)

// need reports the Config fields an action lacks.
func (o *Operator) need(action string, fields map[string]bool) error {
	var errs []error
	for name, ok := range fields {
		if !ok {
			errs = append(errs, fmt.Errorf("operator: %s: Config.%s: required", action, name))
		}
	}
	return errors.Join(errs...)
}

// record hands a to the audit trail, if any. A failure is logged, not
// returned: the action is done and cannot be taken back.
func (o *Operator) record(ctx context.Context, a Action) {
	if o.cfg.Audit == nil {
		return
	}
	a.At = o.cfg.Now()
	if a.Team == "" && o.cfg.Jobs != nil {
		if _, spec, err := o.job(ctx, a.JobID); err == nil {
			a.Team = spec.GetOwnerTeam()
		}
	}
	if err := o.cfg.Audit.Record(ctx, a); err != nil {
		o.cfg.Logger.Error("audit record not written", "action", a.Kind, "job", a.JobID, "run", a.RunID, "err", err)
	}
}

// job returns the definition in force of id.
func (o *Operator) job(ctx context.Context, id string) (store.Job, *sundialv1.JobSpec, error) {
	job, err := o.cfg.Jobs.GetJob(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && job.Deleted:
		return store.Job{}, nil, fmt.Errorf("job %q: %w", id, ErrNotFound)
	case err != nil:
		return store.Job{}, nil, fmt.Errorf("read job %q: %w", id, err)
	}
	spec, err := decodeSpec(job.Spec)
	if err != nil {
		return store.Job{}, nil, fmt.Errorf("job %q: the stored definition does not decode: %w", id, err)
	}
	return job, spec, nil
}
