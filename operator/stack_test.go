package operator_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/bench"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/dispatcher"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/operator"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/registry"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/runner/egress"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/store/cassandra"
	"github.com/sundialhq/sundial/trigger"
)

const shards = 4

// pipeline is one test's own Sundial on the real stack: its topics,
// keyspace and Redis keys, and a registry, trigger consumer, dispatcher and
// runner in this process, with an Operator wired to them as the CLI wires
// it.
type pipeline struct {
	t       *testing.T
	brokers []string
	names   topics.Names
	store   *cassandra.Store
	leases  *leasing.Store
	client  *client.Client
	op      *operator.Operator
	audit   *auditLog
	// steps is the handler "steps" of the pipeline's runner (suspend_test.go).
	steps *stepper
}

func newPipeline(t *testing.T) *pipeline {
	t.Helper()
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	r := testenv.NeedRedis(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	ns := bench.Namespace{ID: "operator", TopicPrefix: k.TopicPrefix, Keyspace: c.Keyspace, RedisPrefix: r.KeyPrefix}
	backends := bench.Backends{Brokers: k.Brokers, CassandraHosts: c.Hosts, RedisAddr: r.Addr}
	require.NoError(t, ns.Setup(ctx, backends, shards))
	names := ns.Names()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))

	st, err := cassandra.Open(ctx, cassandra.Config{Hosts: c.Hosts, Keyspace: c.Keyspace})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rc.Close() })
	enqClient, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))
	require.NoError(t, err)
	t.Cleanup(enqClient.Close)
	enq, err := enqueue.New(enqueue.Config{Store: st, Client: enqClient, Topics: names, Shards: shards, Logger: log})
	require.NoError(t, err)
	leases, err := leasing.New(leasing.Config{Client: rc, KeyPrefix: r.KeyPrefix + "lease:"})
	require.NoError(t, err)
	runnerPrefix := r.KeyPrefix + "runner:"
	steps := &stepper{gate: make(chan struct{}), reached: make(chan struct{})}

	reg, err := registry.New(registry.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Group: k.TopicPrefix + "registry", Store: st, Waker: enq, SharedTopic: true, // the client produces to sundial.jobs
		Registerer: prometheus.NewRegistry(), Logger: log.With("component", "registry")})
	require.NoError(t, err)
	trg, err := trigger.New(trigger.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Group: k.TopicPrefix + "trigger", Store: st, Enqueuer: enq,
		Registerer: prometheus.NewRegistry(), Logger: log.With("component", "trigger")})
	require.NoError(t, err)
	disp, err := dispatcher.New(dispatcher.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Store: st, Topics: names, GroupID: k.TopicPrefix + "dispatchers",
		InstanceID: "operator-dispatcher", Registerer: prometheus.NewRegistry(), Logger: log.With("component", "dispatcher")})
	require.NoError(t, err)
	run, err := runner.New(runner.Config{ID: "operator-runner", Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Group: k.TopicPrefix + "runners",
		Leases: leases, Redis: rc, KeyPrefix: runnerPrefix, Enqueuer: enq, Checkpoints: st,
		Handlers: map[string]target.Handler{"noop": target.HandlerFunc(func(context.Context, *sundialv1.Run) error { return nil }),
			"steps": target.HandlerFunc(steps.handle)},
		Egress:      egress.LoopbackForEveryTeam(), // the test's downstreams listen on loopback
		Concurrency: 32, Registerer: prometheus.NewRegistry(), Logger: log.With("component", "runner")})
	require.NoError(t, err)
	for _, comp := range []interface {
		Start(context.Context) error
		Stop()
	}{reg, trg, disp, run} {
		require.NoError(t, comp.Start(ctx))
		t.Cleanup(comp.Stop)
	}

	cl, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	p := &pipeline{t: t, brokers: k.Brokers, names: names, leases: leases, store: st, client: cl, audit: &auditLog{}, steps: steps}
	p.op = operator.New(operator.Config{Jobs: st, Producer: cl, Leases: leases, Redis: rc, RunnerKeyPrefix: runnerPrefix,
		Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Enqueuer: enq, Checkpoints: st, Shards: shards, Audit: p.audit, Logger: log})
	return p
}

// apply produces a definition and waits until the registry accepted it.
func (p *pipeline) apply(spec *sundialv1.JobSpec) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.t.Context(), time.Minute)
	defer cancel()
	r, err := p.client.Apply(ctx, spec)
	require.NoError(p.t, err)
	st, err := p.client.WaitStatus(ctx, r)
	require.NoError(p.t, err)
	require.True(p.t, st[0].GetAccepted(), "definition refused: %v", st[0])
}

// runEvents describes every event of runID on the pipeline's events topic,
// read from its start, for a failing test to print what it saw.
func (p *pipeline) runEvents(runID string) string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.brokers...), kgo.ConsumeTopics(p.names.Events()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err.Error()
	}
	defer cl.Close()
	var b strings.Builder
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			break
		}
		fs.EachRecord(func(rec *kgo.Record) {
			if ev, ok := operator.RunEvent(rec); ok && ev.GetRunId() == runID {
				fmt.Fprintf(&b, "\n  %s attempt %d %s %s by %s", ev.GetTime().AsTime().Format("15:04:05.000"), ev.GetAttempt(), ev.GetState(), ev.GetReason(), ev.GetRunnerId())
			}
		})
	}
	if b.Len() == 0 {
		return " none"
	}
	return b.String()
}

// auditLog is the Recorder of the tests.
type auditLog struct {
	mu      sync.Mutex
	actions []operator.Action
}

func (a *auditLog) Record(_ context.Context, act operator.Action) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.actions = append(a.actions, act)
	return nil
}

func (a *auditLog) kinds() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, act := range a.actions {
		out = append(out, act.Kind+" "+act.JobID+" "+act.RunID)
	}
	return out
}

// job is a definition that fires only when triggered (a yearly cron at a
// time the tests never reach) and calls target.
func job(id string, tgt *sundialv1.Target) *sundialv1.JobSpec {
	return &sundialv1.JobSpec{
		Id: id, OwnerTeam: "ops",
		Schedule: &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "0 3 1 1 *"}}},
		Target:   tgt,
	}
}

func httpTarget(url string) *sundialv1.Target {
	return &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{Method: http.MethodPost, Url: url}}}
}

func noopTarget() *sundialv1.Target {
	return &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}
}

// downstream is an HTTP target whose answers the test decides.
type downstream struct {
	*httptest.Server
	mu sync.Mutex
	// answer decides each request's answer; it may block.
	answer func(w http.ResponseWriter, r *http.Request, n int)
	// byRun counts requests per run id (the Idempotency-Key).
	byRun map[string]int
	// counted says which runs count in flight (all when nil).
	counted  func(run string) bool
	inFlight int
	maxSeen  int
}

func (d *downstream) count(counted func(run string) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.counted = counted
}

func newDownstream(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) *downstream {
	d := &downstream{answer: answer, byRun: map[string]int{}}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		run := r.Header.Get(target.HeaderIdempotencyKey)
		d.mu.Lock()
		d.byRun[run]++
		n := d.byRun[run]
		counted := d.counted == nil || d.counted(run)
		if counted {
			d.inFlight++
			d.maxSeen = max(d.maxSeen, d.inFlight)
		}
		d.mu.Unlock()
		defer func() {
			if counted {
				d.mu.Lock()
				d.inFlight--
				d.mu.Unlock()
			}
		}()
		d.answer(w, r, n)
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *downstream) requests(run string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byRun[run]
}
