package jobspec_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func TestSplay(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		runID  string
		window time.Duration
		want   time.Duration
	}{
		{"no window", "billing.nightly@1893452400000", 0, 0},
		{"negative window", "billing.nightly@1893452400000", -time.Minute, 0},
		{"under a millisecond", "billing.nightly@1893452400000", time.Microsecond, 0},
		{"one millisecond: always 0", "billing.nightly@1893452400000", time.Millisecond, 0},
		// Pinned values: the offset of a run must never change between
		// releases, or a dispatcher of the new one would fire a run at
		// another instant than the old one.
		{"ten minutes", "billing.nightly@1893452400000", 10 * time.Minute, 3*time.Minute + 38371*time.Millisecond},
		{"an hour", "a@0", time.Hour, 21*time.Minute + 11292*time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, c.want, jobspec.Splay(c.runID, c.window))
		})
	}
}

// TestSplaySpreadsAndRepeats: the offset is in [0, window), whole
// milliseconds, the same every time for a run id, and the runs of many jobs
// due together cover the window evenly.
func TestSplaySpreadsAndRepeats(t *testing.T) {
	t.Parallel()
	const window = 10 * time.Minute
	const n = 10000
	var tenths [10]int
	for i := range n {
		id := fmt.Sprintf("team.job-%d@1893452400000", i)
		got := jobspec.Splay(id, window)
		require.GreaterOrEqual(t, got, time.Duration(0))
		require.Less(t, got, window)
		require.Zero(t, got%time.Millisecond)
		require.Equal(t, got, jobspec.Splay(id, window), "the same run id gives the same offset")
		tenths[got*10/window]++
	}
	for i, c := range tenths {
		assert.InDelta(t, n/10, c, n/10*0.2, "tenth %d of the window holds %d of %d runs", i, c, n)
	}
}

func TestSplayWindow(t *testing.T) {
	t.Parallel()
	cron := &sundialv1.Schedule{Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "0 0 * * *"}}}
	interval := &sundialv1.Schedule{Kind: &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: durationpb.New(time.Hour)}}}
	at := &sundialv1.Schedule{Kind: &sundialv1.Schedule_At{At: &sundialv1.At{}}}
	cases := []struct {
		name string
		spec *sundialv1.JobSpec
		want time.Duration
	}{
		{"cron", &sundialv1.JobSpec{Schedule: cron, Splay: durationpb.New(5 * time.Minute)}, 5 * time.Minute},
		{"interval", &sundialv1.JobSpec{Schedule: interval, Splay: durationpb.New(1500 * time.Millisecond)}, 1500 * time.Millisecond},
		{"unset", &sundialv1.JobSpec{Schedule: cron}, 0},
		{"one-off: none", &sundialv1.JobSpec{Schedule: at, Splay: durationpb.New(time.Minute)}, 0},
		{"trigger only: none", &sundialv1.JobSpec{Splay: durationpb.New(time.Minute)}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, c.want, jobspec.SplayWindow(c.spec))
			b, err := proto.Marshal(c.spec)
			require.NoError(t, err)
			assert.Equal(t, c.want, jobspec.SplayWindowOf(b), "read from the encoded definition")
		})
	}
	assert.Zero(t, jobspec.SplayWindowOf([]byte{0xff, 0xff}), "bytes that do not parse")
}

func TestValidateSplay(t *testing.T) {
	t.Parallel()
	interval := &sundialv1.Schedule{Kind: &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: durationpb.New(time.Minute)}}, TimeZone: "UTC"}
	cases := []struct {
		name   string
		mutate func(*sundialv1.JobSpec)
		reason string // empty: valid
	}{
		{"ten minutes on a cron", func(s *sundialv1.JobSpec) { s.Splay = durationpb.New(10 * time.Minute) }, ""},
		{"zero", func(s *sundialv1.JobSpec) { s.Splay = durationpb.New(0) }, ""},
		{"the hour", func(s *sundialv1.JobSpec) { s.Splay = durationpb.New(time.Hour) }, ""},
		{"above the hour", func(s *sundialv1.JobSpec) { s.Splay = durationpb.New(time.Hour + time.Second) }, "at most 1h0m0s"},
		{"negative", func(s *sundialv1.JobSpec) { s.Splay = durationpb.New(-time.Second) }, "must be positive"},
		{"sub-millisecond", func(s *sundialv1.JobSpec) { s.Splay = durationpb.New(1500 * time.Microsecond) }, "whole milliseconds"},
		{"the interval", func(s *sundialv1.JobSpec) { s.Schedule = interval; s.Splay = durationpb.New(time.Minute) }, ""},
		{"above the interval", func(s *sundialv1.JobSpec) { s.Schedule = interval; s.Splay = durationpb.New(61 * time.Second) }, "at most the schedule's interval"},
		{"trigger only", func(s *sundialv1.JobSpec) { s.Schedule = nil; s.Splay = durationpb.New(time.Minute) }, "only allowed with a cron or interval schedule"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spec := validSpec()
			c.mutate(spec)
			errs := jobspec.Validate(spec)
			if c.reason == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, "want exactly one error, got %v", errs)
			assert.Equal(t, "splay", errs[0].Field)
			assert.Contains(t, errs[0].Reason, c.reason)
		})
	}
}
