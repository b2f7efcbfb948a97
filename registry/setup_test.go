package registry_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/registry"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.GocqlSchemaAgreement())
}

// shards is S in the tests: small, so topics are cheap to create.
const shards = 8

// TestOnRealStack runs the integration tests on Kafka and Cassandra. They
// share one keyspace (schema changes are the slowest thing a busy Cassandra
// node does) and each has topics of its own, so they run in parallel
// without seeing each other's records; job ids differ between them.
func TestOnRealStack(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	tests := []struct {
		name string
		fn   func(t *testing.T, s *stack)
	}{
		{"Ownership", testOwnership},
		{"MalformedInterleaved", testMalformedInterleaved},
		{"DefinitionLifecycle", testDefinitionLifecycle},
		{"TransientErrorsAreRetried", testTransientErrorsAreRetried},
		{"RegistrationRate", testRegistrationRate},
		{"StartStopTwice", testStartStopTwice},
		{"ReplayOfChangedDefinitions", testReplayOfChangedDefinitions},
		{"ResumeReleasesHeld", testResumeReleasesHeld},
		{"ResumeFollowsMisfirePolicy", testResumeFollowsMisfirePolicy},
		{"MaxJobs", testMaxJobs},
		{"JobIDsAreNamespacedByTeam", testJobIDsAreNamespacedByTeam},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, b.stack(t, strings.ToLower(tc.name)))
		})
	}
}

// backend is the Kafka cluster and the migrated keyspace the tests share.
type backend struct {
	brokers []string
	prefix  string
	store   *cassandra.Store
	// cassandra is the keyspace, for reads the store does not offer.
	cassandra testenv.Cassandra
}

func newBackend(t *testing.T) *backend {
	t.Helper()
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cfg := cassandra.Config{Hosts: c.Hosts, Keyspace: c.Keyspace, SchemaTimeout: 2 * time.Minute}
	_, err := cassandra.Migrate(ctx, cfg)
	require.NoError(t, err)
	st, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, err = st.InitCluster(ctx, shards)
	require.NoError(t, err)
	return &backend{brokers: k.Brokers, prefix: k.TopicPrefix, store: st, cassandra: c}
}

// stack is one test's own installation: topics with its prefix (inside the
// backend's, so testenv deletes them), a producer, a status reader, and
// registries started on demand.
type stack struct {
	t       *testing.T
	brokers []string
	names   topics.Names
	store   *cassandra.Store
	waker   *enqueue.Enqueuer
	// producer produces definitions (and is the enqueuer's client).
	producer *kgo.Client
	// statuses reads sundial.jobs.status from the start.
	statuses *statusReader
	backend  *backend
}

func (b *backend) stack(t *testing.T, name string) *stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	names := topics.Names{Prefix: b.prefix + name + "."}
	all, err := names.Specs(shards)
	require.NoError(t, err)
	var specs []topics.Spec
	for _, s := range all {
		if slices.Contains([]string{names.Jobs(), names.JobsStatus(), names.Triggers(), names.Shards(), names.Events()}, s.Name) {
			specs = append(specs, s)
		}
	}
	producer, err := kgo.NewClient(
		kgo.SeedBrokers(b.brokers...),
		kgo.RecordPartitioner(enqueue.Partitioner(names, nil)),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	require.NoError(t, err)
	t.Cleanup(producer.Close)
	_, err = topics.Ensure(ctx, kadm.NewClient(producer), specs, -1)
	require.NoError(t, err)
	waker, err := enqueue.New(enqueue.Config{Store: b.store, Client: producer, Topics: names, Shards: shards})
	require.NoError(t, err)

	s := &stack{t: t, brokers: b.brokers, names: names, store: b.store, waker: waker, producer: producer, backend: b}
	s.statuses = newStatusReader(t, b.brokers, names.JobsStatus())
	return s
}

