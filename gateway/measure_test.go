package gateway_test

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/worker"
)

// TestMeasureGatewayCost prints the cost of the gateway docs/architecture.md
// quotes: the same 400 handler runs executed by a handler compiled into the
// stock runner, then by two team workers through the gateway, on the local
// stack. It asserts nothing (timing is not behaviour) and runs only when
// SUNDIAL_MEASURE_GATEWAY is set:
//
//	SUNDIAL_MEASURE_GATEWAY=1 go test -count=1 -v -run TestMeasureGatewayCost ./gateway/
func TestMeasureGatewayCost(t *testing.T) {
	if os.Getenv("SUNDIAL_MEASURE_GATEWAY") == "" {
		t.Skip("a measurement: set SUNDIAL_MEASURE_GATEWAY=1 to run it")
	}
	const n = 400
	measure := func(t *testing.T, viaGateway bool) {
		var mu sync.Mutex
		var lat []time.Duration
		var produced time.Time
		done := make(chan struct{})
		record := func() {
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, time.Since(produced))
			if len(lat) == n {
				close(done)
			}
		}
		var s *stack
		if viaGateway {
			s = setup(t)
			h := func(context.Context, *worker.Run) error { record(); return nil }
			s.startWorker("m-1", "team-a", nil, map[string]worker.Handler{"m": h})
			s.startWorker("m-2", "team-a", nil, map[string]worker.Handler{"m": h})
		} else {
			s = setupWith(t, stackOpts{handlers: map[string]target.Handler{"m": target.HandlerFunc(func(context.Context, *sundialv1.Run) error { record(); return nil })}})
		}
		// warm up: one run through the whole path
		warm := handlerRun("team-a", "warm", "m", time.Now().Add(-time.Hour))
		s.produce(warm)
		s.events.waitState(t, warm.GetRunId(), sundialv1.RunState_RUN_STATE_SUCCEEDED)
		mu.Lock()
		lat = nil
		mu.Unlock()
		var runs []*sundialv1.Run
		due := time.Now().Add(-time.Minute)
		for i := range n {
			runs = append(runs, handlerRun("team-a", "job-"+string(rune('a'+i%26))+time.Duration(i).String(), "m", due))
		}
		mu.Lock()
		produced = time.Now()
		mu.Unlock()
		s.produce(runs...)
		<-done
		took := time.Since(produced)
		mu.Lock()
		slices.Sort(lat)
		p95 := lat[len(lat)*95/100]
		mu.Unlock()
		t.Logf("gateway=%v: %d runs in %s: %.0f runs/s, p95 produce-to-handler %s", viaGateway, n, took.Round(time.Millisecond), float64(n)/took.Seconds(), p95.Round(time.Millisecond))
	}
	t.Run("stock", func(t *testing.T) { measure(t, false) })
	t.Run("gateway", func(t *testing.T) { measure(t, true) })
}
