package gateway_test

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sundialhq/sundial/assemble"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/worker"
)

// TestMeasureGatewayCost prints the cost of the gateway docs/architecture.md
// quotes: the same 2,000 handler runs, due at once, executed by a handler
// compiled into the stock runner (64 workers), then by two team workers of
// 32 slots each through the gateway (its runner at
// assemble.DefaultGatewayConcurrency), on the local stack, and the ratio
// of the two rates. It asserts nothing (timing is not behaviour) and runs only when
// SUNDIAL_MEASURE_GATEWAY is set:
//
//	SUNDIAL_MEASURE_GATEWAY=1 go test -count=1 -v -run TestMeasureGatewayCost ./gateway/
func TestMeasureGatewayCost(t *testing.T) {
	if os.Getenv("SUNDIAL_MEASURE_GATEWAY") == "" {
		t.Skip("a measurement: set SUNDIAL_MEASURE_GATEWAY=1 to run it")
	}
	const n = 2000
	rates := map[bool]float64{}
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
			s = setupWith(t, stackOpts{gatewayConcurrency: assemble.DefaultGatewayConcurrency})
			h := func(context.Context, *worker.Run) error { record(); return nil }
			for _, id := range []string{"m-1", "m-2"} {
				s.startWorkerWith(worker.Config{APIURL: s.apiURL, Token: "team-a:operator", ID: id, Concurrency: 32}, map[string]worker.Handler{"m": h})
			}
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
		rates[viaGateway] = float64(n) / took.Seconds()
		t.Logf("gateway=%v: %d runs in %s: %.0f runs/s, p95 produce-to-handler %s", viaGateway, n, took.Round(time.Millisecond), rates[viaGateway], p95.Round(time.Millisecond))
	}
	t.Run("stock", func(t *testing.T) { measure(t, false) })
	t.Run("gateway", func(t *testing.T) { measure(t, true) })
	if rates[false] > 0 && rates[true] > 0 {
		t.Logf("the gateway's rate is %.0f%% of the stock runner's", 100*rates[true]/rates[false])
	}
}
