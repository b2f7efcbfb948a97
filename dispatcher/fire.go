package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/internal/tracing"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// producer writes records and waits for their acknowledgement; *kgo.Client
// is one.
type producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Reasons an entry fires no run (the label of entries_dropped_total).
const (
	dropDead    = "dead"
	dropMisfire = "misfire"
	dropInvalid = "invalid"
)

// plan is what firing one entry does: the runs to emit and the next
// occurrence to store first.
type plan struct {
	runs []*sundialv1.Run
	next *store.DueEntry
	// drop names why no run is emitted, when none is and that is final.
	drop string
	// hold: the job is paused; the entry moves to the job's held set
	// (hold.go) rather than firing.
	hold bool
	// why explains a drop, for the log.
	why string
	// covered, for a late scheduled entry, is the time up to which this
	// firing stands for every occurrence of the job.
	covered time.Time
	// fromJob: the runs were built from the job's definition at revision
	// jobRev.
	fromJob bool
	jobRev  int64
	// snapshot: the job was the snapshot the entry carries.
	snapshot bool
}

// fireResult is the outcome of one firing, reported to the owner's loop.
type fireResult struct {
	entry store.DueEntry
	// err: the firing failed and is to be tried again.
	err error
	// next is the stored next occurrence, for the core.
	next *store.DueEntry
	// covered: see plan.covered.
	covered time.Time
	// nextLate: next is overdue and still part of a catch-up (the rest of a
	// capped FIRE_ALL).
	nextLate bool
}

// fire carries out one firing: it plans the runs (with the job from memory,
// or read, up to PrepareAhead before the firing time), checks at the firing
// time that a job taken from memory is still the job's (else plans again),
// produces the runs and waits for Kafka's acknowledgement, then stores the
// next occurrence of a recurring job. Both happen before the owner hears the firing is done, so the shard's
// watermark never passes an occurrence whose successor is not stored: a crash
// in between fires the current occurrence again (same run id), never loses
// the next one. Storing the successor only after the run is acknowledged
// makes a stored successor proof that its predecessor was emitted, which lets
// a new owner skip the entries of a chain that have successors (core.go).
func (o *owner) fire(firingCtx context.Context, epoch int64, f firing) fireResult {
	// Planning is bounded by FireTimeout; producing and the next
	// occurrence's write only by the firing's context (see below).
	ctx, cancel := context.WithTimeout(firingCtx, o.cfg.FireTimeout)
	defer cancel()
	res := fireResult{entry: f.Entry}
	now := o.cfg.Now()
	// With the jobs feed fresh, the job comes from memory (read with its
	// bucket), and must still be the job's at the firing time.
	fromMemory := o.jobs != nil && o.jobs.usable(now)
	p, err := o.plan(ctx, f, now)
	o.m.firePhase.WithLabelValues("plan").Observe(o.cfg.Now().Sub(now).Seconds())
	if err != nil {
		res.err = err
		return res
	}
	if len(p.runs) > 0 {
		// Prepared ahead of time: the run goes out at its firing time,
		// never before.
		if err := o.waitFor(ctx, f); err != nil {
			res.err = err
			return res
		}
		if fromMemory && p.fromJob && !o.stillCurrent(f.Entry, p) {
			// The job changed during the wait (or memory can no longer
			// be trusted): plan again with the definition in force.
			o.m.jobCache.WithLabelValues("replan").Inc()
			if p, err = o.plan(ctx, f, o.cfg.Now()); err != nil {
				res.err = err
				return res
			}
		}
	}
	if p.hold {
		if err := o.hold(ctx, f.Entry); err != nil {
			res.err = err
		}
		return res
	}
	if p.drop != "" {
		o.m.dropped.WithLabelValues(p.drop).Inc()
		o.log.Debug("entry fires no run", "run_id", f.Entry.RunID, "kind", f.Entry.Kind, "reason", p.drop, "why", p.why)
	}
	if len(p.runs) > 0 {
		at := o.cfg.Now()
		// The wait for the acknowledgement ends with the firing's
		// context, not with this attempt's: a record the client has taken
		// is either acknowledged or failed by it (RecordDeliveryTimeout),
		// and producing it again while it may still be delivered would
		// emit the run twice.
		if err := o.produce(firingCtx, epoch, f.Entry, p.runs, at); err != nil {
			res.err = err
			return res
		}
		o.m.firePhase.WithLabelValues("produce").Observe(o.cfg.Now().Sub(at).Seconds())
	}
	if p.next != nil {
		start := o.cfg.Now()
		defer func() { o.m.firePhase.WithLabelValues("chain").Observe(o.cfg.Now().Sub(start).Seconds()) }()
		// The runs are out; failing now would fire them again, once per
		// attempt for as long as the store is slow or out of reach. So the
		// write (each try bounded by FireTimeout in writeNext) is retried
		// until it succeeds or the firing's context ends: the shard is
		// given up, and the next owner fires the occurrence again under the
		// same run id.
		retry := backoff.New(50*time.Millisecond, time.Second)
		for tries := 1; ; tries++ {
			err := o.putNext(firingCtx, *p.next)
			if err == nil {
				break
			}
			if firingCtx.Err() != nil {
				res.err = fmt.Errorf("store next occurrence %s: %w", p.next.RunID, err)
				return res
			}
			o.m.fireErrors.Inc()
			// Every firing in flight retries on its own: with the store
			// away for minutes, a warning per try was thousands of lines a
			// second per dispatcher (2.6 million in the chaos bench's
			// three-minute Cassandra outage). The first try of each firing
			// warns; the rest count in the metric and log at debug level.
			level := slog.LevelDebug
			if tries == 1 {
				level = slog.LevelWarn
			}
			o.log.Log(firingCtx, level, "cannot store next occurrence; will try again", "run_id", p.next.RunID, "tries", tries, "err", err)
			retry.Wait(firingCtx) // an ended context fails the next try
		}
		res.next = p.next
		res.nextLate = f.Late && !p.next.Due.After(now)
	}
	res.covered = p.covered
	return res
}

