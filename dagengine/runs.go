package dagengine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/deps/metricdeps"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// Origins of DAG runs, stored with each run.
const (
	OriginSchedule = "schedule"
	OriginTrigger  = "trigger"
)

// Store is what the engine needs from the store.
type Store interface {
	store.Dags
	store.DagRuns
	GetJob(ctx context.Context, id string) (store.Job, error)
}

// Enqueuer makes node runs durable and wakes their dispatcher
// (*enqueue.Enqueuer).
type Enqueuer interface {
	Enqueue(ctx context.Context, entries ...store.DueEntry) error
}

// Producer produces records and waits for their acknowledgement
// (*kgo.Client).
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// ErrPermanent marks an error that retrying cannot fix: a stored state or
// definition that does not decode, or a state that does not fit its
// definition. The engine logs it and moves on.
var ErrPermanent = errors.New("permanent")

// ErrNotRunnable is returned by StartRun for a DAG that is deleted, paused
// or unknown.
var ErrNotRunnable = errors.New("dag cannot start a run")

// RunsConfig configures Runs.
type RunsConfig struct {
	// Store holds definitions and DAG-run state. Required.
	Store Store
	// Enqueuer makes node runs due. Required.
	Enqueuer Enqueuer
	// Producer publishes DagRunEvents to sundial.events. Required.
	Producer Producer
	// Topics names sundial.events.
	Topics topics.Names
	// Shards is S, the cluster's shard count, for Run.shard. Required.
	Shards int
	// Options bound definitions; the zero value means the defaults.
	Options dag.Options
	// RedriveAfter is how long work another process saved (a node to
	// start, an event to publish) is left to it before this process redoes
	// it: the time in which a healthy process acknowledges its work, after
	// which it is presumed dead. Default 10s.
	RedriveAfter time.Duration
	// MaxConflicts bounds how often one change is recomputed after losing
	// to a concurrent writer before Apply returns an error (the caller
	// retries later). Default 50.
	MaxConflicts int
	// Registerer receives the metrics. Default: a registry of its own.
	Registerer prometheus.Registerer
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// EventEncoding is how the events it writes to sundial.events are
	// encoded: binary protobuf (the zero value) or, for people and tools
	// reading the topic, JSON (the content-type header says which; every
	// reader takes both).
	EventEncoding sundialv1.Encoding
}

func (c RunsConfig) withDefaults() RunsConfig {
	if c.MaxConflicts == 0 {
		c.MaxConflicts = 50
	}
	if c.RedriveAfter == 0 {
		c.RedriveAfter = 10 * time.Second
	}
	c.Registerer = metricdeps.Registerer(c.Registerer)
	c.Logger = deps.Logger(c.Logger)
	c.Now = deps.Clock(c.Now)
	return c
}

// Validate reports every bad field.
func (c RunsConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("dagengine runs config: store: required"))
	}
	if c.Enqueuer == nil {
		errs = append(errs, errors.New("dagengine runs config: enqueuer: required"))
	}
	if c.Producer == nil {
		errs = append(errs, errors.New("dagengine runs config: producer: required"))
	}
	if c.Shards <= 0 {
		errs = append(errs, fmt.Errorf("dagengine runs config: shards %d: must be positive", c.Shards))
	}
	if c.MaxConflicts < 1 {
		errs = append(errs, fmt.Errorf("dagengine runs config: max conflicts %d: must be positive", c.MaxConflicts))
	}
	if c.RedriveAfter < 0 {
		errs = append(errs, fmt.Errorf("dagengine runs config: redrive after %s: must not be negative", c.RedriveAfter))
	}
	return errors.Join(errs...)
}

// Runs applies inputs to DAG runs durably and carries out their decisions:
// the shell around package dagrun. It is safe for concurrent use, also by
// several processes at once (see the package doc). The engine uses it for
// events, timeouts and schedules; the CLI for resume and trigger; the API
// server for ResumeDagRun.
type Runs struct {
	cfg    RunsConfig
	m      *metrics
	graphs graphCache
	work   *work

	// observe, if set, is told the state of every run Runs has touched,
	// so the engine can track its deadline.
	observe func(id string, st *dagrun.State)
}

// NewRuns returns Runs, or every configuration error. It registers the
// engine's metrics.
func NewRuns(cfg RunsConfig) (*Runs, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Runs{cfg: cfg, m: m, graphs: graphCache{m: map[[32]byte]*dag.Graph{}}, work: newWork()}, nil
}

