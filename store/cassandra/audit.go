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

// PutAudit writes one record as PutAudits does.
func (s *Store) PutAudit(ctx context.Context, rec audit.Record, ttl time.Duration) error {
	return s.PutAudits(ctx, []audit.Record{rec}, ttl)
}

// PutAudits implements audit.Store: each record goes into its subject's
// partition and, when it has a team, into the team's, both with the TTL.
// The rows of all the records go together (writeByPartition): a team's rows
// in one mutation, and one request for many records when every node holds
// every partition, not two requests per record. Plain writes of the same
// key are idempotent, so a retry after a partial failure completes them.
func (s *Store) PutAudits(ctx context.Context, recs []audit.Record, ttl time.Duration) error {
	secs := int(ttl / time.Second)
	if secs < 1 {
		return fmt.Errorf("put %d audit records: ttl %s: must be at least 1s: %w", len(recs), ttl, store.ErrInvalid)
	}
	ks := s.cfg.Keyspace
	bySubject := fmt.Sprintf(`INSERT INTO %s.audit_by_subject
		(subject, at, id, actor, action, team, revision_before, revision_after, changes, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?`, ks)
	byTeam := fmt.Sprintf(`INSERT INTO %s.audit_by_team
		(team, at, id, subject, actor, action, revision_before, revision_after, changes, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?`, ks)
	stmts := make([]partStmt, 0, 2*len(recs))
	for _, rec := range recs {
		changes, err := json.Marshal(rec.Changes)
		if err != nil {
			return fmt.Errorf("put audit record %s: encode changes: %w", rec.ID, err)
		}
		at := rec.At.UTC().Truncate(time.Millisecond)
		n := len(rec.Subject) + len(rec.ID) + len(rec.Actor) + len(rec.Action) + len(rec.Team) + len(changes) + len(rec.Detail)
		stmts = append(stmts, partStmt{part: "subject/" + rec.Subject, stmt: bySubject, bytes: n, args: []any{
			rec.Subject, at, rec.ID, rec.Actor, rec.Action, rec.Team, rec.RevisionBefore, rec.RevisionAfter, string(changes), rec.Detail, secs}})
		if rec.Team != "" {
			stmts = append(stmts, partStmt{part: "team/" + rec.Team, stmt: byTeam, bytes: n, args: []any{
				rec.Team, at, rec.ID, rec.Subject, rec.Actor, rec.Action, rec.RevisionBefore, rec.RevisionAfter, string(changes), rec.Detail, secs}})
		}
	}
	// The registry writes a record per definition it registers: batches
	// as large as those of the job rows (maxRowBatchBytes), since a
	// created job's record carries every field of its definition.
	if err := s.writeByPartition(ctx, stmts, s.cfg.BatchSize, maxRowBatchBytes); err != nil {
		if len(recs) == 1 {
			return fmt.Errorf("put audit record %s of %s: %w", recs[0].ID, recs[0].Subject, err)
		}
		return fmt.Errorf("put %d audit records (the first %s of %s): %w", len(recs), recs[0].ID, recs[0].Subject, err)
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
