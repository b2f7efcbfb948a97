package topics

import (
	"fmt"
	"time"
)

// Base names of the topics; Names puts its prefix in front of them.
const (
	baseJobs       = "sundial.jobs"
	baseJobsStatus = "sundial.jobs.status"
	baseTriggers   = "sundial.triggers"
	baseRuns       = "sundial.runs."
	baseEvents     = "sundial.events"
	baseDLQ        = "sundial.dlq"
	baseShards     = "sundial.shards"
	baseExecutors  = "sundial.executors"
)

// Priority selects one of the run topics.
type Priority string

// Run priorities; each has its own topic so that a backlog of low-priority
// runs does not delay high-priority ones.
const (
	PriorityHigh    Priority = "high"
	PriorityDefault Priority = "default"
	PriorityLow     Priority = "low"
)

// Priorities lists the priorities from highest to lowest.
func Priorities() []Priority {
	return []Priority{PriorityHigh, PriorityDefault, PriorityLow}
}

// Valid reports whether p is a defined priority.
func (p Priority) Valid() bool {
	switch p {
	case PriorityHigh, PriorityDefault, PriorityLow:
		return true
	}
	return false
}

// Names gives the topic names of one installation. The zero value names the
// production topics; tests set Prefix (for example testenv's TopicPrefix).
type Names struct {
	// Prefix is prepended verbatim to every base name.
	Prefix string
}

// Group is the default consumer group base of this installation: base
// after the prefix ("<prefix>sundial-registry"). Two installations sharing
// a Kafka cluster under their own prefixes then never join each other's
// groups (which would rebalance both). Every component's default group is
// made here.
func (n Names) Group(base string) string { return n.Prefix + base }

// Jobs is sundial.jobs: job definitions keyed by job id; a tombstone deletes.
func (n Names) Jobs() string { return n.Prefix + baseJobs }

// JobsStatus is sundial.jobs.status: the registry's per-job status (accepted,
// rejected with a reason), keyed by job id.
func (n Names) JobsStatus() string { return n.Prefix + baseJobsStatus }

// Triggers is sundial.triggers: requests to run a job now, keyed by job id.
func (n Names) Triggers() string { return n.Prefix + baseTriggers }

// Runs is sundial.runs.<priority>: runs for runners, keyed by job id. An
// undefined priority panics: priorities come from validated job specs.
func (n Names) Runs(p Priority) string {
	if !p.Valid() {
		panic(fmt.Sprintf("topics: undefined priority %q", p))
	}
	return n.Prefix + baseRuns + string(p)
}

// AllRuns returns the run topics from highest to lowest priority.
func (n Names) AllRuns() []string {
	out := make([]string, 0, 3)
	for _, p := range Priorities() {
		out = append(out, n.Runs(p))
	}
	return out
}

// Direct is sundial.runs.direct.<executor>: the runs a router chose that
// executor for, keyed by run id. Only that executor subscribes to it, so the
// consumer group gives its partitions to that executor alone. executor must
// be a valid topic name part (jobspec.CheckExecutorID).
func (n Names) Direct(executor string) string { return n.Prefix + baseRuns + "direct." + executor }

// Events is sundial.events: every state change of every run, keyed by job id.
func (n Names) Events() string { return n.Prefix + baseEvents }

// DLQ is sundial.dlq: runs whose attempts are exhausted, for replay.
func (n Names) DLQ() string { return n.Prefix + baseDLQ }

// Shards is sundial.shards: one partition per shard, used for shard
// ownership through a consumer group and carrying wake-ups for the shard's
// owner (see package enqueue).
func (n Names) Shards() string { return n.Prefix + baseShards }

// Executors is sundial.executors: each executor's newest announcement (its
// heartbeat), keyed by executor id; a tombstone says it stopped cleanly.
func (n Names) Executors() string { return n.Prefix + baseExecutors }

// Partition counts of the fixed-size topics.
const (
	JobsPartitions       = 16
	JobsStatusPartitions = 4
	TriggersPartitions   = 8
	RunsPartitions       = 16
	// DirectPartitions is the partition count of a directed topic
	// (Direct): one consumer reads it, so one partition keeps its runs in
	// the order they were routed.
	DirectPartitions = 1
	EventsPartitions = 16
	DLQPartitions    = 4
	// ExecutorsPartitions is small: an announcement per executor per
	// heartbeat is little traffic, and a reader consumes every partition.
	ExecutorsPartitions = 4
)

// Retention of the time-retained topics.
const (
	RunsRetention     = 7 * 24 * time.Hour
	EventsRetention   = 7 * 24 * time.Hour
	TriggersRetention = 7 * 24 * time.Hour
	DLQRetention      = 30 * 24 * time.Hour
	// ShardsRetention bounds how long all dispatchers may be down without
	// losing an entry that exists only as a wake-up: one written behind its
	// shard's watermark (an overdue trigger or retry), which bucket reads
	// after the watermark never see. A week, like the runs it becomes.
	ShardsRetention = 7 * 24 * time.Hour
)

// Spec is how one topic is created.
type Spec struct {
	Name       string
	Partitions int32
	// Configs are topic-level configs set at creation.
	Configs map[string]string
	// PerShard marks the topic whose partition count is the shard count.
	PerShard bool
}

// Specs returns every topic of an installation with S = shards.
func (n Names) Specs(shards int) ([]Spec, error) {
	if shards <= 0 || shards > 1<<20 {
		return nil, fmt.Errorf("topic specs: shards %d: must be in [1, %d]", shards, 1<<20)
	}
	compact := map[string]string{"cleanup.policy": "compact"}
	retained := func(d time.Duration) map[string]string {
		return map[string]string{"cleanup.policy": "delete", "retention.ms": fmt.Sprint(d.Milliseconds())}
	}
	specs := []Spec{
		{Name: n.Jobs(), Partitions: JobsPartitions, Configs: compact},
		{Name: n.JobsStatus(), Partitions: JobsStatusPartitions, Configs: compact},
		{Name: n.Triggers(), Partitions: TriggersPartitions, Configs: retained(TriggersRetention)},
	}
	for _, name := range n.AllRuns() {
		specs = append(specs, Spec{Name: name, Partitions: RunsPartitions, Configs: retained(RunsRetention)})
	}
	specs = append(specs,
		Spec{Name: n.Events(), Partitions: EventsPartitions, Configs: retained(EventsRetention)},
		Spec{Name: n.DLQ(), Partitions: DLQPartitions, Configs: retained(DLQRetention)},
		Spec{Name: n.Shards(), Partitions: int32(shards), Configs: retained(ShardsRetention), PerShard: true},
		Spec{Name: n.Executors(), Partitions: ExecutorsPartitions, Configs: compact},
		n.AuditSpec(),
	)
	return specs, nil
}