// stillCurrent says at the firing time whether the job p was planned from
// (in memory, or the entry's snapshot) is still the job's.
func (o *owner) stillCurrent(e store.DueEntry, p plan) bool {
	if p.snapshot {
		s, _ := snapshotOf(e)
		_, ok := o.jobs.snapshotUsable(e, s, o.cfg.Now())
		return ok
	}
	return o.jobs.unchanged(e.JobID, p.jobRev)
}

// waitFor waits until the firing time of f.
func (o *owner) waitFor(ctx context.Context, f firing) error {
	wait := f.At.Sub(o.cfg.Now())
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the due time of %s: %w", f.Entry.RunID, ctx.Err())
	}
}

// readJob returns the job of entry e, from memory when the jobs feed allows
// it, else from the store, and when it was read.
func (o *owner) readJob(ctx context.Context, e store.DueEntry) (store.Job, time.Time, error) {
	if o.jobs != nil {
		return o.jobs.get(ctx, e.JobID, e.Due)
	}
	at := o.cfg.Now()
	job, err := o.store.GetJob(ctx, e.JobID)
	return job, at, err
}

// produce writes the runs to their topics and waits for the
// acknowledgements. A run whose record Kafka refused for good (see
// classifyProduce) is dead-lettered instead, so that the firing counts as
// done; any other failure fails the firing, which is tried again.
func (o *owner) produce(ctx context.Context, epoch int64, e store.DueEntry, runs []*sundialv1.Run, now time.Time) error {
	recs := make([]*kgo.Record, 0, len(runs))
	byRec := make(map[*kgo.Record]*sundialv1.Run, len(runs))
	dispatched := timestamppb.New(now)
	spans := o.fireSpans(ctx, runs)
	defer func() {
		for _, s := range spans {
			s.End()
		}
	}()
	for i, r := range runs {
		r.Shard = uint32(o.shard)
		r.Epoch = epoch
		r.DispatchedAt = dispatched
		if spans[i].IsRecording() {
			spans[i].SetAttributes(attribute.Int64("sundial.epoch", epoch))
		}
		value, err := proto.Marshal(r)
		if err != nil {
			o.m.dropped.WithLabelValues(dropInvalid).Inc()
			o.log.Error("run does not encode; dropped", "run_id", r.GetRunId(), "err", err)
			continue
		}
		rec := &kgo.Record{
			Topic:   o.topics.Runs(priorityOf(r.GetPriority())),
			Key:     []byte(r.GetJobId()),
			Value:   value,
			Headers: topics.ProtobufHeaders(r),
		}
		recs = append(recs, rec)
		byRec[rec] = r
	}
	var refused []refusedRun
	for _, res := range o.prod.ProduceSync(ctx, recs...) {
		if res.Err == nil {
			continue
		}
		run := byRec[res.Record]
		if run == nil { // not acknowledged in time: the client still has it
			return fmt.Errorf("produce %d runs of %s: %w", len(recs), e.RunID, res.Err)
		}
		v := classifyProduce(res.Err, len(res.Record.Value), res.Record.Topic)
		if i := slices.Index(runs, run); i >= 0 {
			spans[i].SetStatus(codes.Error, res.Err.Error())
		}
		if !v.deadLetter {
			return fmt.Errorf("produce %d runs of %s: %w", len(recs), e.RunID, res.Err)
		}
		refused = append(refused, refusedRun{run: run, runErr: v.runErr})
	}
	if len(refused) > 0 {
		if err := o.deadLetter(ctx, refused); err != nil {
			return fmt.Errorf("dead-letter %d refused runs of %s: %w", len(refused), e.RunID, err)
		}
	}
	acked := o.cfg.Now()
	delivered := make([]*sundialv1.Run, 0, len(recs))
	for _, rec := range recs {
		if r := byRec[rec]; !slices.ContainsFunc(refused, func(f refusedRun) bool { return f.run == r }) {
			delivered = append(delivered, r)
		}
	}
	for _, r := range delivered {
		origin := originLabel(r.GetOrigin())
		o.m.runs.WithLabelValues(origin).Inc()
		o.m.teamRuns.WithLabelValues(r.GetOwnerTeam()).Inc()
		o.m.dispatchLatency.WithLabelValues(origin).Observe(acked.Sub(r.GetAttemptDueTime().AsTime()).Seconds())
	}
	o.enqueued(ctx, delivered)
	if o.observe != nil && len(delivered) > 0 {
		o.observe(delivered, acked)
	}
	return nil
}

