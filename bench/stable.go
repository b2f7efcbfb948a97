package bench

import (
	"context"
	"math"
	"slices"
	"time"
)

// BaselineSamples is how many times each of K, R and C is measured, after
// a warm-up whose results are discarded: the report gives the median and
// the spread, so that a baseline (and "fraction of L") can be told apart
// from the noise of one measurement.
const BaselineSamples = 3

// WarmupRounds bounds the warm-up of one baseline, in measurements of half
// the baseline duration each; WarmupSettled is how close two consecutive
// warm-up measurements must be for the backend to count as warm.
const (
	WarmupRounds  = 8
	WarmupSettled = 0.10
)

// Spread is how a baseline's repeated measurements varied: each sample's
// value in order, and (max - min) / median. Warmup holds the discarded
// warm-up measurements in order, and Settled whether they settled before
// WarmupRounds ran out.
type Spread struct {
	Samples  []float64 `json:"samples"`
	Relative float64   `json:"relative"`
	Warmup   []float64 `json:"warmup,omitempty"`
	Settled  bool      `json:"settled,omitempty"`
}

// warm reports whether a warm-up whose measurements so far are values has
// settled: its last two differ by at most WarmupSettled of the later one.
// A freshly started JVM compiles its hot paths during its first minute or
// two of load; measured on a Cassandra of the local stack, one due-entry
// write cost 1.3 ms of its CPU in the first 8 s and 0.3 ms a minute later,
// so a fixed short warm-up measured the compiler rather than the backend.
func warm(values []float64) bool {
	n := len(values)
	if n < 2 {
		return false
	}
	last, prev := values[n-1], values[n-2]
	return last > 0 && math.Abs(last-prev) <= WarmupSettled*last
}

// measureStable measures a baseline BaselineSamples times, each for d,
// after a warm-up of measurements of d/2 that are discarded, repeated until
// two consecutive ones settle (warm) or WarmupRounds have run (a cold JVM,
// an empty page cache and unprepared statements measure the stack's start,
// not its capacity). It returns the measurement with the median value and
// the spread of the values, with the warm-up's values.
func measureStable[T any](ctx context.Context, d time.Duration, measure func(context.Context, time.Duration) (T, error), value func(T) float64) (T, Spread, error) {
	var zero T
	var warmup []float64
	settled := false
	for len(warmup) < WarmupRounds && !settled {
		m, err := measure(ctx, d/2)
		if err != nil {
			return zero, Spread{}, err
		}
		warmup = append(warmup, value(m))
		settled = warm(warmup)
	}
	got := make([]T, 0, BaselineSamples)
	for range BaselineSamples {
		m, err := measure(ctx, d)
		if err != nil {
			return zero, Spread{}, err
		}
		got = append(got, m)
	}
	m, s, err := median(got, value)
	s.Warmup, s.Settled = warmup, settled
	return m, s, err
}

// median returns the element of got with the median value (the lower of
// the two middle ones for an even count) and the spread of the values, in
// got's order.
func median[T any](got []T, value func(T) float64) (T, Spread, error) {
	var zero T
	if len(got) == 0 {
		return zero, Spread{}, nil
	}
	s := Spread{Samples: make([]float64, len(got))}
	idx := make([]int, len(got))
	for i, m := range got {
		s.Samples[i] = value(m)
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case s.Samples[a] < s.Samples[b]:
			return -1
		case s.Samples[a] > s.Samples[b]:
			return 1
		}
		return 0
	})
	mid := idx[(len(idx)-1)/2]
	lo, hi := s.Samples[idx[0]], s.Samples[idx[len(idx)-1]]
	s.Relative = safeDiv(hi-lo, s.Samples[mid])
	return got[mid], s, nil
}
