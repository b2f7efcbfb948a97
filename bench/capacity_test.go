package bench

import (
	"context"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakePipeline answers a step like a pipeline whose capacity is capacity
// triggers/s: under it p95 is 80 ms, over it the backlog grows and p95 is
// 4 s. lossAbove, when set, loses runs above that rate with a good p95.
type fakePipeline struct {
	capacity  float64
	lossAbove float64
	rates     []float64
}

func (f *fakePipeline) measure(_ context.Context, rate float64) (CapacityStep, error) {
	f.rates = append(f.rates, rate)
	st := CapacityStep{Jobs: int(rate * CapacityPeriod.Seconds()), Expected: int64(rate * 30)}
	st.Trigger = Latency{Count: st.Expected, P95Ms: 80}
	if rate > f.capacity {
		st.Trigger.P95Ms = 4000
	}
	if f.lossAbove > 0 && rate > f.lossAbove {
		st.Lost = 3
	}
	st.SustainedPerSec = min(rate, f.capacity)
	return st, nil
}

func TestCapacitySearch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		search      CapacitySearch
		pipe        fakePipeline
		wantRates   []float64
		wantHighest float64
		wantFailing float64
		stopped     string
	}{
		{
			name:   "doubles, then bisects to within 10%",
			search: CapacitySearch{Start: 250, Max: 20000},
			pipe:   fakePipeline{capacity: 3000},
			// 4000 fails; 3000 passes; 3500 fails; 3250 fails: 3250 ≤ 3000 × 1.1.
			wantRates:   []float64{250, 500, 1000, 2000, 4000, 3000, 3500, 3250},
			wantHighest: 3000, wantFailing: 3250, stopped: "within 10%",
		},
		{
			name:        "stops at the max rate when it passes",
			search:      CapacitySearch{Start: 1000, Max: 3000},
			pipe:        fakePipeline{capacity: 1e9},
			wantRates:   []float64{1000, 2000, 3000},
			wantHighest: 3000, stopped: "max rate 3000/s passed",
		},
		{
			name:   "halves while nothing passes",
			search: CapacitySearch{Start: 1000, Max: 8000, Resolution: 0.25},
			pipe:   fakePipeline{capacity: 300},
			// 313 > 250 × 1.25, so one more step: 282 passes, and 313 ≤ 282 × 1.25.
			wantRates:   []float64{1000, 500, 250, 375, 313, 282},
			wantHighest: 282, wantFailing: 313, stopped: "within 25%",
		},
		{
			name:        "a lost run fails a step whatever its p95",
			search:      CapacitySearch{Start: 500, Max: 8000, Resolution: 0.5},
			pipe:        fakePipeline{capacity: 1e9, lossAbove: 1500},
			wantRates:   []float64{500, 1000, 2000, 1500},
			wantHighest: 1500, wantFailing: 2000, stopped: "within 50%",
		},
		{
			name:        "runs out of steps",
			search:      CapacitySearch{Start: 100, Max: 1e6, MaxSteps: 3},
			pipe:        fakePipeline{capacity: 1e9},
			wantRates:   []float64{100, 200, 400},
			wantHighest: 400, stopped: "3 steps",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pipe := tc.pipe
			res, err := tc.search.Run(context.Background(), pipe.measure)
			require.NoError(t, err)
			assert.Equal(t, tc.wantRates, pipe.rates)
			assert.Equal(t, tc.wantHighest, res.Highest)
			assert.Equal(t, tc.wantFailing, res.LowestFailing)
			assert.Contains(t, res.Stopped, tc.stopped)
			require.Len(t, res.Steps, len(tc.wantRates))
			for i, st := range res.Steps {
				assert.Equal(t, tc.wantRates[i], st.Rate, "step %d records its rate", i)
				assert.Equal(t, st.Rate <= pipe.capacity && (pipe.lossAbove == 0 || st.Rate <= pipe.lossAbove), st.Pass, "step %d at %.0f/s", i, st.Rate)
			}
		})
	}
}

func TestCapacitySearchNothingMeasuredFails(t *testing.T) {
	t.Parallel()
	res, err := CapacitySearch{Start: 100, Max: 100}.Run(context.Background(), func(context.Context, float64) (CapacityStep, error) {
		return CapacityStep{}, nil // no run started: p95 0 must not count as a pass
	})
	require.NoError(t, err)
	assert.False(t, res.Steps[0].Pass)
	assert.Zero(t, res.Highest)
}

