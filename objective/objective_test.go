package objective_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/objective"
	"github.com/sundialhq/sundial/store"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, text string
		want       objective.Objective
		err        string
	}{
		{name: "the long form", text: "p99 <= 2s over 7d", want: objective.Objective{Percentile: 99, Lag: 2 * time.Second, Window: 7 * 24 * time.Hour}},
		{name: "the short form", text: "p99.9<=250ms/1h", want: objective.Objective{Percentile: 99.9, Lag: 250 * time.Millisecond, Window: time.Hour}},
		{name: "minutes written min or m", text: " p95 <= 1.5min over 30m ", want: objective.Objective{Percentile: 95, Lag: 90 * time.Second, Window: 30 * time.Minute}},
		{name: "anything else names the form", text: "99% within 2s", err: `sundial.io/trigger-lag-objective "99% within 2s": must read like "p99 <= 2s over 7d"`},
		{name: "a percentile of 100 allows no budget", text: "p100 <= 2s over 7d", err: "the percentile 100 must be above 0 and below 100"},
		{name: "a zero lag is refused", text: "p99 <= 0s over 7d", err: `the lag "0s" must be a positive duration`},
		{name: "a lag without a unit is refused", text: "p99 <= 2 over 7d", err: `the lag "2" must be a positive duration`},
		{name: "every mistake is named", text: "p0 <= 1x over 0d", err: `the window "0d" must be a positive duration`},
		{name: "a window of centuries is refused", text: "p99 <= 1s over 99999d", err: `the window "99999d" must be a positive duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := objective.Parse(tc.text)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			tc.want.Text = tc.text
			assert.Equal(t, tc.want, got)
		})
	}
}

var now = time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)

// rec is an attempt due ago before now that started lag after its due.
func rec(id string, ago, lag time.Duration) store.RunRecord {
	due := now.Add(-ago)
	return store.RunRecord{JobID: "j", RunID: id, Attempt: 1, Due: due, State: store.StateSucceeded, Started: due.Add(lag), UpdatedAt: due.Add(lag)}
}

func TestCauseOf(t *testing.T) {
	t.Parallel()
	due := now.Add(-time.Minute)
	at := func(s int) time.Time { return due.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name string
		r    store.RunRecord
		want objective.Cause
	}{
		{name: "a late dispatch is the shard's dispatcher",
			r:    store.RunRecord{Due: due, State: store.StateSucceeded, Dispatched: at(30), Received: at(31), Started: at(32)},
			want: objective.Cause{Where: objective.CauseDispatcher, Lost: 30 * time.Second}},
		{name: "a record that waited in Kafka is the consumer lag",
			r:    store.RunRecord{Due: due, State: store.StateSucceeded, Dispatched: at(0), Received: at(19), Started: at(20)},
			want: objective.Cause{Where: objective.CauseConsumer, Lost: 19 * time.Second}},
		{name: "a run that waited for a slot is the runner",
			r:    store.RunRecord{Due: due, State: store.StateSucceeded, Dispatched: at(0), Received: at(1), Leased: at(2), Started: at(9)},
			want: objective.Cause{Where: objective.CauseRunner, Lost: 8 * time.Second}},
		{name: "a retry is judged from its own due time",
			r:    store.RunRecord{Due: due.Add(-time.Hour), AttemptDue: due, State: store.StateSucceeded, Dispatched: at(1), Received: at(12), Started: at(13)},
			want: objective.Cause{Where: objective.CauseConsumer, Lost: 11 * time.Second}},
		{name: "an attempt still waiting for a runner waits in the consumer step until now",
			r:    store.RunRecord{Due: due, State: store.StateScheduled, Dispatched: at(1)},
			want: objective.Cause{Where: objective.CauseConsumer, Lost: 59 * time.Second}},
		{name: "an attempt never dispatched waits at the dispatcher until now",
			r:    store.RunRecord{Due: due, State: store.StateScheduled},
			want: objective.Cause{Where: objective.CauseDispatcher, Lost: time.Minute}},
		{name: "a start alone names no step",
			r:    store.RunRecord{Due: due, State: store.StateSucceeded, Started: at(40)},
			want: objective.Cause{Where: objective.CauseUnknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, objective.CauseOf(tc.r, now))
		})
	}
}

func TestAssess(t *testing.T) {
	t.Parallel()
	p99in2s := objective.Objective{Percentile: 99, Lag: 2 * time.Second, Window: time.Hour}
	var hundred []store.RunRecord
	for i := range 100 {
		hundred = append(hundred, rec("r"+string(rune('a'+i%26))+string(rune('a'+i/26)), time.Duration(i+1)*time.Second, 100*time.Millisecond))
	}
	t.Run("one late attempt of a hundred spends the whole 1 % budget", func(t *testing.T) {
		t.Parallel()
		recs := append([]store.RunRecord{rec("late", 30*time.Minute, 5*time.Second)}, hundred[1:]...)
		a := objective.Assess(p99in2s, recs, now)
		assert.Equal(t, 100, a.Counted)
		require.Len(t, a.Late, 1)
		assert.Equal(t, "late", a.Late[0].Record.RunID)
		assert.InDelta(t, 1.0, a.Budget, 1e-9)
		assert.InDelta(t, 0.0, a.Left, 1e-9)
		assert.True(t, a.Met, "one late of a budget of one is met")
		assert.Equal(t, 100*time.Millisecond, a.P99, "the 99th of 100 lags is still on time")
		assert.Equal(t, map[string]int{objective.CauseUnknown: 1}, a.Causes)
	})
	t.Run("two late overspend it, worst first", func(t *testing.T) {
		t.Parallel()
		recs := append([]store.RunRecord{rec("late", 30*time.Minute, 5*time.Second), rec("later", 40*time.Minute, 9*time.Second)}, hundred[2:]...)
		a := objective.Assess(p99in2s, recs, now)
		assert.Equal(t, 100, a.Counted)
		require.Len(t, a.Late, 2)
		assert.Equal(t, []string{"later", "late"}, []string{a.Late[0].Record.RunID, a.Late[1].Record.RunID})
		assert.InDelta(t, -1.0, a.Left, 1e-9)
		assert.False(t, a.Met)
		assert.Equal(t, 5*time.Second, a.P99)
	})
	t.Run("only attempts due in the window are counted", func(t *testing.T) {
		t.Parallel()
		notYet := rec("future", -time.Minute, 0)
		notYet.State, notYet.Started = store.StateScheduled, time.Time{}
		recs := []store.RunRecord{rec("old", 2*time.Hour, time.Hour), rec("in", 10*time.Minute, time.Second), notYet}
		a := objective.Assess(p99in2s, recs, now)
		assert.Equal(t, 1, a.Counted)
		assert.Empty(t, a.Late)
		assert.InDelta(t, 1.0, a.Left, 1e-9)
	})
	t.Run("an attempt still waiting past the lag is late before it ends", func(t *testing.T) {
		t.Parallel()
		stuck := rec("stuck", 10*time.Minute, 0)
		stuck.State, stuck.Started = store.StateScheduled, time.Time{}
		a := objective.Assess(p99in2s, []store.RunRecord{stuck}, now)
		require.Len(t, a.Late, 1)
		assert.Equal(t, 10*time.Minute, a.Late[0].Lag)
		assert.Equal(t, objective.CauseDispatcher, a.Late[0].Cause.Where)
		assert.False(t, a.Met)
	})
	t.Run("an attempt that ended without starting is not counted", func(t *testing.T) {
		t.Parallel()
		skipped := rec("skipped", 10*time.Minute, 0)
		skipped.State, skipped.Started = store.StateSkipped, time.Time{}
		a := objective.Assess(p99in2s, []store.RunRecord{skipped}, now)
		assert.Zero(t, a.Counted)
		assert.InDelta(t, 1.0, a.Left, 1e-9, "nothing counted leaves the budget whole")
		assert.True(t, a.Met)
	})
}

// FuzzParse: a label is outside input; Parse never panics, and what it
// accepts is an objective that can be measured.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"p99 <= 2s over 7d", "p99.9<=250ms/1h", "p50 <= 1.5min over 30m", "p100 <= 0s over 0d", "p9 <= 1e9d over 1d", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		o, err := objective.Parse(text)
		if err != nil {
			return
		}
		if !(o.Percentile > 0 && o.Percentile < 100) || o.Lag <= 0 || o.Window <= 0 {
			t.Fatalf("Parse(%q) = %+v: not measurable", text, o)
		}
	})
}
