package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// DefaultMaxInFlight bounds the definitions ApplyMany has produced and not
// yet seen answered. It keeps the client's memory bounded however many
// definitions stream in, and is far above what one registry answers in a
// second, so it does not limit the rate.
const DefaultMaxInFlight = 100_000

// ApplyOptions configure ApplyMany.
type ApplyOptions struct {
	// Encoding of the records produced: the registry answers in the same.
	// Default protobuf.
	Encoding sundialv1.Encoding
	// MaxInFlight bounds the definitions produced and not yet answered;
	// producing waits while it is reached. Default DefaultMaxInFlight.
	MaxInFlight int
	// OnProduced, if set, is called once Kafka acknowledged a definition.
	OnProduced func(Receipt)
	// OnResult, if set, is called with every result as it is known, in no
	// particular order. Calls are serialised.
	OnResult func(ApplyResult)
}

// ApplyResult is what became of one definition.
type ApplyResult struct {
	// ID is the definition's job id.
	ID string
	// Receipt names the record produced; zero when nothing was produced.
	Receipt Receipt
	// Status is the registry's answer. A definition refused by local
	// validation (the registry's own rules) is not produced and gets a
	// REJECTED status with its field errors and no source. Nil when Err is
	// set.
	Status *sundialv1.JobStatus
	// Err says why the definition could not be produced.
	Err error
}

// ApplySummary counts the results of ApplyMany.
type ApplySummary struct {
	// Read is how many definitions the input yielded; Produced how many
	// Kafka acknowledged; Answered how many the registry answered.
	Read, Produced, Answered int
	// By outcome, rejections by the client included in Rejected.
	Created, Updated, Unchanged, Stale, Rejected int
	// Failed counts definitions that could not be produced.
	Failed int
	// Rejections and Failures keep those results, in the order they were
	// known.
	Rejections, Failures []ApplyResult
}

// ApplyMany validates and produces every definition specs yields, without
// waiting for one before producing the next, and returns once each produced
// definition is answered by the registry. Answers are matched by the
// source they name (topic, partition, offset), as WaitStatus does, so
// answers to other records of the same job are ignored; the status topic
// is read from before the first produce, so no answer is missed. An
// invalid definition is not produced; it is counted rejected with its
// fields and the others go on. The error is ctx's (with the summary so
// far) when it ends before every answer, or names the definitions that
// could not be produced.
func (c *Client) ApplyMany(ctx context.Context, specs iter.Seq[*sundialv1.JobSpec], opts ApplyOptions) (ApplySummary, error) {
	enc := cmp.Or(opts.Encoding, sundialv1.EncodingProtobuf)
	b := &bulk{
		names:   c.cfg.Topics,
		opts:    opts,
		slots:   make(chan struct{}, cmp.Or(opts.MaxInFlight, DefaultMaxInFlight)),
		pending: map[source]Receipt{},
		early:   map[source]*sundialv1.JobStatus{},
		unacked: map[string]int{},
		idle:    make(chan struct{}, 1),
	}
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	produceCtx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	since := time.Now().Add(-statusSkew)
	reading := make(chan error, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		reading <- b.read(c.Statuses(readCtx, since), c.definitionsTopic)
	}()

	for spec := range specs {
		if ctx.Err() != nil {
			break
		}
		b.mu.Lock()
		b.sum.Read++
		b.mu.Unlock()
		if errs := c.cfg.Limits.ValidateSpec(spec); len(errs) > 0 {
			st := &sundialv1.JobStatus{Subject: &sundialv1.JobStatus_JobId{JobId: jobspec.ValidUTF8(spec.GetId())}}
			jobspec.Reject(st, errs)
			b.deliver(ApplyResult{ID: spec.GetId(), Status: st})
			continue
		}
		value, err := enc.Marshal(spec)
		if err != nil {
			b.deliver(ApplyResult{ID: spec.GetId(), Err: fmt.Errorf("encode job %q: %w", spec.GetId(), err)})
			continue
		}
		topic, err := c.specTopic(spec)
		if err != nil {
			b.deliver(ApplyResult{ID: spec.GetId(), Err: fmt.Errorf("apply job %q: %w", spec.GetId(), err)})
			continue
		}
		select {
		case b.slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		b.mu.Lock()
		b.unacked[spec.GetId()]++
		b.outstanding++
		b.mu.Unlock()
		rec := &kgo.Record{
			Topic:   topic,
			Key:     []byte(spec.GetId()),
			Value:   value,
			Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(enc.String())}},
		}
		b.callbacks.Add(1)
		c.producer.Produce(produceCtx, rec, b.produced)
	}
	// Once produceCtx ends, the producer fails what it still holds at once;
	// no callback runs after ApplyMany returned.
	stop := func() {
		stopProducing()
		b.callbacks.Wait()
		stopReading()
		<-readDone
	}

	for {
		b.mu.Lock()
		done := b.outstanding == 0
		b.mu.Unlock()
		if done {
			break
		}
		select {
		case <-b.idle:
		case err := <-reading:
			// The status reader ended before every answer: ctx ended (or the
			// client could not be built).
			stop()
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.summary(), fmt.Errorf("apply: %d of %d definitions not answered: %w", b.sum.Produced-b.sum.Answered, b.sum.Read, err)
		}
	}
	stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return b.summary(), fmt.Errorf("apply: stopped after %d definitions: %w", b.sum.Read, err)
	}
	if n := len(b.sum.Failures); n > 0 {
		return b.summary(), fmt.Errorf("apply: %d definitions not produced, first: %w", n, b.sum.Failures[0].Err)
	}
	return b.summary(), nil
}

