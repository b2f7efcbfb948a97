package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sundialhq/sundial/discovery"
)

// TestAdoptChanges: a member consumes the directed topics of its pool's
// members that left or expired, and gives each back once its member is live
// again or no longer listed.
func TestAdoptChanges(t *testing.T) {
	t.Parallel()
	m := func(id, pool string, s discovery.State) discovery.Member {
		return discovery.Member{ID: id, Pool: pool, State: s}
	}
	tests := []struct {
		name      string
		members   []discovery.Member
		adopted   []string
		wantAdopt []string
		wantLeave []string
	}{
		{"all live: nothing", []discovery.Member{m("me", "p", discovery.Live), m("b", "p", discovery.Live)}, nil, nil, nil},
		{"expired and left: adopted", []discovery.Member{m("me", "p", discovery.Live), m("c", "p", discovery.Left), m("b", "p", discovery.Expired)}, nil, []string{"b", "c"}, nil},
		{"adopted already: nothing more", []discovery.Member{m("b", "p", discovery.Expired)}, []string{"b"}, nil, nil},
		{"live again: left to it", []discovery.Member{m("b", "p", discovery.Live)}, []string{"b"}, nil, []string{"b"}},
		{"no longer listed: left", nil, []string{"b"}, nil, []string{"b"}},
		{"another pool's: not adopted", []discovery.Member{m("b", "q", discovery.Expired)}, nil, nil, nil},
		{"itself: never adopted", []discovery.Member{m("me", "p", discovery.Expired)}, nil, nil, nil},
		{"an id that cannot name a topic: not adopted", []discovery.Member{m("b/../x", "p", discovery.Expired)}, nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			adopted := map[string]bool{}
			for _, id := range tt.adopted {
				adopted[id] = true
			}
			adopt, leave := adoptChanges(tt.members, "p", "me", adopted)
			assert.Equal(t, tt.wantAdopt, adopt, "adopt")
			assert.Equal(t, tt.wantLeave, leave, "leave")
		})
	}
}

// TestForgettable: a member deletes the directed topics of its pool's other
// members that left or expired at least the bound ago, never a live one's,
// its own, another pool's, or one whose id cannot name a topic.
func TestForgettable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	m := func(id, pool string, s discovery.State, ago time.Duration) discovery.Member {
		return discovery.Member{ID: id, Pool: pool, State: s, Heartbeat: now.Add(-ago)}
	}
	tests := []struct {
		name    string
		members []discovery.Member
		want    []string
	}{
		{"left and expired long enough: both", []discovery.Member{m("c", "p", discovery.Left, 6*time.Minute), m("b", "p", discovery.Expired, 5*time.Minute)}, []string{"b", "c"}},
		{"gone for less than the bound: kept", []discovery.Member{m("b", "p", discovery.Expired, 5*time.Minute-time.Second)}, nil},
		{"live, even with an old heartbeat: kept", []discovery.Member{m("b", "p", discovery.Live, time.Hour)}, nil},
		{"itself: kept", []discovery.Member{m("me", "p", discovery.Left, time.Hour)}, nil},
		{"another pool's: kept", []discovery.Member{m("b", "q", discovery.Left, time.Hour)}, nil},
		{"an id that cannot name a topic: kept", []discovery.Member{m("b/../x", "p", discovery.Left, time.Hour)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, forgettable(tt.members, "p", "me", now, 5*time.Minute))
		})
	}
}

// TestDrained: a directed topic may be deleted only when the group's
// committed offset of every partition is at its end, or the partition never
// held a record.
func TestDrained(t *testing.T) {
	t.Parallel()
	const topic = "sundial.runs.direct.b"
	ends := func(offs ...int64) kadm.ListedOffsets {
		l := kadm.ListedOffsets{topic: {}}
		for p, o := range offs {
			l[topic][int32(p)] = kadm.ListedOffset{Topic: topic, Partition: int32(p), Offset: o}
		}
		return l
	}
	committed := func(offs map[int32]int64) kadm.OffsetResponses {
		r := kadm.OffsetResponses{}
		for p, o := range offs {
			r.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: topic, Partition: p, At: o}})
		}
		return r
	}
	tests := []struct {
		name      string
		ends      kadm.ListedOffsets
		committed kadm.OffsetResponses
		want      bool
	}{
		{"committed at the end", ends(7), committed(map[int32]int64{0: 7}), true},
		{"a run not yet consumed", ends(7), committed(map[int32]int64{0: 6}), false},
		{"never written, never committed", ends(0), committed(nil), true},
		{"written, never committed", ends(3), committed(nil), false},
		{"one partition of two behind", ends(2, 5), committed(map[int32]int64{0: 2, 1: 4}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, drained(tt.ends, tt.committed, topic))
		})
	}
}
