package discovery

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
)

// wait bounds how long a test waits for a condition before it fails and
// prints what it saw.
const wait = 60 * time.Second

type setup struct {
	kafka  []kgo.Opt
	names  topics.Names
	reg    *prometheus.Registry
	dir    *Directory
	broker []string
}

func newSetup(t *testing.T, pools ...string) *setup {
	t.Helper()
	k := testenv.NeedKafka(t)
	s := &setup{kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, names: topics.Names{Prefix: k.TopicPrefix}, reg: prometheus.NewRegistry(), broker: k.Brokers}
	specs, err := s.names.Specs(1)
	require.NoError(t, err)
	specs = slices.DeleteFunc(specs, func(sp topics.Spec) bool { return sp.Name != s.names.Executors() })
	cl, err := kgo.NewClient(s.kafka...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err = topics.Ensure(ctx, kadm.NewClient(cl), specs, 1)
	require.NoError(t, err)
	d, err := NewDirectory(DirectoryConfig{Kafka: s.kafka, Topics: s.names, Tick: 50 * time.Millisecond, Pools: pools, Registerer: s.reg})
	require.NoError(t, err)
	s.dir = d
	return s
}

func (s *setup) startDirectory(t *testing.T) {
	t.Helper()
	require.NoError(t, s.dir.Start(context.Background()))
	t.Cleanup(s.dir.Stop)
}

func (s *setup) announcer(t *testing.T, id, pool string, inFlight func() int) *Announcer {
	t.Helper()
	a, err := NewAnnouncer(AnnouncerConfig{Kafka: s.kafka, Topics: s.names, ID: id, Pool: pool, Capacity: 4,
		Labels: map[string]string{"zone": "z1"}, Version: "test", Blocking: "fifo", InFlight: inFlight, Interval: 100 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, a.Start(context.Background()))
	t.Cleanup(a.Stop)
	return a
}

// waitFor waits until cond holds on the directory, re-checking at every
// change signal and every 100 ms, and fails with the members it saw.
func waitFor(t *testing.T, d *Directory, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(wait)
	for !cond() {
		select {
		case <-d.Changes():
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: not seen; members %+v", what, d.All())
		}
	}
}

func liveIDs(d *Directory, pool string) string { return strings.Join(ids(d.Live(pool)), ",") }

func TestDirectorySeesJoinLoadAndLeave(t *testing.T) {
	t.Parallel()
	s := newSetup(t, "empty")
	s.startDirectory(t)
	load := make(chan int, 1)
	load <- 3
	last := 0
	inFlight := func() int {
		select {
		case last = <-load:
		default:
		}
		return last
	}
	a := s.announcer(t, "exec-a", "p1", inFlight)
	s.announcer(t, "exec-b", "p2", nil)
	waitFor(t, s.dir, "both live", func() bool { return liveIDs(s.dir, "") == "exec-a,exec-b" })

	m, ok := s.dir.Member("exec-a")
	require.True(t, ok)
	assert.Equal(t, "p1", m.Pool)
	assert.Equal(t, map[string]string{"zone": "z1"}, m.Labels)
	assert.Equal(t, "test", m.Version)
	assert.Equal(t, "fifo", m.Blocking)
	assert.Equal(t, 4, m.Capacity)
	assert.Equal(t, 3, m.InFlight)
	assert.Equal(t, 100*time.Millisecond, m.Interval)
	assert.NotZero(t, m.MemoryBytes, "the process's memory")
	assert.Equal(t, "exec-a", liveIDs(s.dir, "p1"))

	load <- 1
	waitFor(t, s.dir, "new load announced", func() bool { m, _ := s.dir.Member("exec-a"); return m.InFlight == 1 })

	assert.Equal(t, 1.0, testutil.ToFloat64(s.dir.live.WithLabelValues("p1")))
	assert.Equal(t, 0.0, testutil.ToFloat64(s.dir.live.WithLabelValues("empty")), "a configured pool with no member reads 0")

	a.Stop() // the tombstone
	waitFor(t, s.dir, "exec-a left", func() bool { m, _ := s.dir.Member("exec-a"); return m.State == Left })
	assert.Equal(t, "exec-b", liveIDs(s.dir, ""))
	assert.Equal(t, 0.0, testutil.ToFloat64(s.dir.live.WithLabelValues("p1")))
}

// TestDirectoryReadsHistoryBeforeSynced: a directory started after the
// executors reads their announcements from the topic's start.
func TestDirectoryReadsHistoryBeforeSynced(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	s.announcer(t, "exec-early", "p", nil)
	// Wait for the announcement to be on the topic: a first directory sees
	// it live.
	first, err := NewDirectory(DirectoryConfig{Kafka: s.kafka, Topics: s.names})
	require.NoError(t, err)
	require.NoError(t, first.Start(context.Background()))
	defer first.Stop()
	waitFor(t, first, "exec-early live", func() bool { return liveIDs(first, "p") == "exec-early" })

	s.startDirectory(t)
	select {
	case <-s.dir.Synced():
	case <-time.After(wait):
		t.Fatalf("not synced; members %+v", s.dir.All())
	}
	assert.Contains(t, ids(s.dir.All()), "exec-early", "read from the history before Synced")
	require.Error(t, s.dir.Start(context.Background()), "started once")
}

func TestConfigsReportEveryBadField(t *testing.T) {
	t.Parallel()
	err := AnnouncerConfig{Pool: " p ", Interval: time.Microsecond}.Validate()
	for _, f := range []string{"Kafka", "ID", "Pool", "Capacity", "Interval"} {
		assert.ErrorContains(t, err, f+":")
	}
	err = DirectoryConfig{ExpiryFactor: 1, DeadRetention: -1, Tick: -1, Pools: []string{""}}.Validate()
	for _, f := range []string{"Kafka", "ExpiryFactor", "DeadRetention", "Tick", "Pools[0]"} {
		assert.ErrorContains(t, err, f+":")
	}
}
