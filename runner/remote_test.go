package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sundialhq/sundial/discovery"
)

func TestPlaceHandlerConsidersThePoolTheTeamAndTheHandler(t *testing.T) {
	t.Parallel()
	members := []discovery.Member{
		{ID: "stock", Pool: "default", State: discovery.Live},
		{ID: "inproc", Pool: "default", State: discovery.Live, Handlers: []discovery.ServedHandler{{Name: "billing.invoice"}}},
		{ID: "inproc-search", Pool: "search", State: discovery.Live, Handlers: []discovery.ServedHandler{{Name: "reindex"}}},
		{ID: "gw-1", Pool: "gateway", State: discovery.Live, Handlers: []discovery.ServedHandler{
			{Team: "team-a", Name: "work", Pool: "default"}, {Team: "team-a", Name: "work", Pool: "blue"}, {Team: "team-a", Name: "blue.only", Pool: "blue"},
		}},
		{ID: "gw-2", Pool: "gateway", State: discovery.Live, Handlers: []discovery.ServedHandler{
			{Team: "team-b", Name: "work", Pool: "default"}, {Team: "team-a", Name: "work", Pool: "green"},
		}},
		{ID: "gw-gone", Pool: "gateway", State: discovery.Expired, Handlers: []discovery.ServedHandler{{Team: "team-a", Name: "work", Pool: "red"}}},
		{ID: "bad id", Pool: "gateway", State: discovery.Live, Handlers: []discovery.ServedHandler{{Team: "team-a", Name: "work", Pool: "red"}}},
	}
	for _, tc := range []struct {
		name string
		self string
		run  handlerRun
		want handlerPlace
	}{
		{"a runner that serves the run executes it here", "gw-1",
			handlerRun{Pool: "blue", Team: "team-a", Handler: "work", Here: true}, handlerPlace{Here: true}},
		{"a team's handler of the default pool goes to its team's workers of that pool only", "stock",
			handlerRun{Pool: "default", Team: "team-a", Handler: "work"}, handlerPlace{Executors: []string{"gw-1"}}},
		{"the same handler of another pool goes to that pool's workers only", "stock",
			handlerRun{Pool: "green", Team: "team-a", Handler: "work"}, handlerPlace{Executors: []string{"gw-2"}}},
		{"the other team's run goes to its own team's workers", "stock",
			handlerRun{Pool: "default", Team: "team-b", Handler: "work"}, handlerPlace{Executors: []string{"gw-2"}}},
		{"a pool's workers may serve handlers the others do not", "stock",
			handlerRun{Pool: "blue", Team: "team-a", Handler: "blue.only"}, handlerPlace{Executors: []string{"gw-1"}}},
		{"a handler the pool's workers lack waits, though another pool serves it", "stock",
			handlerRun{Pool: "green", Team: "team-a", Handler: "blue.only"},
			handlerPlace{Why: "no live worker of team team-a serves handler blue.only in pool green"}},
		{"a compiled handler serves every team of its executor's pool", "stock",
			handlerRun{Pool: "default", Team: "team-c", Handler: "billing.invoice"}, handlerPlace{Executors: []string{"inproc"}}},
		{"a compiled handler serves no other pool", "stock",
			handlerRun{Pool: "search", Team: "team-c", Handler: "billing.invoice"},
			handlerPlace{Why: "no live worker of team team-c serves handler billing.invoice in pool search"}},
		{"an in-process worker of a named pool serves that pool's runs", "stock",
			handlerRun{Pool: "search", Team: "team-c", Handler: "reindex"}, handlerPlace{Executors: []string{"inproc-search"}}},
		{"members that expired or whose id names no topic do not count", "stock",
			handlerRun{Pool: "red", Team: "team-a", Handler: "work"},
			handlerPlace{Why: "no live worker of team team-a serves handler work in pool red"}},
		{"a runner never hands a run to itself", "gw-1",
			handlerRun{Pool: "blue", Team: "team-a", Handler: "work"},
			handlerPlace{Why: "no live worker of team team-a serves handler work in pool blue"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, placeHandler(tc.run, members, tc.self))
		})
	}
}