// fireSpans starts the span of each run's firing and sets the run's
// traceparent to it, so that the runner continues the trace. A run that
// arrives with a traceparent (a trigger's, a retry's) continues that trace;
// any other starts one. With tracing off the spans are no-ops and a run
// keeps the traceparent it came with.
func (o *owner) fireSpans(ctx context.Context, runs []*sundialv1.Run) []trace.Span {
	tracer := tracing.Tracer(o.cfg.TracerProvider)
	spans := make([]trace.Span, len(runs))
	for i, r := range runs {
		spanCtx, span := tracer.Start(tracing.WithTraceparent(ctx, r.GetTraceparent()), "dispatcher.fire", trace.WithSpanKind(trace.SpanKindProducer))
		if span.IsRecording() { // tracing off: no attributes built
			span.SetAttributes(
				attribute.String("sundial.run_id", r.GetRunId()),
				attribute.String("sundial.job_id", r.GetJobId()),
				attribute.Int64("sundial.attempt", int64(r.GetAttempt())),
				attribute.String("sundial.origin", originLabel(r.GetOrigin())),
				attribute.Int("sundial.shard", o.shard))
		}
		r.Traceparent = tracing.Traceparent(spanCtx)
		spans[i] = span
	}
	return spans
}

// enqueued writes the ENQUEUED event of each delivered run, after Kafka
// acknowledged the run: the run's history then says when it was due and when
// it was dispatched (the event's time is the run's dispatched_at, so it
// orders before the runner's STARTED), however late a runner picks it up.
// The run is out whatever happens here, so a failure is logged and counted,
// never a reason to fire the entry again (that would emit the run twice).
func (o *owner) enqueued(ctx context.Context, runs []*sundialv1.Run) {
	if len(runs) == 0 {
		return
	}
	recs := make([]*kgo.Record, 0, len(runs))
	for _, r := range runs {
		ev := enqueuedEvent(r, "dispatcher/"+o.cfg.InstanceID)
		value, headers, err := topics.EncodeEvent(o.cfg.EventEncoding, ev)
		if err != nil {
			o.log.Error("ENQUEUED event does not encode", "run_id", r.GetRunId(), "err", err)
			continue
		}
		recs = append(recs, &kgo.Record{Topic: o.topics.Events(), Key: []byte(r.GetJobId()), Value: value, Headers: headers})
	}
	if err := o.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		o.m.enqueuedEventErrors.Inc()
		o.log.Warn("cannot write ENQUEUED events; the runs are out", "runs", len(recs), "err", err)
	}
}

