package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cpuProfile builds a CPU profile of stacks (leaf first) with values in
// milliseconds.
func cpuProfile(stacks map[string]int64) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}, Period: 10_000_000,
	}
	fns := map[string]*profile.Location{}
	loc := func(name string) *profile.Location {
		if l, ok := fns[name]; ok {
			return l
		}
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name}
		p.Function = append(p.Function, f)
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
		p.Location = append(p.Location, l)
		fns[name] = l
		return l
	}
	for stack, ms := range stacks {
		s := &profile.Sample{Value: []int64{ms / 10, ms * int64(time.Millisecond)}}
		for _, name := range strings.Split(stack, ";") {
			s.Location = append(s.Location, loc(name))
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}

func TestTopCumulative(t *testing.T) {
	t.Parallel()
	p := cpuProfile(map[string]int64{
		"syscall.write;kgo.produce;dispatcher.fire;main": 600,
		"runtime.mallocgc;dispatcher.fire;main":          300,
		// recursion counts once per stack
		"parse;parse;parse;main": 100,
	})
	// Through the wire format, as a captured profile is read.
	var buf bytes.Buffer
	require.NoError(t, p.Write(&buf))
	parsed, err := profile.ParseData(buf.Bytes())
	require.NoError(t, err)

	top, total, err := TopCumulative(parsed, 3)
	require.NoError(t, err)
	assert.InDelta(t, 1.0, total, 1e-9)
	require.Len(t, top, 3)
	assert.Equal(t, "main", top[0].Function)
	assert.InDelta(t, 1.0, top[0].CumSeconds, 1e-9)
	assert.InDelta(t, 1.0, top[0].CumShare, 1e-9)
	assert.Zero(t, top[0].FlatSeconds)
	assert.Equal(t, "dispatcher.fire", top[1].Function)
	assert.InDelta(t, 0.9, top[1].CumSeconds, 1e-9)
	// kgo.produce and syscall.write tie at 0.6 s: by name.
	assert.Equal(t, "kgo.produce", top[2].Function)

	all, _, err := TopCumulative(parsed, 100)
	require.NoError(t, err)
	for _, f := range all {
		if f.Function == "parse" {
			assert.InDelta(t, 0.1, f.CumSeconds, 1e-9)
			assert.InDelta(t, 0.1, f.FlatSeconds, 1e-9)
		}
	}

	heap := &profile.Profile{SampleType: []*profile.ValueType{{Type: "inuse_space", Unit: "bytes"}}}
	_, _, err = TopCumulative(heap, 3)
	require.ErrorContains(t, err, "not a CPU profile")
}

func TestProfileSpanIsInTheMiddle(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	start, span := profileSpan(from, from.Add(3*time.Minute), 30*time.Second)
	assert.Equal(t, 30*time.Second, span)
	assert.Equal(t, from.Add(75*time.Second), start)
	// A window shorter than the span is profiled whole.
	start, span = profileSpan(from, from.Add(20*time.Second), 30*time.Second)
	assert.Equal(t, 20*time.Second, span)
	assert.Equal(t, from, start)
}

func TestFailedCaptureIsReported(t *testing.T) {
	t.Parallel()
	pr := withCPUProfile(Profile{Process: "dispatcher-0", Kind: "cpu"}, nil, assert.AnError)
	assert.Empty(t, pr.File)
	assert.Equal(t, assert.AnError.Error(), pr.Error)

	var md bytes.Buffer
	require.NoError(t, summaryTemplate.ExecuteTemplate(&md, "profiles", profilesSummary("sundial", []Profile{pr})))
	assert.Contains(t, md.String(), "dispatcher-0 cpu: **capture failed**")
	assert.Contains(t, md.String(), "go tool pprof -top FILE")
}
