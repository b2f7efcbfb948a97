package cassandra

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gocql/gocql"

	"github.com/sundialhq/sundial/store"
)

// TriggerDedupe implements store.Triggers with a lightweight transaction:
// the first insert of a (job, key) wins, and every later one reads the
// winner's due time from the transaction's answer.
func (s *Store) TriggerDedupe(ctx context.Context, jobID, key string, due time.Time, ttl time.Duration) (time.Time, error) {
	if err := store.CheckTriggerDedupe(jobID, key, due, ttl); err != nil {
		return time.Time{}, fmt.Errorf("trigger dedupe: %w", err)
	}
	due = ms(due)
	seconds := int(min(math.Ceil(ttl.Seconds()), math.MaxInt32))
	ks := s.cfg.Keyspace
	existing := map[string]any{}
	applied, err := s.query(ctx, fmt.Sprintf(`INSERT INTO %s.trigger_keys (job_id, key, due) VALUES (?, ?, ?) IF NOT EXISTS USING TTL ?`, ks),
		jobID, key, due, seconds).MapScanCAS(existing)
	switch {
	case err == nil && applied:
		return due, nil
	case err == nil:
		if first, ok := existing["due"].(time.Time); ok {
			return first.UTC(), nil
		}
		return time.Time{}, fmt.Errorf("trigger dedupe %q key %q: the existing row has no due time", jobID, key)
	case !casUnknown(err):
		return time.Time{}, fmt.Errorf("trigger dedupe %q key %q: %w", jobID, key, err)
	}
	// The transaction may or may not have applied: a serial read sees the
	// winner either way.
	var first time.Time
	rerr := s.serialRead(ctx, fmt.Sprintf(`SELECT due FROM %s.trigger_keys WHERE job_id = ? AND key = ?`, ks), jobID, key).Scan(&first)
	if errors.Is(rerr, gocql.ErrNotFound) {
		return time.Time{}, fmt.Errorf("trigger dedupe %q key %q: %w; nothing was written", jobID, key, err)
	}
	if rerr != nil {
		return time.Time{}, fmt.Errorf("trigger dedupe %q key %q: %w; reading it back: %w", jobID, key, err, rerr)
	}
	return first.UTC(), nil
}