// enqueuedEvent is the ENQUEUED event of a run the dispatcher wrote: its due
// time, the attempt's due time, and as its time the run's dispatched_at.
func enqueuedEvent(r *sundialv1.Run, by string) *sundialv1.RunEvent {
	ev := &sundialv1.RunEvent{
		RunId: r.GetRunId(), JobId: r.GetJobId(), Attempt: r.GetAttempt(), State: sundialv1.RunState_RUN_STATE_ENQUEUED,
		Time: r.GetDispatchedAt(), DueTime: r.GetDueTime(), AttemptDueTime: r.GetAttemptDueTime(), RunnerId: by,
		DagRunId: r.GetDagRunId(), DagNodeId: r.GetDagNodeId(), Priority: r.GetPriority(), OwnerTeam: r.GetOwnerTeam(),
		TraceId: tracing.TraceIDOf(r.GetTraceparent()),
	}
	if r.GetBaseRunId() != "" { // the base run's events speak for the DAG node
		ev.DagRunId, ev.DagNodeId = "", ""
	}
	return ev
}

// refusedRun is a run whose record Kafka refused for good, and why.
type refusedRun struct {
	run    *sundialv1.Run
	runErr *sundialv1.RunError
}

// deadLetter writes each refused run to the dead-letter topic and its
// terminal event (DEAD, with the reason) to the events topic, and waits for
// both: the run's team reads why it never ran (sundial dlq, its history, a
// DAG waiting on the node), and the firing then counts as done so that the
// shard's watermark passes the entry. An error (the dead-letter topic
// cannot be written either) fails the firing, which is tried again.
func (o *owner) deadLetter(ctx context.Context, refused []refusedRun) error {
	at := o.cfg.Now()
	by := "dispatcher/" + o.cfg.InstanceID
	recs := make([]*kgo.Record, 0, 2*len(refused))
	for _, f := range refused {
		run := f.run
		dl := &sundialv1.DeadLetter{Run: deadLetterRun(run, f.runErr.GetCode()), LastError: f.runErr,
			Attempts: run.GetAttempt(), DeadAt: timestamppb.New(at), RunnerId: by}
		ev := &sundialv1.RunEvent{
			RunId: run.GetRunId(), JobId: run.GetJobId(), Attempt: run.GetAttempt(), State: sundialv1.RunState_RUN_STATE_DEAD,
			Time: timestamppb.New(at.Truncate(time.Microsecond)), DueTime: run.GetDueTime(), AttemptDueTime: run.GetAttemptDueTime(),
			RunnerId: by, Error: f.runErr, DagRunId: run.GetDagRunId(), DagNodeId: run.GetDagNodeId(),
			Priority: run.GetPriority(), OwnerTeam: run.GetOwnerTeam(),
		}
		if run.GetBaseRunId() != "" { // the base run's events speak for the DAG node
			ev.DagRunId, ev.DagNodeId = "", ""
		}
		dlValue, err := proto.Marshal(dl)
		if err != nil {
			return fmt.Errorf("encode the dead letter of %s: %w", run.GetRunId(), err)
		}
		evValue, evHeaders, err := topics.EncodeEvent(o.cfg.EventEncoding, ev)
		if err != nil {
			return fmt.Errorf("encode the event of %s: %w", run.GetRunId(), err)
		}
		recs = append(recs,
			&kgo.Record{Topic: o.topics.DLQ(), Key: []byte(run.GetJobId()), Value: dlValue, Headers: topics.ProtobufHeaders(dl)},
			&kgo.Record{Topic: o.topics.Events(), Key: []byte(run.GetJobId()), Value: evValue, Headers: evHeaders})
	}
	if err := o.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}
	for _, f := range refused {
		o.m.deadLettered.WithLabelValues(f.runErr.GetCode()).Inc()
		o.log.Error("Kafka refused a run record for good; run dead-lettered", "run_id", f.run.GetRunId(),
			"job", f.run.GetJobId(), "team", f.run.GetOwnerTeam(), "code", f.runErr.GetCode(), "reason", f.runErr.GetMessage())
	}
	return nil
}

// errRowBehind: an entry was found before its job's row (see rowMayFollow).
var errRowBehind = errors.New("the job's row is not stored yet")

