package client_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/registry"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
	"github.com/sundialhq/sundial/trigger"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.GocqlSchemaAgreement())
}

// spec is a valid definition owned by the team its id starts with
// (<owner_team>.<name>).
func spec(id string) *sundialv1.JobSpec {
	team, _, _ := strings.Cut(id, ".")
	return &sundialv1.JobSpec{
		Id:        id,
		OwnerTeam: team,
		Schedule: &sundialv1.Schedule{
			Kind:     &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: durationpb.New(time.Hour)}},
			TimeZone: "UTC",
		},
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}},
	}
}

func TestParseJSON(t *testing.T) {
	t.Parallel()
	one, err := os.ReadFile("../proto/sundial/v1/testdata/jobspec/cron-http.json")
	require.NoError(t, err)
	other, err := os.ReadFile("../proto/sundial/v1/testdata/jobspec/delay.json")
	require.NoError(t, err)

	specs, err := client.ParseJSON(one)
	require.NoError(t, err)
	require.Len(t, specs, 1)
	assert.Equal(t, "billing.nightly-invoices", specs[0].GetId())

	specs, err = client.ParseJSON([]byte("[" + string(one) + ",\n" + string(other) + "]"))
	require.NoError(t, err)
	require.Len(t, specs, 2)
	assert.Equal(t, "orders.cancel-unpaid-8812", specs[1].GetId())

	_, err = client.ParseJSON([]byte(`[{"id":"a"}, {"id":"b","ownerTeem":"x"}]`))
	assert.ErrorContains(t, err, "job definition [1]")
	assert.ErrorContains(t, err, "ownerTeem")
	_, err = client.ParseJSON([]byte(" "))
	assert.ErrorContains(t, err, "empty")
	_, err = client.ParseJSON([]byte("[]"))
	assert.ErrorContains(t, err, "array is empty")
	_, err = client.ParseJSON([]byte("[1,"))
	assert.ErrorContains(t, err, "array of job definitions")
}

// TestInvalidIsNotProduced: local validation fails before any connection is
// made (the broker address is unreachable).
func TestInvalidIsNotProduced(t *testing.T) {
	t.Parallel()
	c, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	bad := spec("team.a@b")
	bad.Schedule.TimeZone = "Nowhere/City"
	_, err = c.ApplyAll(ctx, sundialv1.EncodingProtobuf, spec("team.fine"), bad)
	var ve *jobspec.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "team.a@b", ve.JobID)
	fields := []string{}
	for _, e := range ve.Errors {
		fields = append(fields, e.Field)
	}
	assert.Equal(t, []string{"id", "schedule.time_zone"}, fields)

	_, err = c.Delete(ctx, "")
	require.ErrorAs(t, err, &ve)
	_, err = c.Trigger(ctx, "job", "")
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "idempotency_key", ve.Errors[0].Field)

	_, err = client.New(client.Config{})
	assert.ErrorContains(t, err, "kafka: required")
}

