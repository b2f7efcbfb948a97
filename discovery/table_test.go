package discovery

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func member(id, pool string, hb time.Time) Member {
	return Member{ID: id, Pool: pool, Capacity: 4, Heartbeat: hb, Interval: time.Second}
}

func ids(ms []Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// TestExpiryBound: a member that stops heartbeating stays live for exactly
// ExpiryFactor × its interval after its last heartbeat, then is expired.
func TestExpiryBound(t *testing.T) {
	t.Parallel()
	tb := NewTable(3, time.Hour)
	require.True(t, tb.Announce(member("a", "p", t0), t0))
	require.True(t, tb.Announce(member("b", "p", t0), t0))
	// b keeps heartbeating, a does not.
	for i := 1; i <= 3; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		tb.Announce(member("b", "p", now), now)
		tb.Expire(now)
		assert.Equal(t, []string{"a", "b"}, ids(tb.Live("p")), "at %d s", i)
	}
	assert.False(t, tb.Expire(t0.Add(3*time.Second)), "the bound itself is still live")
	assert.True(t, tb.Expire(t0.Add(3*time.Second+time.Nanosecond)))
	assert.Equal(t, []string{"b"}, ids(tb.Live("p")))
	a, ok := tb.Member("a")
	require.True(t, ok)
	assert.Equal(t, Expired, a.State)
	// A new heartbeat brings it back.
	now := t0.Add(4 * time.Second)
	tb.Announce(member("a", "p", now), now)
	assert.Equal(t, []string{"a", "b"}, ids(tb.Live("p")))
}

func TestTombstoneLeavesAtOnceAndStaysListed(t *testing.T) {
	t.Parallel()
	tb := NewTable(3, time.Minute)
	tb.Announce(member("a", "p", t0), t0)
	require.True(t, tb.Leave("a"))
	assert.False(t, tb.Leave("a"), "a second tombstone changes nothing")
	assert.False(t, tb.Leave("unknown"))
	assert.Empty(t, tb.Live(""))
	all := tb.All()
	require.Len(t, all, 1)
	assert.Equal(t, Left, all[0].State)
	assert.Equal(t, map[string]int{"p": 0}, tb.LiveCounts(), "a pool emptied reads 0")
	// Forgotten after the retention.
	assert.True(t, tb.Expire(t0.Add(time.Minute+time.Nanosecond)))
	assert.Empty(t, tb.All())
}

func TestHistoryAndOrder(t *testing.T) {
	t.Parallel()
	tb := NewTable(3, time.Minute)
	now := t0.Add(10 * time.Second)
	// Read from the topic's history: already past its bound.
	tb.Announce(member("old", "p", t0), now)
	m, ok := tb.Member("old")
	require.True(t, ok)
	assert.Equal(t, Expired, m.State)
	// Past the retention: not listed at all.
	assert.False(t, tb.Announce(member("ancient", "p", now.Add(-2*time.Minute)), now))
	_, ok = tb.Member("ancient")
	assert.False(t, ok)
	// An older announcement than the newest is ignored.
	tb.Announce(member("x", "p", now), now)
	assert.False(t, tb.Announce(member("x", "q", now.Add(-time.Second)), now))
	m, _ = tb.Member("x")
	assert.Equal(t, "p", m.Pool)
}

func TestLiveByPoolIsACopy(t *testing.T) {
	t.Parallel()
	tb := NewTable(3, time.Minute)
	a := member("a", "p", t0)
	a.Labels = map[string]string{"zone": "1"}
	tb.Announce(member("c", "q", t0), t0)
	tb.Announce(a, t0)
	tb.Announce(member("b", "p", t0), t0)
	assert.Equal(t, []string{"a", "b"}, ids(tb.Live("p")))
	assert.Equal(t, []string{"a", "b", "c"}, ids(tb.Live("")))
	assert.Equal(t, map[string]int{"p": 2, "q": 1}, tb.LiveCounts())
	got := tb.Live("p")
	got[0].Labels["zone"] = "changed"
	m, _ := tb.Member("a")
	assert.Equal(t, "1", m.Labels["zone"])
	a.Labels["zone"] = "changed too"
	m, _ = tb.Member("a")
	assert.Equal(t, "1", m.Labels["zone"], "the table keeps its own copy")
}

func TestFree(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 3, Member{Capacity: 4, InFlight: 1}.Free())
	assert.Equal(t, 0, Member{Capacity: 4, InFlight: 9}.Free())
}