func TestCapacitySearchMeasureError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	pipe := fakePipeline{capacity: 1e9}
	res, err := CapacitySearch{Start: 100, Max: 1000}.Run(context.Background(), func(ctx context.Context, rate float64) (CapacityStep, error) {
		if rate > 200 {
			return CapacityStep{}, boom
		}
		return pipe.measure(ctx, rate)
	})
	require.ErrorIs(t, err, boom)
	assert.ErrorContains(t, err, "capacity step 3 at 400/s")
	assert.Len(t, res.Steps, 2, "the steps measured before the error are kept")
}

func TestCapacitySearchValidate(t *testing.T) {
	t.Parallel()
	err := CapacitySearch{Start: 0.5, Max: 0.1, Resolution: 2, MaxSteps: -1}.Validate()
	for _, want := range []string{"start rate 0.5", "max rate 0.1", "resolution 2", "max steps -1"} {
		assert.ErrorContains(t, err, want)
	}
	_, err = CapacitySearch{Start: 100}.Run(context.Background(), nil)
	assert.ErrorContains(t, err, "max rate 0")
}

func TestCapacityReport(t *testing.T) {
	t.Parallel()
	pipe := fakePipeline{capacity: 3000}
	res, err := CapacitySearch{Start: 250, Max: 20000}.Run(context.Background(), pipe.measure)
	require.NoError(t, err)
	r := sampleReport()
	r.Scenario = "capacity"
	r.Config = Config{Scenario: "capacity", Pipeline: "in-process: test"}
	r.Systems = r.Systems[:1]
	r.Baselines.L = 6000
	res.FractionOfL, res.FractionOfB = res.Highest/r.Baselines.L, res.Highest/r.Baselines.B
	res.StepSeconds, res.DrainSeconds = 30, 15
	r.Capacity = &res
	r.Targets = targets(r.Config, r)

	dir := filepath.Join(t.TempDir(), "capacity")
	require.NoError(t, r.Write(dir))
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	s := string(md)
	assert.Contains(t, s, "| 5 | 4000 | 20000 | 4000.0 ms |")
	assert.Contains(t, s, "| 6 | 3000 | 15000 | 80.0 ms |")
	assert.Contains(t, s, "**Capacity: 3000 triggers/s** with p95 ≤ 1s = **50% of L** (6000 runs/s), 100% of B (3000 runs/s); 3250 triggers/s failed")
	assert.Contains(t, s, "capacity (triggers/s with p95 ≤ 1 s) / L | reported | 0.50 | met")
	f, err := os.Open(filepath.Join(dir, "capacity-p95.png"))
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Greater(t, img.Bounds().Dx(), 100)
}

// Each capacity step has a namespace of its own, which the run's teardown
// and the other steps' do not touch: no name of one is a prefix of
// another's.
func TestStepNamespacesAreDisjoint(t *testing.T) {
	t.Parallel()
	ns := NewNamespace("capacity", time.Unix(1_795_767_364, 0))
	all := []Namespace{ns, ns.Step(1), ns.Step(2), ns.Step(10), ns.Step(11)}
	for i, a := range all {
		for j, b := range all {
			if i == j {
				continue
			}
			assert.False(t, strings.HasPrefix(b.TopicPrefix, a.TopicPrefix), "%s and %s", a.TopicPrefix, b.TopicPrefix)
			assert.False(t, strings.HasPrefix(b.RedisPrefix, a.RedisPrefix), "%s and %s", a.RedisPrefix, b.RedisPrefix)
			assert.NotEqual(t, a.Keyspace, b.Keyspace)
		}
	}
	assert.Equal(t, "bench.capacity795767364s2.", ns.Step(2).TopicPrefix)
}

// TestCapacityFirstStepJobs: the capacity scenario's default job count
// follows its first step's rate, so that the workload the baselines size
// their run record from can be planned at any starting rate (with 1,000
// jobs, a first step of 1,000/s needed intervals under a second).
func TestCapacityFirstStepJobs(t *testing.T) {
	t.Parallel()
	b := &Bench{Now: time.Now}
	for _, rate := range []float64{250, 1000, 4000} {
		cfg := Config{Scenario: "capacity", Rate: rate}.WithDefaults()
		require.NoError(t, cfg.Validate())
		assert.GreaterOrEqual(t, float64(cfg.Jobs), rate*CapacityPeriod.Seconds(), "rate %v", rate)
		_, err := b.plan(cfg, "cap", "http://127.0.0.1:1/")
		require.NoError(t, err, "rate %v with %d jobs", rate, cfg.Jobs)
	}
	cfg := Config{Scenario: "capacity", Rate: 1000, Jobs: 7000}.WithDefaults()
	assert.Equal(t, 7000, cfg.Jobs, "a job count given is kept")
}
