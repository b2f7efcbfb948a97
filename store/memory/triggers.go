package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/sundialhq/sundial/store"
)

type triggerKey struct {
	due     time.Time
	expires time.Time
}

// TriggerDedupe implements store.Triggers.
func (s *Store) TriggerDedupe(_ context.Context, jobID, key string, due time.Time, ttl time.Duration) (time.Time, error) {
	if err := store.CheckTriggerDedupe(jobID, key, due, ttl); err != nil {
		return time.Time{}, fmt.Errorf("trigger dedupe: %w", err)
	}
	due = store.Truncate(due)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	k := jobID + "\x00" + key
	if got, ok := s.triggers[k]; ok && now.Before(got.expires) {
		return got.due, nil
	}
	s.triggers[k] = triggerKey{due: due, expires: now.Add(ttl)}
	if len(s.triggers)%1024 == 0 { // forget expired keys now and then
		for k, v := range s.triggers {
			if !now.Before(v.expires) {
				delete(s.triggers, k)
			}
		}
	}
	return due, nil
}
