package discovery

import (
	"cmp"
	"slices"
	"time"
)

// Table is the membership core: announcements, tombstones and expiries
// applied at times given as arguments. It does no I/O and is not safe for
// concurrent use; the Directory guards it.
type Table struct {
	factor    int
	retention time.Duration
	members   map[string]*Member
}

// NewTable returns an empty table whose members expire after factor times
// their heartbeat interval and are forgotten retention after their last
// heartbeat.
func NewTable(factor int, retention time.Duration) *Table {
	return &Table{factor: factor, retention: retention, members: map[string]*Member{}}
}

// bound is how long after its last heartbeat m stays live.
func (t *Table) bound(m *Member) time.Duration { return time.Duration(t.factor) * m.Interval }

// Announce applies an announcement read at now and reports whether the
// table changed. An announcement older than the member's newest is
// ignored; one already past its bound (read from the topic's history)
// records the member as expired.
func (t *Table) Announce(m Member, now time.Time) bool {
	if old, ok := t.members[m.ID]; ok && m.Heartbeat.Before(old.Heartbeat) {
		return false
	}
	if now.Sub(m.Heartbeat) > t.retention {
		return t.forget(m.ID)
	}
	m = m.clone()
	m.State = Live
	if now.Sub(m.Heartbeat) > t.bound(&m) {
		m.State = Expired
	}
	t.members[m.ID] = &m
	return true
}

// Leave applies the tombstone of id and reports whether the table changed.
// A tombstone of an unknown member changes nothing: there is nothing to
// list.
func (t *Table) Leave(id string) bool {
	m, ok := t.members[id]
	if !ok || m.State == Left {
		return false
	}
	m.State = Left
	return true
}

// Expire marks the live members whose bound has passed at now as expired,
// forgets those past the retention, and reports whether the table changed.
func (t *Table) Expire(now time.Time) bool {
	changed := false
	for id, m := range t.members {
		age := now.Sub(m.Heartbeat)
		switch {
		case age > t.retention:
			changed = t.forget(id) || changed
		case m.State == Live && age > t.bound(m):
			m.State = Expired
			changed = true
		}
	}
	return changed
}

func (t *Table) forget(id string) bool {
	_, ok := t.members[id]
	delete(t.members, id)
	return ok
}

// Live returns the live members of pool, by id; every pool's when pool is
// empty.
func (t *Table) Live(pool string) []Member {
	var out []Member
	for _, m := range t.members {
		if m.State == Live && (pool == "" || m.Pool == pool) {
			out = append(out, m.clone())
		}
	}
	sortMembers(out)
	return out
}

// All returns every member listed, live or not, by pool then id.
func (t *Table) All() []Member {
	out := make([]Member, 0, len(t.members))
	for _, m := range t.members {
		out = append(out, m.clone())
	}
	sortMembers(out)
	return out
}

// Member returns the member id, live or not.
func (t *Table) Member(id string) (Member, bool) {
	m, ok := t.members[id]
	if !ok {
		return Member{}, false
	}
	return m.clone(), true
}

// LiveCounts returns the live members per pool, with 0 for the pools of
// members listed but none live.
func (t *Table) LiveCounts() map[string]int {
	out := map[string]int{}
	for _, m := range t.members {
		if m.State == Live {
			out[m.Pool]++
		} else {
			out[m.Pool] += 0
		}
	}
	return out
}

func sortMembers(ms []Member) {
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Or(cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.ID, b.ID)) })
}