// graphCache keeps compiled definitions by the hash of their stored form:
// every event of a DAG run would otherwise compile its snapshot again.
type graphCache struct {
	mu sync.Mutex
	m  map[[32]byte]*dag.Graph
}

const graphCacheSize = 1024

func (r *Runs) graph(spec []byte) (*dag.Graph, error) {
	key := sha256.Sum256(spec)
	r.graphs.mu.Lock()
	g := r.graphs.m[key]
	r.graphs.mu.Unlock()
	if g != nil {
		return g, nil
	}
	g, err := dag.Unmarshal(spec, r.cfg.Options)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	r.graphs.mu.Lock()
	if len(r.graphs.m) >= graphCacheSize {
		clear(r.graphs.m)
	}
	r.graphs.m[key] = g
	r.graphs.mu.Unlock()
	return g, nil
}

// loaded is a DAG run as read: its row, definition and decoded state.
type loaded struct {
	row   store.DagRun
	g     *dag.Graph
	state dagrun.State
}

func (r *Runs) load(ctx context.Context, id string) (*loaded, error) {
	row, err := r.cfg.Store.GetDagRun(ctx, id)
	if err != nil {
		return nil, err
	}
	st, err := dagrun.Unmarshal(row.State)
	if err != nil {
		return nil, fmt.Errorf("dag run %s: %w: %w", id, ErrPermanent, err)
	}
	// A resume may have adopted a newer definition (Resume).
	g, err := r.graph(followed(row, st))
	if err != nil {
		return nil, fmt.Errorf("dag run %s: %w", id, err)
	}
	return &loaded{row: row, g: g, state: st}, nil
}

// Result says what Apply did.
type Result struct {
	// State is the DAG run's state after the inputs and the work they
	// caused.
	State dagrun.State
	// Applied counts the inputs that changed the state; the rest were
	// ignored (duplicates, stale events).
	Applied int
}

// Apply applies inputs to the DAG run id, in order, then carries out the
// work its state holds (node runs to enqueue, events to publish), new or
// left over by a process that died. With no inputs it only carries out
// left-over work. The change is one conditional write: if another writer
// changed the run first, Apply re-reads it and applies the inputs again,
// which is safe because the machine ignores what it has already seen.
//
// An unknown run is an error wrapping store.ErrNotFound; a run that cannot
// be decoded wraps ErrPermanent; an input the machine refuses (Resume with
// nothing to resume) is returned as the machine's error. Any other error is
// transient: the caller retries.
func (r *Runs) Apply(ctx context.Context, id string, inputs ...dagrun.Input) (Result, error) {
	return r.apply(ctx, id, false, inputs...)
}

// apply is Apply; with adopt, the run first takes the DAG's current
// definition (adopt).
func (r *Runs) apply(ctx context.Context, id string, adopt bool, inputs ...dagrun.Input) (Result, error) {
	for attempt := 0; ; attempt++ {
		l, err := r.load(ctx, id)
		if err != nil {
			return Result{}, err
		}
		now := r.cfg.Now()
		st := l.state
		if adopt {
			if st, err = r.adopt(ctx, l, st); err != nil {
				return Result{}, err
			}
		}
		var decisions []dagrun.Decision
		applied := 0
		for _, in := range inputs {
			res, err := dagrun.Apply(l.g, st, in, now)
			if err != nil {
				if errors.Is(err, dagrun.ErrNothingToResume) {
					return Result{State: st}, err
				}
				return Result{}, fmt.Errorf("%w: %w", ErrPermanent, err)
			}
			if res.Changed {
				st = res.State
				decisions = append(decisions, res.Decisions...)
				applied++
			}
		}
		if applied > 0 {
			err := r.save(ctx, l, st)
			if errors.Is(err, store.ErrVersionConflict) {
				r.m.conflicts.Inc()
				if attempt+1 >= r.cfg.MaxConflicts {
					return Result{}, fmt.Errorf("apply to dag run %s: lost %d times to concurrent writers: %w", id, attempt+1, err)
				}
				continue
			}
			if err != nil {
				return Result{}, err
			}
			r.saved(id, decisions)
		}
		if st.Pending() {
			st, err = r.carryOut(ctx, l, st)
			if err != nil {
				return Result{State: st, Applied: applied}, err
			}
		}
		r.notify(id, &st)
		return Result{State: st, Applied: applied}, nil
	}
}