// jobRowWait is how long after its due time an entry whose job row is
// missing, or older than the entry, is taken for one written ahead of its
// row rather than for a dead one.
//
// The store writes a definition's first entry before the job row (a crash in
// between leaves a dead entry, never a job with nothing due), and a bucket
// read or a firing can come between the two writes; under load the gap lasts
// seconds. Dropped as dead, such an entry would end the job's chain before
// it began: the entry is fired again, with backoff, until the row is there
// or this long after its due time. A row still missing after that belongs to
// a registry that crashed between the writes; it writes both again when it
// processes the definition again, and its wake-up then finds the entry
// (the core remembers a key for dedupe for dedupeWindow after its due time
// only, which is shorter than jobRowWait).
const jobRowWait = time.Minute

// rowMayFollow says whether entry e, found without its job's row (or with
// an older row), may still see the row written: it is due less than
// jobRowWait before now. The job is dropped from memory, so the next attempt
// reads the store.
func (o *owner) rowMayFollow(e store.DueEntry, now time.Time) bool {
	if now.Sub(e.Due) >= jobRowWait {
		return false
	}
	if o.jobs != nil {
		o.jobs.invalidate(e.JobID)
	}
	return true
}

// plan decides what an entry fires. An error is transient (the store could
// not be read) and the firing is tried again; anything wrong with the data
// itself drops the entry, because trying again cannot help.
func (o *owner) plan(ctx context.Context, f firing, now time.Time) (plan, error) {
	e := f.Entry
	if len(e.Payload) > 0 && (e.Kind == store.KindRetry || e.Kind == store.KindDAG) {
		// The runner (a retry or deferral) or the DAG engine handed over
		// the whole run; re-emit it as it is.
		var run sundialv1.Run
		if err := proto.Unmarshal(e.Payload, &run); err == nil && run.GetRunId() != "" {
			if run.GetOrigin() == sundialv1.RunOrigin_RUN_ORIGIN_UNSPECIFIED {
				run.Origin = originOfKind(e.Kind)
			}
			if run.GetAttempt() == 0 {
				run.Attempt = uint32(e.Attempt)
			}
			if run.GetAttemptDueTime() == nil {
				run.AttemptDueTime = timestamppb.New(e.Due)
			}
			paused, err := o.jobPaused(ctx, e)
			if err != nil {
				return plan{}, err
			}
			if paused {
				return plan{hold: true}, nil
			}
			return plan{runs: []*sundialv1.Run{&run}}, nil
		}
		o.log.Warn("due entry payload is not a run; building the run from the job", "run_id", e.RunID, "kind", e.Kind)
	}

	if s, ok := snapshotOf(e); ok && o.jobs != nil {
		if checked, ok := o.jobs.snapshotUsable(e, s, now); ok {
			o.m.jobCache.WithLabelValues("snapshot").Inc()
			job := store.Job{ID: e.JobID, Spec: s.Spec, Revision: e.Revision, UpdatedAt: s.UpdatedAt}
			p := o.planFrom(f, job, now, checked)
			p.snapshot = true
			return p, nil
		}
	}

	job, checked, err := o.readJob(ctx, e)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if o.rowMayFollow(e, now) {
			return plan{}, fmt.Errorf("%w: job %q not found", errRowBehind, e.JobID)
		}
		return plan{drop: dropDead, why: "job not found"}, nil
	case err != nil:
		return plan{}, fmt.Errorf("read job %q: %w", e.JobID, err)
	case job.Deleted:
		return plan{drop: dropDead, why: "job deleted"}, nil
	case e.Kind == store.KindScheduled && job.Revision < e.Revision && o.rowMayFollow(e, now):
		return plan{}, fmt.Errorf("%w: entry of revision %d, job %q at revision %d", errRowBehind, e.Revision, e.JobID, job.Revision)
	}
	return o.planFrom(f, job, now, checked), nil
}

// planFrom plans f from its job, known current up to checked. The
// successor it chains carries the job's snapshot, checked then.
func (o *owner) planFrom(f firing, job store.Job, now, checked time.Time) plan {
	spec := &sundialv1.JobSpec{}
	if err := proto.Unmarshal(job.Spec, spec); err != nil {
		return plan{drop: dropInvalid, why: fmt.Sprintf("stored definition does not decode: %v", err)}
	}
	p := o.planJob(f, job, spec, now)
	p.fromJob, p.jobRev = true, job.Revision
	if p.next != nil {
		p.next.Payload = job.Snapshot(checked).Encode()
	}
	return p
}

