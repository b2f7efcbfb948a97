package cassandra

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/store"
)

var _ audit.Store = (*Store)(nil)

// PutAudit implements audit.Store: the record goes into its subject's
// partition and, when it has a team, into the team's, both with the TTL.
// Two plain writes of the same key are idempotent, so a retry after a
// partial failure completes the pair.
func (s *Store) PutAudit(ctx context.Context, rec audit.Record, ttl time.Duration) error {
	secs := int(ttl / time.Second)
	if secs < 1 {
		return fmt.Errorf("put audit record %s: ttl %s: must be at least 1s: %w", rec.ID, ttl, store.ErrInvalid)
	}
	changes, err := json.Marshal(rec.Changes)
	if err != nil {
		return fmt.Errorf("put audit record %s: encode changes: %w", rec.ID, err)
	}
	ks := s.cfg.Keyspace
	at := rec.At.UTC().Truncate(time.Millisecond)
	err = s.idempotent(ctx, fmt.Sprintf(`INSERT INTO %s.audit_by_subject
		(subject, at, id, actor, action, team, revision_before, revision_after, changes, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?`, ks),
		rec.Subject, at, rec.ID, rec.Actor, rec.Action, rec.Team, rec.RevisionBefore, rec.RevisionAfter, string(changes), rec.Detail, secs).Exec()
	if err != nil {
		return fmt.Errorf("put audit record %s of %s: %w", rec.ID, rec.Subject, err)
	}
	if rec.Team == "" {
		return nil
	}
	err = s.idempotent(ctx, fmt.Sprintf(`INSERT INTO %s.audit_by_team
		(team, at, id, subject, actor, action, revision_before, revision_after, changes, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?`, ks),
		rec.Team, at, rec.ID, rec.Subject, rec.Actor, rec.Action, rec.RevisionBefore, rec.RevisionAfter, string(changes), rec.Detail, secs).Exec()
	if err != nil {
		return fmt.Errorf("put audit record %s of team %s: %w", rec.ID, rec.Team, err)
	}
	return nil
}

// ListAudit implements audit.Store, reading one partition newest first.
func (s *Store) ListAudit(ctx context.Context, q audit.Query) ([]audit.Record, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	ks := s.cfg.Keyspace
	since := q.Since
	if since.IsZero() {
		since = time.UnixMilli(0)
	}
	var (
		iter *gocql.Iter
		key  string
	)
	if q.Subject != "" {
		key = q.Subject
		iter = s.idempotent(ctx, fmt.Sprintf(`SELECT subject, at, id, actor, action, team, revision_before, revision_after, changes, detail
			FROM %s.audit_by_subject WHERE subject = ? AND at >= ? LIMIT ?`, ks), q.Subject, since, q.Limit).Iter()
	} else {
		key = q.Team
		iter = s.idempotent(ctx, fmt.Sprintf(`SELECT subject, at, id, actor, action, team, revision_before, revision_after, changes, detail
			FROM %s.audit_by_team WHERE team = ? AND at >= ? LIMIT ?`, ks), q.Team, since, q.Limit).Iter()
	}
	var (
		out     []audit.Record
		rec     audit.Record
		changes string
	)
	for iter.Scan(&rec.Subject, &rec.At, &rec.ID, &rec.Actor, &rec.Action, &rec.Team, &rec.RevisionBefore, &rec.RevisionAfter, &changes, &rec.Detail) {
		rec.At = rec.At.UTC()
		if changes != "" && changes != "null" {
			if err := json.Unmarshal([]byte(changes), &rec.Changes); err != nil {
				_ = iter.Close()
				return nil, fmt.Errorf("list audit records of %s: record %s: decode changes: %w", key, rec.ID, err)
			}
		}
		out = append(out, rec)
		rec, changes = audit.Record{}, ""
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("list audit records of %s: %w", key, err)
	}
	return out, nil
}
