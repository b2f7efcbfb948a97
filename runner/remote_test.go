package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sundialhq/sundial/discovery"
)

func TestHandlerExecutorsServeTheRunsTeam(t *testing.T) {
	t.Parallel()
	members := []discovery.Member{
		{ID: "stock", State: discovery.Live},
		{ID: "inproc", State: discovery.Live, Handlers: []discovery.ServedHandler{{Name: "billing.invoice"}}},
		{ID: "gw-1", State: discovery.Live, Handlers: []discovery.ServedHandler{{Team: "team-a", Name: "work"}}},
		{ID: "gw-2", State: discovery.Live, Handlers: []discovery.ServedHandler{{Team: "team-b", Name: "work"}}},
		{ID: "gw-gone", State: discovery.Expired, Handlers: []discovery.ServedHandler{{Team: "team-a", Name: "work"}}},
		{ID: "bad id", State: discovery.Live, Handlers: []discovery.ServedHandler{{Team: "team-a", Name: "work"}}},
	}
	for _, tc := range []struct {
		name, self, team, handler string
		want                      []string
	}{
		{"a team's handler goes to its team's gateway only", "stock", "team-a", "work", []string{"gw-1"}},
		{"the other team's to its own", "stock", "team-b", "work", []string{"gw-2"}},
		{"a handler for every team serves any team", "stock", "team-c", "billing.invoice", []string{"inproc"}},
		{"no member serves it", "stock", "team-c", "work", nil},
		{"never itself", "gw-1", "team-a", "work", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, handlerExecutors(members, tc.self, tc.team, tc.handler))
		})
	}
}