// save writes st over the loaded run, conditional on its version, and
// updates l to what was written.
func (r *Runs) save(ctx context.Context, l *loaded, st dagrun.State) error {
	b, err := dagrun.Marshal(st)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	row := l.row
	row.State = b
	row.Status, row.Summary = statusOf(&st), summaryOf(&st)
	row.Active = st.Active()
	row.UpdatedAt = r.cfg.Now()
	v, err := r.cfg.Store.UpdateDagRun(ctx, row)
	if err != nil {
		return fmt.Errorf("save dag run %s: %w", row.ID, err)
	}
	row.Version = v
	l.row, l.state = row, st
	return nil
}

func (r *Runs) notify(id string, st *dagrun.State) {
	if r.observe != nil {
		r.observe(id, st)
	}
}

// count records the transitions of decisions that were saved.
func (r *Runs) count(decisions []dagrun.Decision) {
	for _, d := range decisions {
		p, ok := d.(dagrun.Publish)
		if !ok {
			continue
		}
		state := strings.ToLower(strings.TrimPrefix(p.Event.State.String(), "DAG_STATE_"))
		if p.Event.Node == "" {
			r.m.dagRuns.WithLabelValues(state).Inc()
		} else {
			r.m.nodes.WithLabelValues(state).Inc()
		}
	}
}

// carryOut does the work st holds that this goroutine may do (see work):
// it enqueues the runs of starting nodes, publishes events of the outbox,
// and acknowledges both. Acknowledgements that add work (a node whose job
// is missing fails, which emits events) lead to another round.
func (r *Runs) carryOut(ctx context.Context, l *loaded, st dagrun.State) (dagrun.State, error) {
	for range 4 {
		c := r.work.claim(&st, r.cfg.Now(), r.cfg.RedriveAfter)
		if c.empty() {
			return st, nil
		}
		next, err := r.carryOutClaimed(ctx, l, st, c)
		r.work.release(c, err == nil)
		if err != nil {
			return st, err
		}
		st = next
	}
	return st, nil
}

func (r *Runs) carryOutClaimed(ctx context.Context, l *loaded, st dagrun.State, c *claimed) (dagrun.State, error) {
	acks, err := r.perform(ctx, l, &st, c)
	if err != nil {
		return st, err
	}
	// Acknowledge, re-reading on a conflict: acknowledgements are
	// idempotent and only ever apply to the work they name.
	for attempt := 0; ; attempt++ {
		next := st
		var decisions []dagrun.Decision
		changed := false
		for _, in := range acks {
			res, err := dagrun.Apply(l.g, next, in, r.cfg.Now())
			if err != nil {
				return st, fmt.Errorf("%w: %w", ErrPermanent, err)
			}
			if res.Changed {
				next, changed = res.State, true
				decisions = append(decisions, res.Decisions...)
			}
		}
		if !changed {
			return next, nil
		}
		err := r.save(ctx, l, next)
		if errors.Is(err, store.ErrVersionConflict) && attempt+1 < r.cfg.MaxConflicts {
			r.m.conflicts.Inc()
			fresh, lerr := r.load(ctx, l.row.ID)
			if lerr != nil {
				return st, lerr
			}
			*l, st = *fresh, fresh.state
			continue
		}
		if err != nil {
			return st, err
		}
		r.saved(l.row.ID, decisions)
		return next, nil
	}
}

// saved takes note of decisions whose state was saved.
func (r *Runs) saved(id string, decisions []dagrun.Decision) {
	r.count(decisions)
	r.work.saved(id, decisions)
}

// rewrite writes an ended run again, unchanged but for its version, so that
// a store index still listing it as active (a crash between the write that
// ended it and the index update) catches up. Losing to another writer is
// fine: that write updates the index as well.
func (r *Runs) rewrite(ctx context.Context, id string) error {
	l, err := r.load(ctx, id)
	if err != nil {
		return err
	}
	if l.state.Active() {
		return nil
	}
	if err := r.save(ctx, l, l.state); err != nil && !errors.Is(err, store.ErrVersionConflict) {
		return err
	}
	return nil
}