// planJob decides what an entry fires from its job's definition.
func (o *owner) planJob(f firing, job store.Job, spec *sundialv1.JobSpec, now time.Time) plan {
	e := f.Entry
	switch e.Kind {
	case store.KindScheduled:
		return o.planScheduled(f, job, spec, now)
	case store.KindTrigger:
		if spec.GetPaused() {
			return plan{hold: true}
		}
		run := newRun(job, spec, e.RunID, dueOfRunID(e), e.Due, e.Attempt, sundialv1.RunOrigin_RUN_ORIGIN_TRIGGER)
		if len(e.Payload) > 0 {
			var tr sundialv1.Trigger
			if err := proto.Unmarshal(e.Payload, &tr); err == nil {
				run.TriggerIdempotencyKey = tr.GetIdempotencyKey()
				run.Traceparent = tr.GetTraceparent() // the firing continues the trigger's trace
				if tr.Payload != nil {
					run.Payload = tr.Payload
				}
			}
		}
		return plan{runs: []*sundialv1.Run{run}}
	default: // retry or dag without a run in the payload
		if spec.GetPaused() {
			return plan{hold: true}
		}
		return plan{runs: []*sundialv1.Run{newRun(job, spec, e.RunID, dueOfRunID(e), e.Due, e.Attempt, originOfKind(e.Kind))}}
	}
}

// planScheduled decides what an occurrence of the job's own schedule fires
// and which occurrence comes next.
//
// An entry is live only while its revision is the job's and the job is not
// paused: an entry of an older definition (the registry replaced it, or the
// dispatcher had already chained it forward) fires nothing, so a changed
// schedule takes effect from its next occurrence without firing twice.
//
// An entry seen in time fires its occurrence and chains the next one. A late
// entry (first seen after its due time plus the misfire threshold: the shard
// had no owner, or the registry scheduled an instant already past) stands for
// every occurrence from its due time to now, and the job's misfire policy
// decides, among those inside the catch-up window, what fires (the rule is
// jobspec.CatchUp, shared with the registry and the DAG engine):
//
//   - FIRE_ONCE: the latest one, once;
//   - FIRE_ALL: each, in order (at most MaxMissedRuns at once; the rest
//     follow as the next, equally late, entry);
//   - SKIP: none.
//
// All of them carry RUN_ORIGIN_CATCH_UP and their own run ids. The chain then
// continues with the first occurrence after now (after the last one fired
// when MaxMissedRuns cut FIRE_ALL short).
func (o *owner) planScheduled(f firing, job store.Job, spec *sundialv1.JobSpec, now time.Time) plan {
	e := f.Entry
	switch {
	case job.Revision != e.Revision:
		return plan{drop: dropDead, why: fmt.Sprintf("entry of revision %d, job at revision %d", e.Revision, job.Revision)}
	case spec.GetPaused():
		return plan{drop: dropDead, why: "job paused"}
	case spec.GetSchedule() == nil:
		return plan{drop: dropDead, why: "job has no schedule"}
	}
	s, errs := jobspec.CompileSchedule(spec.GetSchedule(), job.UpdatedAt)
	if len(errs) > 0 {
		return plan{drop: dropInvalid, why: fmt.Sprintf("stored schedule does not compile: %v", errs)}
	}
	chain := func(after time.Time) *store.DueEntry {
		t, ok := s.Next(after)
		if !ok {
			return nil
		}
		due := store.Truncate(t)
		return &store.DueEntry{Due: due, JobID: e.JobID, Kind: store.KindScheduled, RunID: store.RunID(e.JobID, due), Attempt: 1, Revision: e.Revision}
	}
	run := func(due time.Time, origin sundialv1.RunOrigin) *sundialv1.Run {
		due = store.Truncate(due)
		return newRun(job, spec, store.RunID(e.JobID, due), due, due, 1, origin)
	}

	if !f.Late {
		r := run(e.Due, sundialv1.RunOrigin_RUN_ORIGIN_SCHEDULE)
		// A splayed run was due, and fires, after the schedule's instant:
		// its latency counts from there.
		r.AttemptDueTime = timestamppb.New(e.Due.Add(entrySplay(e)))
		return plan{runs: []*sundialv1.Run{r}, next: chain(e.Due)}
	}

	policy := jobspec.MisfirePolicy(spec.GetSchedule())
	c := jobspec.CatchUp(s, policy, jobspec.CatchUpWindow(spec.GetSchedule()), e.Due, now, o.cfg.MaxMissedRuns)
	p := plan{next: chain(c.Covered), covered: c.Covered}
	if c.Covered.Before(now) {
		o.log.Warn("catch-up of a job capped; the rest follows", "job", e.JobID, "runs", len(c.Fire))
	}
	for _, t := range c.Fire {
		p.runs = append(p.runs, run(t, sundialv1.RunOrigin_RUN_ORIGIN_CATCH_UP))
	}
	switch {
	case len(p.runs) > 0:
	case policy == sundialv1.MisfirePolicy_MISFIRE_POLICY_SKIP:
		p.drop, p.why = dropMisfire, "misfire policy skip"
	default:
		p.drop, p.why = dropMisfire, "outside the catch-up window"
	}
	return p
}

