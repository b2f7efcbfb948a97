package trigger_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/internal/testenv"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/trigger"
)

// TestTriggerStartsDagRun runs on Kafka and Cassandra: a trigger naming a
// DAG starts the DAG's run at the trigger's due time, once per idempotency
// key; a paused DAG is refused.
func TestTriggerStartsDagRun(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const shards = 4

	b := newTriggerStack(ctx, t, k, shards)
	st, names, producer, enq := b.store, b.names, b.producer, b.enq
	runs, err := dagengine.NewRuns(dagengine.RunsConfig{Store: st, Enqueuer: enq, Producer: producer, Topics: names, Shards: shards})
	require.NoError(t, err)

	putDag := func(id string, paused bool) {
		spec := &sundialv1.DagSpec{Id: id, OwnerTeam: "ops", Paused: paused, Nodes: []*sundialv1.DagNode{{Id: "only",
			Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
				Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}},
			}}}}}
		_, errs := dag.Compile(spec, dag.Options{})
		require.Empty(t, errs)
		b, err := dag.Marshal(spec)
		require.NoError(t, err)
		_, err = st.PutDag(ctx, store.Dag{ID: id, Spec: b, Revision: 1, UpdatedAt: time.Now()})
		require.NoError(t, err)
	}
	putDag("ops.nightly", false)
	putDag("ops.nightly-paused", true)

	events := newEventReader(t, k.Brokers, names.Events())
	reg := prometheus.NewRegistry()
	consumer, err := trigger.New(trigger.Config{
		Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Store: st, Enqueuer: enq, Dags: runs, Registerer: reg,
		Logger: slog.New(slog.DiscardHandler), RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, consumer.Start(t.Context()))
	defer consumer.Stop()

	now := time.Now().UTC().Truncate(time.Millisecond)
	tr := func(id, key string, at time.Time) *kgo.Record {
		r := record(t, &sundialv1.Trigger{JobId: id, IdempotencyKey: key, RequestedAt: timestamppb.New(at)}, sundialv1.EncodingProtobuf)
		r.Topic, r.Timestamp = names.Triggers(), time.Time{}
		return r
	}
	require.NoError(t, producer.ProduceSync(ctx,
		tr("ops.nightly", "rerun-1", now),
		tr("ops.nightly", "rerun-1", now.Add(700*time.Millisecond)), // resent: a duplicate
		tr("ops.nightly", "rerun-1", now),                           // the same request again: the same run
		tr("ops.nightly", "rerun-2", now.Add(time.Second)),
		tr("ops.nightly-paused", "k", now),
		tr("ops.nothing", "k", now),
	).FirstErr())

	// Every record is processed: each is counted once by outcome.
	outcomes := func() map[string]float64 {
		out := map[string]float64{}
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() == "sundial_trigger_records_total" {
				for _, m := range f.GetMetric() {
					out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
		return out
	}
	require.Eventually(t, func() bool {
		var n float64
		for _, v := range outcomes() {
			n += v
		}
		return n == 6
	}, time.Minute, 20*time.Millisecond, "outcomes %v", outcomes())
	assert.Equal(t, map[string]float64{"dag_started": 3, "duplicate": 1, "paused": 1, "job_deleted": 1}, outcomes())

	for _, due := range []time.Time{now, now.Add(time.Second)} {
		row, err := st.GetDagRun(ctx, dagrun.RunID("ops.nightly", due))
		require.NoError(t, err, "the DAG run due at %s", due)
		assert.Equal(t, dagengine.OriginTrigger, row.Origin)
		state, err := dagrun.Unmarshal(row.State)
		require.NoError(t, err)
		assert.Equal(t, 1, state.Nodes[0].Gen, "the root node was started")
	}
	_, err = st.GetDagRun(ctx, dagrun.RunID("ops.nightly", now.Add(700*time.Millisecond)))
	require.ErrorIs(t, err, store.ErrNotFound, "the resent trigger started no run")
	dagRuns, err := st.ListDagRuns(ctx, "ops.nightly", 10)
	require.NoError(t, err)
	assert.Len(t, dagRuns, 2)
	_, err = st.GetDagRun(ctx, dagrun.RunID("ops.nightly-paused", now))
	require.ErrorIs(t, err, store.ErrNotFound)

	// The refusals are SKIPPED run events; the DAG runs' own events
	// (DagRunEvents) are on the topic too.
	var refused []string
	require.Eventually(t, func() bool {
		refused = refused[:0]
		for _, ev := range events.snapshot() {
			if ev.GetState() == sundialv1.RunState_RUN_STATE_SKIPPED {
				refused = append(refused, ev.GetJobId()+":"+ev.GetReason())
			}
		}
		return len(refused) == 2
	}, time.Minute, 20*time.Millisecond)
	assert.ElementsMatch(t, []string{"ops.nightly-paused:" + trigger.ReasonPaused, "ops.nothing:" + trigger.ReasonJobDeleted}, refused)
}

func isDagRunEvent(rec *kgo.Record) bool {
	for _, h := range rec.Headers {
		if h.Key == sundialv1.HeaderKind && string(h.Value) == sundialv1.KindDagRunEvent {
			return true
		}
	}
	return false
}

// snapshot returns the RunEvents read so far.
func (r *eventReader) snapshot() []*sundialv1.RunEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}