type source struct {
	topic     string
	partition int32
	offset    int64
}

// bulk is the state of one ApplyMany: what is produced and not answered,
// and the answers that came before their produce was acknowledged.
type bulk struct {
	names topics.Names
	opts  ApplyOptions
	slots chan struct{}
	idle  chan struct{}

	mu  sync.Mutex
	sum ApplySummary
	// outstanding counts definitions produced (or being produced) and not
	// yet answered or failed.
	outstanding int
	// pending holds the receipt of each acknowledged record until answered.
	pending map[source]Receipt
	// callbacks counts produces whose callback has not returned.
	callbacks sync.WaitGroup
	// unacked counts, per job id, produces not yet acknowledged: only
	// answers for those ids are kept in early.
	unacked map[string]int
	early   map[source]*sundialv1.JobStatus
}

// produced is the producer's callback for one definition.
func (b *bulk) produced(rec *kgo.Record, err error) {
	defer b.callbacks.Done()
	id := string(rec.Key)
	b.mu.Lock()
	if b.unacked[id]--; b.unacked[id] <= 0 {
		delete(b.unacked, id)
	}
	if err != nil {
		b.mu.Unlock()
		b.finish(ApplyResult{ID: id, Err: ProduceError("apply", rec, err)})
		return
	}
	r := receiptOf(b.names, id, rec)
	b.sum.Produced++
	src := source{rec.Topic, rec.Partition, rec.Offset}
	st, answered := b.early[src]
	if answered {
		delete(b.early, src)
	} else {
		b.pending[src] = r
	}
	if len(b.unacked) == 0 {
		clear(b.early) // answers to records of other producers
	}
	b.mu.Unlock()
	if b.opts.OnProduced != nil {
		b.opts.OnProduced(r)
	}
	if answered {
		b.finish(ApplyResult{ID: id, Receipt: r, Status: st})
	}
}

// read matches the answers on the status topic to the records produced,
// until the statuses end (ctx ended) and returns why they ended.
func (b *bulk) read(statuses iter.Seq2[*sundialv1.JobStatus, error], ours func(topic string) bool) error {
	for st, err := range statuses {
		if errors.Is(err, ErrUndecodableStatus) {
			continue // someone else's bad record
		}
		if err != nil {
			return err
		}
		s := st.GetSource()
		if !ours(s.GetTopic()) {
			continue
		}
		src := source{s.GetTopic(), s.GetPartition(), s.GetOffset()}
		b.mu.Lock()
		r, ok := b.pending[src]
		if ok {
			delete(b.pending, src)
		} else if b.unacked[st.GetJobId()] > 0 {
			if _, seen := b.early[src]; !seen {
				b.early[src] = st
			}
		}
		b.mu.Unlock()
		if ok {
			b.finish(ApplyResult{ID: r.ID, Receipt: r, Status: st})
		}
	}
	return errors.New("status reader ended")
}

// finish records the result of a produced definition and frees its slot.
func (b *bulk) finish(r ApplyResult) {
	b.deliver(r)
	<-b.slots
	b.mu.Lock()
	b.outstanding--
	b.mu.Unlock()
	select {
	case b.idle <- struct{}{}:
	default:
	}
}

// deliver counts a result and hands it to OnResult.
func (b *bulk) deliver(r ApplyResult) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case r.Err != nil:
		b.sum.Failed++
		b.sum.Failures = append(b.sum.Failures, r)
	default:
		if r.Receipt.Topic != "" {
			b.sum.Answered++
		}
		switch r.Status.GetOutcome() {
		case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED:
			b.sum.Created++
		case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED:
			b.sum.Updated++
		case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UNCHANGED:
			b.sum.Unchanged++
		case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_STALE:
			b.sum.Stale++
		case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED:
			b.sum.Rejected++
			b.sum.Rejections = append(b.sum.Rejections, r)
		}
	}
	if b.opts.OnResult != nil {
		b.opts.OnResult(r) // under mu: calls are serialised
	}
}

func (b *bulk) summary() ApplySummary {
	s := b.sum
	s.Rejections = append([]ApplyResult(nil), s.Rejections...)
	s.Failures = append([]ApplyResult(nil), s.Failures...)
	return s
}

// Limits returns the limits the client validates definitions with.
func (c *Client) Limits() jobspec.Limits { return c.cfg.Limits }
