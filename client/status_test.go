package client_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sundialhq/sundial/client"
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
// whose status partition held no recent record. The race depends on the
// order in which the two lookups reach the broker, so the scenario is run
// several times, each on a new cluster.
func TestWaitStatusReadsAnAnswerWrittenWhileItFindsItsStart(t *testing.T) {
	t.Parallel()
	const rounds = 10
	for round := range rounds {
		if !answerWrittenDuringLookup(t) {
			t.Fatalf("round %d of %d: the answer written while WaitStatus looked up its start offsets was never read", round+1, rounds)
		}
	}
}

// answerWrittenDuringLookup runs the scenario once on a new cluster and
// reports whether WaitStatus read the answer.
func answerWrittenDuringLookup(t *testing.T) bool {
	t.Helper()
	names := topics.Names{}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.SeedTopics(topics.JobsPartitions, names.Jobs()),
		kfake.SeedTopics(topics.JobsStatusPartitions, names.JobsStatus()))
	require.NoError(t, err)
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	c, err := client.New(client.Config{Brokers: brokers, Topics: names})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	receipt, err := c.Apply(ctx, spec("ops.rollup"))
	require.NoError(t, err)

	// The registry's producer, on connections of its own.
	registry, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer registry.Close()
	answer := statusRecord(t, names, receipt)
	details, err := kadm.NewClient(registry).ListTopics(ctx, names.JobsStatus())
	require.NoError(t, err)
	statusID := details[names.JobsStatus()].ID // fetches name topics by id

	// After the broker answers the first lookup by time on the status
	// topic (nothing there: the topic is empty), the next request it
	// handles waits until the answer is written.
	var (
		armedBy           atomic.Pointer[kmsg.ListOffsetsRequest]
		written, produced atomic.Bool
		answerPartition   atomic.Int32
		answerOffset      atomic.Int64
	)
	cluster.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		list := req.(*kmsg.ListOffsetsRequest)
		for _, tp := range list.Topics {
			for _, p := range tp.Partitions {
				if tp.Topic == names.JobsStatus() && p.Timestamp >= 0 && !written.Load() {
					armedBy.CompareAndSwap(nil, list)
				}
			}
		}
		return nil, nil, false // the cluster answers
	})
	cluster.Control(func(r kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		// Not the lookup itself (its controls run before the broker
		// answers it): the request the broker handles after it.
		if by := armedBy.Load(); by != nil && kmsg.Request(by) != r && written.CompareAndSwap(false, true) {
			cluster.SleepControl(func() {
				if err := registry.ProduceSync(ctx, answer).FirstErr(); err != nil {
					t.Errorf("produce the answer: %v", err)
					return
				}
				answerPartition.Store(answer.Partition)
				answerOffset.Store(answer.Offset)
				produced.Store(true)
			})
		}
		return nil, nil, false
	})

	// Reading ends as soon as a fetch of the answer's partition starts past
	// the answer: nothing would ever bring it back.
	skipped := make(chan struct{})
	var closed atomic.Bool
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			for _, p := range tp.Partitions {
				if (tp.Topic == names.JobsStatus() || tp.TopicID == statusID) && produced.Load() && p.Partition == answerPartition.Load() &&
					p.FetchOffset > answerOffset.Load() && closed.CompareAndSwap(false, true) {
					close(skipped)
				}
			}
		}
		return nil, nil, false
	})
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-skipped:
			stop()
		case <-waitCtx.Done():
		}
	}()

	statuses, err := c.WaitStatus(waitCtx, receipt)
	if err != nil {
		require.True(t, produced.Load(), "the answer was never written: %v", err)
		t.Logf("wait: %v (the answer is at %s[%d]@%d)", err, names.JobsStatus(), answerPartition.Load(), answerOffset.Load())
		return false
	}
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, statuses[0].GetOutcome())
	require.True(t, produced.Load(), "the scenario did not happen: no lookup by time")
	return true
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

	c, err := client.New(client.Config{Brokers: brokers, Topics: names})
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