// TestClientAgainstRegistry: apply, re-apply, reject, delete and trigger
// through a registry and a trigger consumer on a real Kafka (with the
// in-memory store: the registry's own tests cover Cassandra).
func TestClientAgainstRegistry(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const shards = 4
	names := topics.Names{Prefix: k.TopicPrefix}

	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	_, err = st.InitCluster(ctx, shards)
	require.NoError(t, err)
	producer, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))
	require.NoError(t, err)
	defer producer.Close()
	all, err := names.Specs(shards)
	require.NoError(t, err)
	all = slices.DeleteFunc(all, func(s topics.Spec) bool {
		return !slices.Contains([]string{names.Jobs(), names.JobsStatus(), names.Triggers(), names.Shards(), names.Events()}, s.Name)
	})
	_, err = topics.Ensure(ctx, kadm.NewClient(producer), all, -1)
	require.NoError(t, err)
	enq, err := enqueue.New(enqueue.Config{Store: st, Client: producer, Topics: names, Shards: shards})
	require.NoError(t, err)
	quiet := slog.New(slog.DiscardHandler)
	reg, err := registry.New(registry.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Store: st, Waker: enq, Logger: quiet, SharedTopic: true})
	require.NoError(t, err)
	require.NoError(t, reg.Start(ctx))
	defer reg.Stop()
	trig, err := trigger.New(trigger.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Store: st, Enqueuer: enq, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, trig.Start(ctx))
	defer trig.Stop()

	c, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Logger: quiet})
	require.NoError(t, err)
	defer c.Close()

	r1, err := c.Apply(ctx, spec("ops.rollup"))
	require.NoError(t, err)
	assert.Equal(t, names.Jobs(), r1.Topic)
	r2, err := c.ApplyJSON(ctx, []byte(`[
		{"id": "ops.rollup", "ownerTeam": "ops", "target": {"handler": {"name": "noop"}}},
		{"id": "ops.report", "ownerTeam": "ops", "target": {"handler": {"name": "noop"}}, "paused": true}
	]`))
	require.NoError(t, err)
	r3, err := c.Delete(ctx, "ops.report")
	require.NoError(t, err)

	statuses, err := c.WaitStatus(ctx, r1, r2[0], r2[1], r3)
	require.NoError(t, err)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, statuses[0].GetOutcome())
	assert.NotNil(t, statuses[0].GetNextDueTime())
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, statuses[1].GetOutcome())
	assert.Nil(t, statuses[1].GetNextDueTime(), "no schedule any more")
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, statuses[2].GetOutcome())
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, statuses[3].GetOutcome())
	for i, s := range statuses {
		assert.NoError(t, client.FieldErrors(s), "status %d", i)
	}

	// Only definitions are answered on the status topic.
	tr, err := c.Trigger(ctx, "ops.rollup", "ticket-1")
	require.NoError(t, err)
	_, err = c.WaitStatus(ctx, tr)
	assert.ErrorContains(t, err, "only definitions and deletes are answered")

	// The trigger becomes a due entry of kind trigger, due at the record's
	// timestamp; the same key again changes nothing.
	again, err := c.Trigger(ctx, "ops.rollup", "ticket-1")
	require.NoError(t, err)
	due := tr.Timestamp.UTC().Truncate(time.Millisecond)
	require.Eventually(t, func() bool {
		return len(triggerEntries(t, st, "ops.rollup", due, shards)) == 1
	}, time.Minute, 20*time.Millisecond)
	// The second trigger is processed after the first (same key, same
	// partition); a third with a new key marks when it has been.
	third, err := c.Trigger(ctx, "ops.rollup", "ticket-2")
	require.NoError(t, err)
	thirdDue := third.Timestamp.UTC().Truncate(time.Millisecond)
	require.Eventually(t, func() bool {
		return len(triggerEntries(t, st, "ops.rollup", thirdDue, shards)) == 1
	}, time.Minute, 20*time.Millisecond)
	// The third trigger may share the repeated one's millisecond, so only
	// an entry of the repeated key counts.
	againDue := again.Timestamp.UTC().Truncate(time.Millisecond)
	if !againDue.Equal(due) {
		for _, e := range triggerEntries(t, st, "ops.rollup", againDue, shards) {
			tr := &sundialv1.Trigger{}
			require.NoError(t, proto.Unmarshal(e.Payload, tr))
			assert.NotEqual(t, "ticket-1", tr.GetIdempotencyKey(), "the repeated key ran again: %v", e)
		}
	}

	// A rejection comes back with its fields; the client refuses to send
	// invalid definitions, so this one is produced by hand.
	rec := &kgo.Record{Topic: names.Jobs(), Key: []byte("ops.bad"), Value: []byte(`{"id":"ops.bad","ownerTeam":"t"}`),
		Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}}}
	require.NoError(t, producer.ProduceSync(ctx, rec).FirstErr())
	statuses, err = c.WaitStatus(ctx, client.Receipt{ID: "ops.bad", Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp})
	require.NoError(t, err)
	err = client.FieldErrors(statuses[0])
	assert.ErrorContains(t, err, "target.kind: required")

	// WaitStatus gives up with ctx.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	_, err = c.WaitStatus(short, client.Receipt{Topic: names.Jobs(), Partition: 0, Offset: 1 << 40, Timestamp: time.Now()})
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}

func triggerEntries(t *testing.T, st *memory.Store, jobID string, due time.Time, shards int) []store.DueEntry {
	var out []store.DueEntry
	for e, err := range st.ListBucket(t.Context(), store.BucketOf(due), store.ShardOf(jobID, shards)) {
		require.NoError(t, err)
		if e.JobID == jobID && e.Kind == store.KindTrigger && e.Due.Equal(due) {
			out = append(out, e)
		}
	}
	return out
}
