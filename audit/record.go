package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Actions of definition changes; operator actions name their own
// ("job.paused", "run.cancelled", ...).
const (
	ActionJobCreated = "job.created"
	ActionJobUpdated = "job.updated"
	ActionJobDeleted = "job.deleted"
	ActionDagCreated = "dag.created"
	ActionDagUpdated = "dag.updated"
	ActionDagDeleted = "dag.deleted"
)

// Record is one entry of the trail.
type Record struct {
	// ID identifies the change: recording the same ID again replaces the
	// row. Records made in the same millisecond are listed newest first by
	// ID, so IDs should sort in the order of their changes. Required.
	ID string `json:"id"`
	// At is when the change was made (a definition's record timestamp).
	// Required.
	At time.Time `json:"at"`
	// Actor is who made it: "kafka:<topic>", "token:<id>",
	// "oidc:<issuer>#<subject>". Required.
	Actor string `json:"actor"`
	// Action is what was done, for example ActionJobUpdated. Required.
	Action string `json:"action"`
	// Subject is the job or DAG id. Required.
	Subject string `json:"subject"`
	// Team owns the subject; empty for a job without owner_team.
	Team string `json:"team,omitempty"`
	// RevisionBefore and RevisionAfter are the store revisions before and
	// after the change; 0 when there was none (before a creation).
	RevisionBefore int64 `json:"revision_before,omitempty"`
	RevisionAfter  int64 `json:"revision_after,omitempty"`
	// Changes are the fields that differ, in field order (Diff).
	Changes []Change `json:"changes,omitempty"`
	// Detail is free text: a reason, a range, a run id.
	Detail string `json:"detail,omitempty"`
}

// ErrInvalid is wrapped by the errors of a Record or Query that no retry
// can fix.
var ErrInvalid = errors.New("invalid")

// Validate reports every missing field (errors.Is ErrInvalid).
func (r Record) Validate() error {
	var errs []error
	for _, f := range []struct{ name, value string }{
		{"id", r.ID}, {"actor", r.Actor}, {"action", r.Action}, {"subject", r.Subject},
	} {
		if strings.TrimSpace(f.value) == "" {
			errs = append(errs, fmt.Errorf("audit record: %s: required: %w", f.name, ErrInvalid))
		}
	}
	if r.At.IsZero() {
		errs = append(errs, fmt.Errorf("audit record: at: required: %w", ErrInvalid))
	}
	return errors.Join(errs...)
}

// Recorder records an action in the trail (*Trail). The API server and the
// operator actions call it once their action has taken effect.
type Recorder interface {
	Record(ctx context.Context, rec Record) error
}

// ContentType is the content-type header of sundial.audit's records.
const ContentType = "application/json"

// KafkaRecord is rec as a record of topic (sundial.audit): keyed by its
// subject, so that one subject's records keep their order, with its JSON
// as the value. Secrets are taken out of its changes first.
func KafkaRecord(topic string, rec Record) (*kgo.Record, error) {
	rec.Changes = redactChanges(rec.Changes)
	value, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode audit record %s: %w", rec.ID, err)
	}
	return &kgo.Record{
		Topic: topic, Key: []byte(rec.Subject), Value: value, Timestamp: rec.At,
		Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte(ContentType)}},
	}, nil
}
