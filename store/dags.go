package store

import (
	"errors"
	"fmt"
	"time"
)

// ErrVersionConflict reports a conditional update of a DAG run that lost,
// because the run's version is no longer the one the caller read. Re-read the run with
// GetDagRun and apply the change again.
var ErrVersionConflict = errors.New("dag run changed since it was read")

// Dag is a stored DAG definition, kept like a job definition: a content
// hash makes an identical upsert a no-op, the revision (the record's offset
// on sundial.jobs) orders the definitions of one id, and a delete leaves a
// tombstone.
type Dag struct {
	// ID is the DAG id, the key of its records on sundial.jobs.
	ID string
	// Spec is the serialized DagSpec; the store does not decode it.
	Spec []byte
	// Revision orders the definitions of one DAG.
	Revision int64
	// UpdatedAt is when the definition was produced (the record's
	// timestamp), the instant immediate and delay schedules count from.
	UpdatedAt time.Time

	// Hash is SpecHash(Spec), set by the store.
	Hash []byte
	// Deleted marks a tombstone, set by the store.
	Deleted bool
}

// Validate reports every bad field of a DAG to store.
func (d Dag) Validate() error {
	var errs []error
	if d.ID == "" {
		errs = append(errs, fmt.Errorf("%w: dag id: must not be empty", ErrInvalid))
	}
	if len(d.Spec) == 0 {
		errs = append(errs, fmt.Errorf("%w: dag %q spec: must not be empty", ErrInvalid, d.ID))
	}
	if d.Revision < 0 {
		errs = append(errs, fmt.Errorf("%w: dag %q revision %d: must not be negative", ErrInvalid, d.ID, d.Revision))
	}
	if d.UpdatedAt.IsZero() {
		errs = append(errs, fmt.Errorf("%w: dag %q updated at: must be set", ErrInvalid, d.ID))
	}
	return errors.Join(errs...)
}

// asJob lets a DAG row go through the decisions of job rows.
func (d *Dag) asJob() *Job {
	if d == nil {
		return nil
	}
	return &Job{ID: d.ID, Spec: d.Spec, Revision: d.Revision, Hash: d.Hash, Deleted: d.Deleted}
}

// DecideDagUpsert returns what PutDag does given the stored row (nil when
// there is none): the rules of DecideUpsert.
func DecideDagUpsert(stored *Dag, d Dag) Outcome { return DecideUpsert(stored.asJob(), *d.asJob()) }

// DecideDagDelete returns what DeleteDag does given the stored row: the
// rules of DecideDelete.
func DecideDagDelete(stored *Dag, revision int64) Outcome {
	return DecideDelete(stored.asJob(), revision)
}

// DagRun is the durable state of one DAG run. The store keeps it opaque:
// the DAG engine encodes the state and decides the status; the store only
// guarantees that each update applies to the version it was computed from.
type DagRun struct {
	// ID is the DAG run id: dag id + "@" + due time in UTC unix ms.
	ID string
	// DagID is the DAG.
	DagID string
	// Due is the DAG run's due time.
	Due time.Time
	// Origin says what started the run ("schedule", "trigger").
	Origin string
	// Spec is the definition the run started with (a resume may adopt a
	// newer one, kept in State by the DAG engine), snapshotted at creation and
	// never changed by an update.
	Spec []byte
	// State is the engine's encoded state of the run.
	State []byte
	// Status is a short label of the run's state, for listings.
	Status string
	// Summary is a one-line account of the nodes, for listings.
	Summary string
	// Active marks a run that has not ended; ListActiveDagRuns lists it.
	Active bool
	// Version is 1 at creation and grows by one with every update; set by
	// the store.
	Version int64
	// CreatedAt is when the run was created; UpdatedAt when it was last
	// written.
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Validate reports every bad field of a DAG run to write.
func (r DagRun) Validate() error {
	var errs []error
	if r.ID == "" {
		errs = append(errs, fmt.Errorf("%w: dag run id: must not be empty", ErrInvalid))
	}
	if r.DagID == "" {
		errs = append(errs, fmt.Errorf("%w: dag run %q dag id: must not be empty", ErrInvalid, r.ID))
	}
	if r.Due.IsZero() {
		errs = append(errs, fmt.Errorf("%w: dag run %q due: must be set", ErrInvalid, r.ID))
	}
	if len(r.State) == 0 {
		errs = append(errs, fmt.Errorf("%w: dag run %q state: must not be empty", ErrInvalid, r.ID))
	}
	if r.UpdatedAt.IsZero() {
		errs = append(errs, fmt.Errorf("%w: dag run %q updated at: must be set", ErrInvalid, r.ID))
	}
	return errors.Join(errs...)
}

// Normalize returns the run with its times in UTC at millisecond precision.
func (r DagRun) Normalize() DagRun {
	r.Due = Truncate(r.Due)
	r.CreatedAt = Truncate(r.CreatedAt)
	r.UpdatedAt = Truncate(r.UpdatedAt)
	return r
}
