package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"

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
