package bench

import (
	"context"
	"slices"
	"time"
)

// BaselineSamples is how many times each of K, R and C is measured, after
// a warm-up measurement that is discarded: the report gives the median and
// the spread, so that a baseline (and "fraction of L") can be told apart
// from the noise of one measurement.
const BaselineSamples = 3

// Spread is how a baseline's repeated measurements varied: each sample's
// value in order, and (max - min) / median.
type Spread struct {
	Samples  []float64 `json:"samples"`
	Relative float64   `json:"relative"`
}

// measureStable measures a baseline BaselineSamples times, each for d,
// after one warm-up of d/2 whose result is discarded (a cold JVM, an empty
// page cache and unprepared statements measure the stack's start, not its
// capacity). It returns the measurement with the median value and the
// spread of the values.
func measureStable[T any](ctx context.Context, d time.Duration, measure func(context.Context, time.Duration) (T, error), value func(T) float64) (T, Spread, error) {
	var zero T
	if _, err := measure(ctx, d/2); err != nil {
		return zero, Spread{}, err
	}
	got := make([]T, 0, BaselineSamples)
	for range BaselineSamples {
		m, err := measure(ctx, d)
		if err != nil {
			return zero, Spread{}, err
		}
		got = append(got, m)
	}
	return median(got, value)
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