// startRegistry starts a registry in group and stops it at cleanup.
func (s *stack) startRegistry(group string, mutate ...func(*registry.Config)) (*registry.Registry, *prometheus.Registry) {
	s.t.Helper()
	reg := prometheus.NewRegistry()
	cfg := registry.Config{
		Kafka:      []kgo.Opt{kgo.SeedBrokers(s.brokers...)},
		Topics:     s.names,
		Group:      group,
		Store:      s.store,
		Waker:      s.waker,
		Registerer: reg,
		Logger:     slog.New(slog.DiscardHandler),
		RetryMin:   10 * time.Millisecond,
		RetryMax:   200 * time.Millisecond,
		// Most tests produce to the shared sundial.jobs; the ownership
		// tests turn it off, as the default is.
		SharedTopic: true,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	r, err := registry.New(cfg)
	require.NoError(s.t, err)
	require.NoError(s.t, r.Start(s.t.Context()))
	s.t.Cleanup(r.Stop)
	return r, reg
}

// produce produces records to sundial.jobs and returns them with their
// offsets.
func (s *stack) produce(recs ...*kgo.Record) []*kgo.Record {
	s.t.Helper()
	for _, r := range recs {
		r.Topic = s.names.Jobs()
	}
	ctx, cancel := context.WithTimeout(s.t.Context(), time.Minute)
	defer cancel()
	require.NoError(s.t, s.producer.ProduceSync(ctx, recs...).FirstErr())
	return recs
}

// jobRecord encodes spec as a record of sundial.jobs in enc.
func jobRecord(t testing.TB, spec *sundialv1.JobSpec, enc sundialv1.Encoding) *kgo.Record {
	t.Helper()
	value, err := enc.Marshal(spec)
	require.NoError(t, err)
	return &kgo.Record{
		Key:     []byte(spec.GetId()),
		Value:   value,
		Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(enc.String())}},
	}
}

// source identifies the record a status answers.
type source struct {
	topic     string
	partition int32
	offset    int64
}

func sourceOf(r *kgo.Record) source { return source{r.Topic, r.Partition, r.Offset} }

// answer is a status with the record that carried it.
type answer struct {
	status      *sundialv1.JobStatus
	key         []byte
	contentType string
}

// statusReader collects every status of the status topic, by source. A
// source can be answered more than once (one answer per processing).
type statusReader struct {
	mu      sync.Mutex
	cond    *sync.Cond
	answers map[source][]answer
	err     error
}

func newStatusReader(t *testing.T, brokers []string, topic string) *statusReader {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	r := &statusReader{answers: map[source][]answer{}}
	r.cond = sync.NewCond(&r.mu)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			r.mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) {
				var ct string
				for _, h := range rec.Headers {
					if h.Key == sundialv1.HeaderContentType {
						ct = string(h.Value)
					}
				}
				st := &sundialv1.JobStatus{}
				if err := sundialv1.Unmarshal(ct, rec.Value, st); err != nil {
					r.err = fmt.Errorf("status at offset %d does not decode: %w", rec.Offset, err)
					return
				}
				src := source{st.GetSource().GetTopic(), st.GetSource().GetPartition(), st.GetSource().GetOffset()}
				r.answers[src] = append(r.answers[src], answer{status: st, key: rec.Key, contentType: ct})
			})
			r.cond.Broadcast()
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.Close()
	})
	return r
}

// wait returns the n-th answer (1-based) to each record, waiting for all of
// them up to a deadline.
func (r *statusReader) wait(t *testing.T, n int, recs ...*kgo.Record) []answer {
	t.Helper()
	// Generous: a slow machine must not fail a correct run. 100,000
	// definitions get 1,000s.
	deadline := time.AfterFunc(max(2*time.Minute, time.Duration(len(recs))*10*time.Millisecond), func() {
		r.mu.Lock()
		r.err = fmt.Errorf("timed out waiting for statuses")
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer deadline.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		require.NoError(t, r.err)
		missing := 0
		for _, rec := range recs {
			if len(r.answers[sourceOf(rec)]) < n {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		r.cond.Wait()
	}
	out := make([]answer, len(recs))
	for i, rec := range recs {
		out[i] = r.answers[sourceOf(rec)][n-1]
	}
	return out
}

// count returns how many answers the record has had.
func (r *statusReader) count(rec *kgo.Record) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.answers[sourceOf(rec)])
}

// dueEntries lists the entries of a job in the bucket of due.
func (s *stack) dueEntries(jobID string, due time.Time) []store.DueEntry {
	s.t.Helper()
	var out []store.DueEntry
	for e, err := range s.store.ListBucket(s.t.Context(), store.BucketOf(due), store.ShardOf(jobID, shards)) {
		require.NoError(s.t, err)
		if e.JobID == jobID {
			out = append(out, e)
		}
	}
	return out
}

// cronSpec is a valid definition of a daily cron job, owned by the team its
// id starts with (<owner_team>.<name>).
func cronSpec(id, expr string) *sundialv1.JobSpec {
	team, _, _ := strings.Cut(id, ".")
	return &sundialv1.JobSpec{
		Id:        id,
		OwnerTeam: team,
		Schedule: &sundialv1.Schedule{
			Kind:     &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: expr}},
			TimeZone: "UTC",
			Dst: &sundialv1.DstPolicy{
				Nonexistent: sundialv1.NonexistentTimePolicy_NONEXISTENT_TIME_POLICY_SKIP,
				Ambiguous:   sundialv1.AmbiguousTimePolicy_AMBIGUOUS_TIME_POLICY_FIRST,
			},
		},
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}},
	}
}