// perform enqueues the claimed nodes' runs and publishes the claimed
// events, and returns the acknowledgements.
func (r *Runs) perform(ctx context.Context, l *loaded, st *dagrun.State, c *claimed) ([]dagrun.Input, error) {
	var (
		acks    []dagrun.Input
		entries []store.DueEntry
		jobs    = map[string]*jobDef{}
	)
	for _, i := range c.nodes {
		n := st.Nodes[i]
		entry, err := r.nodeEntry(ctx, l, st, i, jobs)
		if errors.Is(err, errJobNotFound) {
			r.cfg.Logger.Info("node fails at start", "dag_run", st.DagRunID, "node", n.ID, "err", err)
			acks = append(acks, dagrun.StartFailed{Node: n.ID, Gen: n.Gen, Reason: "job_not_found"})
			continue
		}
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry)
		acks = append(acks, dagrun.Enqueued{Node: n.ID, Gen: n.Gen})
	}
	if len(entries) > 0 {
		if err := r.cfg.Enqueuer.Enqueue(ctx, entries...); err != nil {
			return nil, fmt.Errorf("dag run %s: enqueue %d node runs: %w", st.DagRunID, len(entries), err)
		}
	}
	if len(c.events) > 0 {
		recs := make([]*kgo.Record, len(c.events))
		seqs := make([]uint64, len(c.events))
		for i, e := range c.events {
			rec, err := r.eventRecord(st, e)
			if err != nil {
				return nil, err
			}
			recs[i], seqs[i] = rec, e.Seq
		}
		if err := r.cfg.Producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return nil, fmt.Errorf("dag run %s: publish %d events: %w", st.DagRunID, len(recs), err)
		}
		acks = append(acks, dagrun.Published{Seqs: seqs})
	}
	return acks, nil
}

// eventRecord is the sundial.events record of a DagRunEvent.
func (r *Runs) eventRecord(st *dagrun.State, e dagrun.Event) (*kgo.Record, error) {
	ev := &sundialv1.DagRunEvent{
		DagRunId: st.DagRunID,
		DagId:    st.DagID,
		NodeId:   e.Node,
		State:    e.State,
		Time:     timestamppb.New(e.Time),
		RunId:    e.RunID,
		DueTime:  timestamppb.New(st.Due),
		Reason:   e.Reason,
	}
	value, headers, err := topics.EncodeEvent(r.cfg.EventEncoding, ev)
	if err != nil {
		return nil, fmt.Errorf("encode event of dag run %s: %w", st.DagRunID, err)
	}
	return &kgo.Record{
		Topic:   r.cfg.Topics.Events(),
		Key:     []byte(st.DagID),
		Value:   value,
		Headers: headers,
	}, nil
}

