package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultRetention is how long records are kept by default.
const DefaultRetention = 90 * 24 * time.Hour

// Store keeps the trail (store/cassandra).
type Store interface {
	// PutAudits writes recs, to expire after ttl. Writing the same ID again
	// replaces it. On error some may be written: writing them again
	// completes the call.
	PutAudits(ctx context.Context, recs []Record, ttl time.Duration) error
	// ListAudit returns the records q selects, newest first.
	ListAudit(ctx context.Context, q Query) ([]Record, error)
}

// Query selects records: those of one subject, or of one team.
type Query struct {
	// Subject is a job or DAG id; exactly one of Subject and Team is set.
	Subject string
	// Team is a team: its records, whatever the subject.
	Team string
	// Since, if set, leaves out records made before it.
	Since time.Time
	// Limit bounds the records returned. Required, positive.
	Limit int
}

// Validate reports every bad field.
func (q Query) Validate() error {
	var errs []error
	if (q.Subject == "") == (q.Team == "") {
		errs = append(errs, fmt.Errorf("audit query: job and team: set exactly one: %w", ErrInvalid))
	}
	if q.Limit < 1 {
		errs = append(errs, fmt.Errorf("audit query: limit %d: must be positive: %w", q.Limit, ErrInvalid))
	}
	return errors.Join(errs...)
}

// Producer produces records synchronously (*kgo.Client).
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Config configures a Trail.
type Config struct {
	// Store keeps the records. Required.
	Store Store
	// Producer publishes them on Topic; nil publishes nothing.
	Producer Producer
	// Topic is sundial.audit (topics.Names.Audit). Required with Producer.
	Topic string
	// Retention is how long a record is kept. Default DefaultRetention;
	// at least a second (Cassandra's TTL unit).
	Retention time.Duration
}

// Validate reports every bad field, after defaults are applied.
func (c Config) Validate() error {
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("audit config: store: required"))
	}
	if c.Producer != nil && c.Topic == "" {
		errs = append(errs, errors.New("audit config: topic: required to publish"))
	}
	if c.Retention < time.Second {
		errs = append(errs, fmt.Errorf("audit config: retention %s: must be at least 1s", c.Retention))
	}
	return errors.Join(errs...)
}

// Trail keeps records and publishes them. It is safe for concurrent use.
type Trail struct {
	cfg Config
}

var _ Recorder = (*Trail)(nil)

// New returns a Trail, or every configuration error.
func New(cfg Config) (*Trail, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Retention = cmp.Or(cfg.Retention, DefaultRetention)
	return &Trail{cfg: cfg}, nil
}

// Retention is how long the trail keeps a record.
func (t *Trail) Retention() time.Duration { return t.cfg.Retention }

// Keep validates rec and writes it to the store, without publishing it.
func (t *Trail) Keep(ctx context.Context, rec Record) error {
	return t.KeepAll(ctx, []Record{rec})
}

// KeepAll validates recs and writes them to the store in one call, without
// publishing them: the registry keeps the records of the definitions it
// handles at once together. An invalid record fails the call before
// anything is written. Secrets are taken out of their changes first.
func (t *Trail) KeepAll(ctx context.Context, recs []Record) error {
	recs = append([]Record(nil), recs...)
	for i, rec := range recs {
		if err := rec.Validate(); err != nil {
			return err
		}
		recs[i].Changes = redactChanges(rec.Changes)
	}
	if err := t.cfg.Store.PutAudits(ctx, recs, t.cfg.Retention); err != nil {
		if len(recs) == 1 {
			return fmt.Errorf("keep audit record %s: %w", recs[0].ID, err)
		}
		return fmt.Errorf("keep %d audit records: %w", len(recs), err)
	}
	return nil
}

// Record keeps rec, then publishes it on sundial.audit. An error means it
// may be kept but not published: call again, recording is idempotent.
func (t *Trail) Record(ctx context.Context, rec Record) error {
	if err := t.Keep(ctx, rec); err != nil {
		return err
	}
	if t.cfg.Producer == nil {
		return nil
	}
	kr, err := KafkaRecord(t.cfg.Topic, rec)
	if err != nil {
		return err
	}
	if err := t.cfg.Producer.ProduceSync(ctx, kr).FirstErr(); err != nil {
		return fmt.Errorf("publish audit record %s on %s: %w", rec.ID, t.cfg.Topic, err)
	}
	return nil
}

// List returns the records q selects, newest first, with secrets taken
// out of their changes: a row kept before Diff redacted still holds them
// until its retention ends, and is never shown with them.
func (t *Trail) List(ctx context.Context, q Query) ([]Record, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	recs, err := t.cfg.Store.ListAudit(ctx, q)
	for i := range recs {
		recs[i].Changes = redactChanges(recs[i].Changes)
	}
	return recs, err
}
