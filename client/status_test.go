package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/startoffsets/startoffsetstest"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestWaitStatusReadsAnAnswerWrittenWhileItFindsItsStart: the registry's
// answer lands in a partition of sundial.jobs.status holding no record
// since the definition, right after the broker answered WaitStatus's
// lookup by time ("nothing there yet") and before the waiter looked up the
// partition's end. Such an answer must still be read.
//
// A consumer starting "after a millisecond" with franz-go lists by time and
// the end at once and, finding nothing by time, starts at the end: an
// answer appended between the two lookups is skipped for good. On a loaded
// machine this lost the answer to `sundial jobs apply` for a definition
// whose status partition held no recent record.
func TestWaitStatusReadsAnAnswerWrittenWhileItFindsItsStart(t *testing.T) {
	t.Parallel()
	startoffsetstest.Rounds(t, 10, func(t *testing.T) {
		names := topics.Names{}
		// The writer is the registry's producer.
		race := startoffsetstest.Start(t, []kfake.Opt{
			kfake.SeedTopics(topics.JobsPartitions, names.Jobs()),
			kfake.SeedTopics(topics.JobsStatusPartitions, names.JobsStatus()),
		})
		c, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(race.Brokers()...)}, Topics: names})
		require.NoError(t, err)
		defer c.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a hang, not a timing
		defer cancel()
		receipt, err := c.Apply(ctx, spec("ops.rollup"))
		require.NoError(t, err)
		race.Arm(statusRecord(t, names, receipt))

		// WaitStatus blocks until it reads the answer: it is stopped as
		// soon as it fetches the answer's partition from past the answer.
		waitCtx, stop := race.UntilSkipped(ctx)
		defer stop()
		statuses, err := c.WaitStatus(waitCtx, receipt)
		require.True(t, race.Written(), "the answer was never written: WaitStatus made no lookup by time (wait: %v)", err)
		require.NoError(t, err, "the answer written while WaitStatus looked up its start offsets was never read: %s", race)
		require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, statuses[0].GetOutcome())
	})
}

// statusRecord is the registry's answer to the definition of receipt.
func statusRecord(t *testing.T, names topics.Names, receipt client.Receipt) *kgo.Record {
	t.Helper()
	st := &sundialv1.JobStatus{
		Subject:  &sundialv1.JobStatus_JobId{JobId: receipt.ID},
		Source:   &sundialv1.RecordSource{Topic: receipt.Topic, Partition: receipt.Partition, Offset: receipt.Offset},
		Accepted: true,
		Outcome:  sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED,
	}
	value, err := sundialv1.EncodingProtobuf.Marshal(st)
	require.NoError(t, err)
	return &kgo.Record{
		Topic:   names.JobsStatus(),
		Key:     []byte(receipt.ID),
		Value:   value,
		Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeProtobuf)}},
	}
}

// TestWaitStatusSkipsAnUndecodableStatus: a record of sundial.jobs.status
// that does not decode, in the partition of the answer and before it, is
// reported (Statuses yields ErrUndecodableStatus) and skipped: WaitStatus
// still returns the answer written after it.
func TestWaitStatusSkipsAnUndecodableStatus(t *testing.T) {
	t.Parallel()
	names := topics.Names{}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.SeedTopics(topics.JobsPartitions, names.Jobs()),
		kfake.SeedTopics(topics.JobsStatusPartitions, names.JobsStatus()))
	require.NoError(t, err)
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	c, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Topics: names})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	receipt, err := c.Apply(ctx, spec("ops.rollup"))
	require.NoError(t, err)

	registry, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer registry.Close()
	poison := &kgo.Record{
		Topic:   names.JobsStatus(),
		Key:     []byte(receipt.ID),
		Value:   []byte{0xff, 0xff, 0xff},
		Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeProtobuf)}},
	}
	answer := statusRecord(t, names, receipt)
	require.NoError(t, registry.ProduceSync(ctx, poison).FirstErr())
	require.NoError(t, registry.ProduceSync(ctx, answer).FirstErr())
	require.Equal(t, poison.Partition, answer.Partition, "the bad record must sit before the answer in its partition")

	// Statuses reports the bad record, then yields the answer.
	var reported error
	for st, err := range c.Statuses(ctx, receipt.Timestamp.Add(-time.Minute)) {
		if err != nil {
			require.ErrorIs(t, err, client.ErrUndecodableStatus)
			reported = err
			continue
		}
		require.Equal(t, receipt.ID, st.GetJobId())
		break
	}
	require.Error(t, reported, "the bad record was not reported")

	statuses, err := c.WaitStatus(ctx, receipt)
	require.NoError(t, err)
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, statuses[0].GetOutcome())
}
