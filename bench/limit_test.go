package bench

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		k, r, c float64
		want    float64
		which   string
	}{
		{"Cassandra: one write a run", 50000, 30000, 9000, 9000, "C (Cassandra writes)"},
		{"Redis: two lease calls a run", 50000, 12000, 9000, 6000, "R (Redis leases, plain)"},
		{"Kafka: one record a run", 4000, 12000, 9000, 4000, "K (Kafka)"},
		{"nothing measured", 0, 0, 0, 0, "K (Kafka)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, which := Limit(KafkaBaseline{RecordsPerSec: tc.k}, RedisBaseline{PlainCallsPerSec: tc.r}, CassandraBaseline{WritesPerSec: tc.c})
			assert.InDelta(t, tc.want, l, 1e-9)
			assert.Equal(t, tc.which, which)
		})
	}
}

func TestLimitIsAtLeastB(t *testing.T) {
	t.Parallel()
	// L counts the least work a run can need, so no per-run count the
	// pipeline has today can make B larger than L.
	k, r, c := KafkaBaseline{RecordsPerSec: 20000}, RedisBaseline{PlainCallsPerSec: 16000}, CassandraBaseline{WritesPerSec: 9000}
	l, _ := Limit(k, r, c)
	for _, per := range []PerRun{{LeaseCalls: 2, CassandraWrites: 1}, {LeaseCalls: 2, CassandraWrites: 3}, {LeaseCalls: 4, CassandraWrites: 1}} {
		b, _ := Bottleneck(k, r, c, per)
		assert.LessOrEqual(t, b, l, "per run %+v", per)
	}
}

func TestFractions(t *testing.T) {
	t.Parallel()
	bl := Baselines{B: 3000, L: 8000}
	s := System{SustainedPerSec: 2000}
	s.fractions(bl)
	assert.InDelta(t, 2.0/3, s.FractionOfB, 1e-9)
	assert.InDelta(t, 0.25, s.FractionOfL, 1e-9)

	herd := System{HerdDrainPerSec: 4000}
	herd.fractions(bl)
	assert.InDelta(t, 0.5, herd.FractionOfL, 1e-9, "a herd is measured by its drain rate")

	none := System{SustainedPerSec: 2000}
	none.fractions(Baselines{})
	assert.Zero(t, none.FractionOfL, "no baseline: no fraction rather than infinity")
}

func TestMarkdownShowsL(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.Baselines.L, r.Baselines.LimitOf = 9000, "C (Cassandra writes)"
	r.Systems[0].FractionOfL = 2100.0 / 9000
	var buf bytes.Buffer
	r.Markdown(&buf)
	s := buf.String()
	assert.Contains(t, s, "**L** = min(K, R/2, C/1) = min(100000, 10000, 9000)")
	assert.Contains(t, s, "**9000 runs/s** (C (Cassandra writes))")
	assert.Contains(t, s, "| fraction of L | 23% |")
}

func TestPerRunWork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scenario string
		history  bool
		writes   int
	}{
		{"steady", true, 3},
		{"steady", false, 1},
		{"herd", true, 2},
		{"herd", false, 0},
	} {
		t.Run(fmt.Sprintf("%s history=%t", tc.scenario, tc.history), func(t *testing.T) {
			t.Parallel()
			per := perRunWork(Config{Scenario: tc.scenario, History: tc.history})
			assert.Equal(t, tc.writes, per.CassandraWrites, "Cassandra writes a run")
			assert.Zero(t, per.CassandraReads, "a firing reads nothing")
			assert.Equal(t, 2, per.LeaseCalls)
			assert.Equal(t, 3, per.KafkaRecords, "the run, ENQUEUED, SUCCEEDED carrying the start")
		})
	}
}

func TestBottleneckWithoutCassandraWrites(t *testing.T) {
	t.Parallel()
	k, r, c := KafkaBaseline{RecordsPerSec: 20000}, RedisBaseline{PlainCallsPerSec: 16000}, CassandraBaseline{WritesPerSec: 100}
	b, which := Bottleneck(k, r, c, PerRun{LeaseCalls: 2})
	assert.InDelta(t, 8000, b, 1e-9, "a run that writes nothing to Cassandra is not bound by C")
	assert.Equal(t, "R (Redis leases, plain)", which)
}
