package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func TestAPIWatchConfigAndReport(t *testing.T) {
	t.Parallel()
	c := Config{Scenario: "steady", APIWatch: true}.WithDefaults()
	require.NoError(t, c.Validate())
	assert.Contains(t, c.String(), "; api-watch: the API server streaming WatchRuns")
	assert.NotContains(t, Config{Scenario: "steady"}.WithDefaults().String(), "api-watch")

	r := sampleReport()
	var buf bytes.Buffer
	r.Markdown(&buf)
	assert.NotContains(t, buf.String(), "API watch", "no line without --api-watch")

	r.Config.APIWatch = true
	r.APIWatch = &WatchStats{Messages: 12345, InWindow: 12000, InWindowPerSec: 200}
	buf.Reset()
	r.Markdown(&buf)
	assert.Contains(t, buf.String(), "- **API watch**: the API server (a `sundial api` child process, on loopback) streamed WatchRuns")
	assert.Contains(t, buf.String(), "12345 messages received, 12000 during the measured window (200/s)")
	assert.NotContains(t, buf.String(), "opened again")

	js, err := json.Marshal(r)
	require.NoError(t, err)
	var back Report
	require.NoError(t, json.Unmarshal(js, &back))
	assert.True(t, back.Config.APIWatch)
	require.NotNil(t, back.APIWatch)
	assert.Equal(t, *r.APIWatch, *back.APIWatch)

	reopened := WatchStats{Messages: 10, Reopened: 2, LastError: "unavailable: watch"}
	assert.Contains(t, reopened.String(), "the stream ended early and was opened again 2 times (last: unavailable: watch)")
}

func TestAPIWatchStats(t *testing.T) {
	t.Parallel()
	a := &APIWatch{perSec: map[int64]int{}, received: make(chan struct{}), opened: 1}
	at := func(sec int) time.Time { return from.Add(time.Duration(sec)*time.Second + 300*time.Millisecond) }
	for _, sec := range []int{-1, 0, 0, 1, 9, 10, 11} {
		a.count(at(sec))
	}
	select {
	case <-a.Received():
	default:
		t.Fatal("Received is closed once a change has arrived")
	}
	s := a.Stats(from, from.Add(10*time.Second))
	assert.Equal(t, WatchStats{Messages: 7, InWindow: 4, InWindowPerSec: 0.4}, s, "seconds 0 to 9 are the window's")
	assert.Equal(t, 0, a.Stats(from, from).InWindow, "an empty window")
}

// TestAPIWatch runs the watch against the real Kafka and Cassandra, with
// the API server a `sundial api` child process of a freshly built binary:
// every run event produced to the namespace's events topic after Start
// reaches the client through the server.
func TestAPIWatch(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	ns := Namespace{ID: "apiwatch", TopicPrefix: k.TopicPrefix, Keyspace: c.Keyspace}
	be := Backends{Brokers: k.Brokers, CassandraHosts: c.Hosts}
	require.NoError(t, ns.Setup(t.Context(), be, 4))
	names := ns.Names()

	var log bytes.Buffer
	a := &APIWatch{Command: []string{testenv.BuildSundial(t), "api"}, Backends: be, Keyspace: ns.Keyspace, Topics: names, Log: &syncWriter{w: &log}}
	a.Stop() // safe before Start
	require.NoError(t, a.Start(t.Context()), "server output:\n%s", &log)
	t.Cleanup(a.Stop)
	pid, ok := a.PID()
	require.True(t, ok)
	assert.NotEqual(t, os.Getpid(), pid, "the server is a process of its own")
	begin := time.Now()

	producer, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	require.NoError(t, err)
	defer producer.Close()
	const n = 50
	for i := range n {
		job := fmt.Sprintf("job-%d", i)
		ev := &sundialv1.RunEvent{RunId: job + "@1930000000000", JobId: job, Attempt: 1, OwnerTeam: fmt.Sprintf("team-%d", i%3),
			State: sundialv1.RunState_RUN_STATE_STARTED, Time: timestamppb.Now(), DueTime: timestamppb.New(time.UnixMilli(1930000000000))}
		b, err := proto.Marshal(ev)
		require.NoError(t, err)
		rec := &kgo.Record{Topic: names.Events(), Key: []byte(job), Value: b, Headers: topics.EventHeaders(ev)}
		require.NoError(t, producer.ProduceSync(t.Context(), rec).FirstErr())
	}

	require.Eventually(t, func() bool { return a.Stats(begin, time.Now()).Messages == n },
		30*time.Second, 50*time.Millisecond, "the cluster-admin watch receives every team's events")
	a.Stop()
	s := a.Stats(begin.Add(-time.Second), time.Now().Add(time.Second))
	assert.Equal(t, n, s.Messages)
	assert.Equal(t, n, s.InWindow)
	assert.Zero(t, s.Reopened, "the stream stayed open")
	assert.Empty(t, s.LastError)
	_, ok = a.PID()
	assert.False(t, ok, "the server has exited")
	a.Stop() // idempotent
}

// syncWriter serialises the writes of a child's stdout and stderr.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestAPIWatchServerExits: a server that exits before it serves fails
// Start with its exit status, and leaves nothing running.
func TestAPIWatchServerExits(t *testing.T) {
	t.Parallel()
	falseBin, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false command on this machine")
	}
	a := &APIWatch{Command: []string{falseBin, "api"}, Backends: Backends{Brokers: []string{"127.0.0.1:1"}, CassandraHosts: []string{"127.0.0.1"}}, Keyspace: "none", Topics: topics.Names{Prefix: "none."}}
	err = a.Start(t.Context())
	require.ErrorContains(t, err, "exited before it served: exit status 1")
	_, running := a.PID()
	assert.False(t, running)
	a.Stop()

	assert.ErrorContains(t, (&APIWatch{}).Start(t.Context()), "api watch: command: empty")
}