// entrySplay is how long after its due time a scheduled entry fires: the
// offset jobspec.Splay gives its run id in its job's splay window, read from
// the job's snapshot the entry carries. An entry without a snapshot (other
// kinds: triggers, retries, DAG nodes) is not splayed.
func entrySplay(e store.DueEntry) time.Duration {
	s, ok := snapshotOf(e)
	if !ok {
		return 0
	}
	return jobspec.Splay(e.RunID, jobspec.SplayWindowOf(s.Spec))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// newRun snapshots the job into a run record.
func newRun(job store.Job, spec *sundialv1.JobSpec, runID string, due, attemptDue time.Time, attempt int, origin sundialv1.RunOrigin) *sundialv1.Run {
	return &sundialv1.Run{
		RunId:            runID,
		JobId:            job.ID,
		DueTime:          timestamppb.New(due),
		Attempt:          uint32(max(attempt, 1)),
		AttemptDueTime:   timestamppb.New(attemptDue),
		Priority:         spec.GetPriority(),
		Origin:           origin,
		DefinitionOffset: job.Revision,
		OwnerTeam:        spec.GetOwnerTeam(),
		Labels:           spec.GetLabels(),
		Payload:          spec.GetPayload(),
		Target:           spec.GetTarget(),
		Timeout:          spec.GetTimeout(),
		Retry:            spec.GetRetry(),
		ConcurrencyLimit: spec.GetConcurrencyLimit(),
		OverlapPolicy:    spec.GetOverlapPolicy(),
		QueueDelay:       spec.GetQueueDelay(),
		Pool:             spec.GetPool(),
		Routing:          spec.GetRouting(),
	}
}

// dueOfRunID returns the due time a run id is made of (job id + "@" + unix
// ms), or the entry's due time when the id does not have that form.
func dueOfRunID(e store.DueEntry) time.Time {
	if i := strings.LastIndexByte(e.RunID, '@'); i >= 0 {
		if ms, err := strconv.ParseInt(e.RunID[i+1:], 10, 64); err == nil {
			return time.UnixMilli(ms).UTC()
		}
	}
	return e.Due
}

func originOfKind(k store.Kind) sundialv1.RunOrigin {
	switch k {
	case store.KindRetry:
		return sundialv1.RunOrigin_RUN_ORIGIN_RETRY
	case store.KindTrigger:
		return sundialv1.RunOrigin_RUN_ORIGIN_TRIGGER
	case store.KindDAG:
		return sundialv1.RunOrigin_RUN_ORIGIN_DAG
	}
	return sundialv1.RunOrigin_RUN_ORIGIN_SCHEDULE
}

func originLabel(o sundialv1.RunOrigin) string {
	return strings.ToLower(strings.TrimPrefix(o.String(), "RUN_ORIGIN_"))
}

// priorityOf maps a job's priority to its runs topic.
func priorityOf(p sundialv1.Priority) topics.Priority {
	switch p {
	case sundialv1.Priority_PRIORITY_HIGH:
		return topics.PriorityHigh
	case sundialv1.Priority_PRIORITY_LOW:
		return topics.PriorityLow
	}
	return topics.PriorityDefault
}
