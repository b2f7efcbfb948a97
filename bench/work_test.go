package bench

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/telemetry"
	"github.com/sundialhq/sundial/internal/testenv"
)

// TestParseWorkSeries reads the counters back from a /metrics text.
func TestParseWorkSeries(t *testing.T) {
	t.Parallel()
	text := `# HELP sundial_backend_requests_total Requests.
# TYPE sundial_backend_requests_total counter
sundial_backend_requests_total{backend="cassandra",kind="batch"} 12
sundial_backend_requests_total{backend="kafka",kind="produce"} 7
sundial_backend_requests_total{backend="redis",kind="round_trip"} 3e+06
sundial_other_total{backend="kafka",kind="produce"} 99
`
	series, err := parseWorkSeries(strings.NewReader(text))
	require.NoError(t, err)
	w, err := telemetry.WorkFromSeries(series)
	require.NoError(t, err)
	assert.Equal(t, telemetry.Work{CassandraBatches: 12, KafkaProduceRequests: 7, RedisRoundTrips: 3_000_000}, w)
}

// TestWorkPerRun divides each component's work of the window among the
// runs, and sums them as "all".
func TestWorkPerRun(t *testing.T) {
	t.Parallel()
	before := map[string]telemetry.Work{"runner-0": {RedisRoundTrips: 100}}
	after := map[string]telemetry.Work{"runner-0": {RedisRoundTrips: 300}, "dispatcher-0": {KafkaRecords: 400}}
	got := workPerRun(before, after, 200)
	require.Len(t, got, 3)
	assert.Equal(t, "dispatcher-0", got[0].Component)
	assert.InDelta(t, 2.0, got[0].PerRun.KafkaRecords, 1e-9)
	assert.Equal(t, "runner-0", got[1].Component)
	assert.InDelta(t, 1.0, got[1].PerRun.RedisRoundTrips, 1e-9)
	assert.Equal(t, "all", got[2].Component)
	assert.Equal(t, telemetry.Work{KafkaRecords: 400, RedisRoundTrips: 200}, got[2].Total)

	// A subprocess killed and restarted in the window counts from its
	// restart.
	before = map[string]telemetry.Work{"dispatcher-0": {KafkaRecords: 1000, KafkaProduceRequests: 900}}
	after = map[string]telemetry.Work{"dispatcher-0": {KafkaRecords: 300, KafkaProduceRequests: 950}}
	got = workPerRun(before, after, 100)
	require.Len(t, got, 1)
	assert.Equal(t, telemetry.Work{KafkaRecords: 300, KafkaProduceRequests: 950}, got[0].Total)
}

// TestBackendWorkPerRun runs a small steady workload through the pipeline
// on the real stack (in this process, each component with clients of its
// own) and counts the backend requests of one run by component, with the
// same counters the bench reports. Counts do not depend on how busy the
// machine is, so the test holds them to the pipeline's budget; the table
// it logs is the per-run work of docs/architecture.md ("The work of one
// run").
func TestBackendWorkPerRun(t *testing.T) {
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	r := testenv.NeedRedis(t)
	// The bench and the load generator both write the progress: one lock
	// for the writes and the reads.
	var buf bytes.Buffer
	progress := &syncWriter{w: &buf}
	progressText := func() string {
		progress.mu.Lock()
		defer progress.mu.Unlock()
		return buf.String()
	}
	// The drain is the bound on waiting for every run to start, not a
	// deadline for the pipeline: on a machine busy with the rest of make
	// test (-race) the runs start well after the window, and a 30s drain
	// counted 973 of them lost.
	b := &Bench{
		Config: Config{Scenario: "steady", Jobs: 2000, Rate: 200, Duration: 30 * time.Second, Lead: 10 * time.Second,
			Drain: 15 * time.Minute, History: true, Target: "http"},
		Backends: Backends{Brokers: k.Brokers, CassandraHosts: c.Hosts, RedisAddr: r.Addr},
		Progress: progress, Logger: slog.New(slog.DiscardHandler), Now: time.Now,
	}
	cfg := b.Config.WithDefaults()
	require.NoError(t, cfg.Validate())
	ns := NewNamespace("work", time.Now())
	ctx := t.Context()
	require.NoError(t, ns.Setup(ctx, b.Backends, cfg.Shards))
	t.Cleanup(func() { b.teardown(t.Context(), ns) })

	sys, _, err := b.runSundial(ctx, &cfg, ns)
	require.NoError(t, err, "progress:\n%s", progressText())
	t.Logf("progress:\n%s", progressText())
	require.Zero(t, sys.Counts.Lost, "lost runs")
	require.Zero(t, sys.Effects.DuplicateEffects, "duplicate effects")
	require.NotEmpty(t, sys.Work, "work counted")

	var table strings.Builder
	fmt.Fprintf(&table, "%d runs started in the window; per run:\n", sys.Counts.StartedDuringWindow)
	fmt.Fprintf(&table, "%-14s %8s %8s %8s %8s %8s %9s %9s %8s %8s %8s %8s\n", "component", "cql rd", "cql wr", "lwt", "batches", "rows",
		"produce", "records", "fetch", "other", "redis rt", "cmds")
	by := map[string]telemetry.WorkPerRun{}
	for _, w := range sys.Work {
		p := w.PerRun
		by[w.Component] = p
		fmt.Fprintf(&table, "%-14s %8.3f %8.3f %8.3f %8.3f %8.3f %9.3f %9.3f %8.3f %8.3f %8.3f %8.3f\n", w.Component,
			p.CassandraReads, p.CassandraWrites, p.CassandraLWT, p.CassandraBatches, p.CassandraBatchRows,
			p.KafkaProduceRequests, p.KafkaRecords, p.KafkaFetchRequests, p.KafkaOtherRequests, p.RedisRoundTrips, p.RedisCommands)
	}
	t.Log(table.String())

	// What one run must cost at least: the dispatcher produced its run
	// record, the runner took and completed its lease, the history
	// writer stored its row.
	assert.GreaterOrEqual(t, by["dispatcher-0"].KafkaRecords, 0.9, "the run record")
	assert.Positive(t, by["runner-0"].RedisRoundTrips, "lease calls")
	assert.Positive(t, by["history-0"].CassandraBatchRows+by["history-0"].CassandraWrites, "history rows")
}

// TestSummaryShowsWork: the summary has a row per component of the work
// per run.
func TestSummaryShowsWork(t *testing.T) {
	t.Parallel()
	r := &Report{Scenario: "steady", Systems: []System{{Name: "sundial", Work: workPerRun(nil,
		map[string]telemetry.Work{"dispatcher-0": {KafkaProduceRequests: 50, KafkaRecords: 200, CassandraBatches: 10, CassandraBatchRows: 100}}, 100)}}}
	var md bytes.Buffer
	require.NoError(t, r.writeMarkdown(&md))
	assert.Contains(t, md.String(), "## Backend work per run (sundial)")
	assert.Contains(t, md.String(), "| dispatcher-0 | 0.000 | 0.000 | 0.000 | 0.100 (1.00) | 0.500 (2.00) | 0.000 | 0.000 | 0.000 (0.00) |")
}