// StartRun starts the run of DAG dagID due at due, unless it exists: the
// run id is dag id + "@" + due, so every instance and every retry that
// starts the same occurrence starts the same run, and only the first
// creates it. A run that exists gets its left-over work carried out. The
// DAG is read fresh: a deleted, paused or unknown DAG is an error wrapping
// ErrNotRunnable.
func (r *Runs) StartRun(ctx context.Context, dagID string, due time.Time, origin string) (id string, created bool, err error) {
	due = store.Truncate(due)
	id = dagrun.RunID(dagID, due)
	d, err := r.cfg.Store.GetDag(ctx, dagID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return id, false, fmt.Errorf("start dag run %s: %w: no DAG %q", id, ErrNotRunnable, dagID)
	case err != nil:
		return id, false, fmt.Errorf("start dag run %s: %w", id, err)
	case d.Deleted:
		return id, false, fmt.Errorf("start dag run %s: %w: DAG %q is deleted", id, ErrNotRunnable, dagID)
	}
	g, err := r.graph(d.Spec)
	if err != nil {
		return id, false, fmt.Errorf("start dag run %s: %w", id, err)
	}
	if g.Spec().GetPaused() {
		return id, false, fmt.Errorf("start dag run %s: %w: DAG %q is paused", id, ErrNotRunnable, dagID)
	}
	now := r.cfg.Now()
	res := dagrun.Start(g, id, due, now)
	b, err := dagrun.Marshal(res.State)
	if err != nil {
		return id, false, fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	row := store.DagRun{
		ID: id, DagID: dagID, Due: due, Origin: origin, Spec: d.Spec, State: b,
		Status: statusOf(&res.State), Summary: summaryOf(&res.State), Active: res.State.Active(),
		CreatedAt: now, UpdatedAt: now,
	}
	stored, created, err := r.cfg.Store.CreateDagRun(ctx, row)
	if err != nil {
		return id, false, fmt.Errorf("start dag run %s: %w", id, err)
	}
	if !created {
		_, err := r.Apply(ctx, id)
		return id, false, err
	}
	r.saved(id, res.Decisions)
	l := &loaded{row: stored, g: g, state: res.State}
	st, err := r.carryOut(ctx, l, res.State)
	if err != nil {
		return id, true, err
	}
	r.notify(id, &st)
	return id, true, nil
}

// Resume reruns the failed, cancelled and timed-out nodes of a DAG run and
// continues it, with the DAG's current definition: a DAG fixed and applied
// again after the run failed runs its fix (an inline job's target, payload,
// retries; a registered job's node reads its job's definition in force
// anyway). It fails with dagrun.ErrNothingToResume when no node failed, and
// with ErrNotResumable when the DAG was deleted, or its current definition
// is not dag.Compatible with the run's (a node added or removed, other
// dependencies, another job), naming each node that differs. Both leave
// the run as it was (the first comes with its state). An error after the
// resume was saved (its node runs or events not yet carried out, which the
// engine redoes) comes with the state saved; any other error saved nothing
// and comes with the zero State.
func (r *Runs) Resume(ctx context.Context, id string) (dagrun.State, error) {
	res, err := r.apply(ctx, id, true, dagrun.Resume{})
	return res.State, err
}

// followed is the encoded definition a run follows: the one a resume
// adopted, else the one it was created with.
func followed(row store.DagRun, st dagrun.State) []byte {
	if st.Definition != nil {
		return st.Definition
	}
	return row.Spec
}

// ErrNotResumable means a DAG run cannot take its DAG's current definition.
var ErrNotResumable = errors.New("cannot resume with the DAG's current definition")

// adopt makes the run loaded as l follow its DAG's current definition: it
// checks that the definition is dag.Compatible with the run's, sets l's
// graph to it, and returns st with the definition recorded
// (State.Definition) and the nodes in the new definition's order. A run
// already following the current definition is returned as it is.
func (r *Runs) adopt(ctx context.Context, l *loaded, st dagrun.State) (dagrun.State, error) {
	d, err := r.cfg.Store.GetDag(ctx, l.row.DagID)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && d.Deleted):
		return st, fmt.Errorf("resume dag run %s: %w: DAG %q was deleted", l.row.ID, ErrNotResumable, l.row.DagID)
	case err != nil:
		return st, fmt.Errorf("resume dag run %s: read DAG %q: %w", l.row.ID, l.row.DagID, err)
	}
	if bytes.Equal(d.Spec, followed(l.row, st)) {
		return st, nil
	}
	g, err := r.graph(d.Spec)
	if err != nil {
		return st, fmt.Errorf("resume dag run %s: the current definition of DAG %q: %w", l.row.ID, l.row.DagID, err)
	}
	if err := dag.Compatible(l.g, g); err != nil {
		return st, fmt.Errorf("resume dag run %s: %w: %w", l.row.ID, ErrNotResumable, err)
	}
	st = st.Clone()
	nodes := make([]dagrun.Node, len(st.Nodes))
	for _, n := range st.Nodes {
		i, _ := g.Index(n.ID) // Compatible: the same node ids
		nodes[i] = n
	}
	st.Nodes = nodes
	st.Definition = d.Spec
	l.g = g
	return st, nil
}

// Get returns a DAG run's stored row (Spec and State included) and its
// decoded state.
func (r *Runs) Get(ctx context.Context, id string) (store.DagRun, dagrun.State, error) {
	l, err := r.load(ctx, id)
	if err != nil {
		return store.DagRun{}, dagrun.State{}, err
	}
	return l.row, l.state, nil
}

// statusOf is the status stored for listings: the run's status, or "stuck"
// for a running run with a timed-out node.
func statusOf(st *dagrun.State) string {
	if st.Active() && st.Stuck {
		return "stuck"
	}
	return st.Status.String()
}

// summaryOf counts the nodes by phase: "3/5 succeeded, 1 running, 1 waiting".
func summaryOf(st *dagrun.State) string {
	c := st.Counts()
	parts := []string{fmt.Sprintf("%d/%d succeeded", c[dagrun.Succeeded], len(st.Nodes))}
	for _, p := range []dagrun.Phase{dagrun.Starting, dagrun.Running, dagrun.Waiting, dagrun.Failed, dagrun.Cancelled, dagrun.TimedOut, dagrun.Skipped} {
		if c[p] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[p], p))
		}
	}
	return strings.Join(parts, ", ")
}
