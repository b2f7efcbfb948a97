package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/bench"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/tracing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestTracingFollowsOneRun is issue 31's "done when" for tracing: on the
// real stack, `sundial registry`, `sundial dispatcher` and `sundial runner`
// run with --tracing and the standard OTEL_* variables pointing at a real
// collector (Jaeger); a caller triggers a job inside its own trace, and the
// run's trace is followed from the trigger's intake in the registry, through
// the dispatcher's firing and the runner's lease and attempt, to an HTTP
// downstream that receives the attempt's traceparent. The collector is asked
// for the trace: every span is there, each under its parent, and the run's
// events and log lines name the trace.
//
// Not parallel: the OTEL_* variables are the process's.
func TestTracingFollowsOneRun(t *testing.T) {
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	rd := testenv.NeedRedis(t)
	jaeger := testenv.NeedJaeger(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", jaeger.OTLPEndpoint)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200") // ms: export soon, the test waits for it
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")

	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	ns := bench.Namespace{ID: "tracing", TopicPrefix: k.TopicPrefix, Keyspace: c.Keyspace, RedisPrefix: rd.KeyPrefix}
	require.NoError(t, ns.Setup(ctx, bench.Backends{Brokers: k.Brokers, CassandraHosts: c.Hosts, RedisAddr: rd.Addr}, 4))

	// The downstream keeps the traceparent of each request.
	var (
		mu           sync.Mutex
		traceparents []string
	)
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	t.Cleanup(downstream.Close)

	kafkaArgs := []string{"--kafka-brokers", strings.Join(k.Brokers, ","), "--topic-prefix", k.TopicPrefix}
	storeArgs := []string{"--cassandra-hosts", strings.Join(c.Hosts, ","), "--keyspace", c.Keyspace}
	const team, job = "tracing", "tracing.call"
	code, out, errOut := runCLI(t, append(append([]string{"teams", "create", team}, storeArgs...), kafkaArgs...)...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)

	runnerLog := &testenv.SyncBuffer{}
	serve := func(name string, stderr *testenv.SyncBuffer, args ...string) {
		cmdCtx, stop := context.WithCancel(ctx)
		done := make(chan int, 1)
		go func() {
			done <- run(cmdCtx, append([]string{"sundial", name, "--tracing"}, args...), &bytes.Buffer{}, stderr)
		}()
		t.Cleanup(func() {
			stop()
			assert.Equal(t, 0, <-done, "sundial %s exits cleanly\n%s", name, stderr.String())
		})
	}
	serve("registry", &testenv.SyncBuffer{}, append(kafkaArgs, storeArgs...)...)
	serve("dispatcher", &testenv.SyncBuffer{}, append(kafkaArgs, storeArgs...)...)
	serve("runner", runnerLog, append(append(kafkaArgs, storeArgs...),
		"--redis-addr", rd.Addr, "--redis-key-prefix", rd.KeyPrefix, "--egress-allow", "127.0.0.1/32",
		"--log-level", "debug", "--log-format", "json")...)

	// A job that only runs when triggered (its schedule's next occurrence
	// is months away at most once a year).
	file := filepath.Join(t.TempDir(), "job.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"id": "`+job+`", "ownerTeam": "`+team+`",
		"schedule": {"cron": {"expression": "0 0 1 1 *"}},
		"target": {"http": {"url": "`+downstream.URL+`/call"}}}`), 0o600))
	code, out, errOut = runCLI(t, append([]string{"jobs", "apply", "-f", file, "--timeout", "2m"}, kafkaArgs...)...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)

	// The caller triggers the job inside its own trace: the trigger record
	// carries the caller's span as its traceparent header.
	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	cl, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: ns.Names(), Team: team})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	callerCtx := tracing.WithTraceparent(ctx, "00-"+traceID+"-"+callerSpan+"-01")
	_, err = cl.Trigger(callerCtx, job, "traced-1")
	require.NoError(t, err)

	// The downstream is called with the run's trace.
	var got string
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(traceparents) == 0 {
			return false
		}
		got = traceparents[0]
		return true
	}, 3*time.Minute, 100*time.Millisecond, "the downstream is called")
	parts := strings.Split(got, "-")
	require.Len(t, parts, 4, "traceparent %q", got)
	assert.Equal(t, traceID, parts[1], "the downstream continues the caller's trace")

	// The collector holds the trace: each step's span, under its parent.
	want := []string{"registry.trigger", "dispatcher.fire", "runner.run", "runner.lease", "runner.attempt"}
	var tr jaegerTrace
	require.Eventually(t, func() bool {
		tr = queryTrace(t, jaeger.QueryURL, traceID)
		for _, name := range want {
			if tr.span(name) == nil {
				return false
			}
		}
		return true
	}, 3*time.Minute, 200*time.Millisecond, "the collector holds a span of each step: %v", want)
	t.Logf("trace %s: %s", traceID, tr)
	parentOf := map[string]string{
		"registry.trigger": callerSpan,
		"dispatcher.fire":  tr.span("registry.trigger").SpanID,
		"runner.run":       tr.span("dispatcher.fire").SpanID,
		"runner.lease":     tr.span("runner.run").SpanID,
		"runner.attempt":   tr.span("runner.run").SpanID,
	}
	for _, name := range want {
		assert.Equal(t, parentOf[name], tr.span(name).parent(), "the parent of %s", name)
	}
	assert.Equal(t, tr.span("runner.attempt").SpanID, parts[2], "the downstream's parent is the attempt's span")
	service := map[string]string{"registry.trigger": "sundial-registry", "dispatcher.fire": "sundial-dispatcher", "runner.attempt": "sundial-runner"}
	for name, svc := range service {
		assert.Equal(t, svc, tr.service(tr.span(name)), "the process of %s", name)
	}

	// The run's events name the trace, and so do the runner's log lines.
	events := runEventsOf(ctx, t, k.Brokers, ns.Names().Events(), job)
	require.NotEmpty(t, events)
	for _, ev := range events {
		assert.Equal(t, traceID, ev.GetTraceId(), "the %s event names the trace", ev.GetState())
	}
	assert.Contains(t, runnerLog.String(), `"trace_id":"`+traceID+`"`, "the runner's log lines of the run name the trace")
}

// runEventsOf reads sundial.events until a SUCCEEDED event of job, and
// returns the job's events.
func runEventsOf(ctx context.Context, t *testing.T, brokers []string, topic, job string) []*sundialv1.RunEvent {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	var out []*sundialv1.RunEvent
	for {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "a SUCCEEDED event of %s", job)
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) != job {
				return
			}
			ev := &sundialv1.RunEvent{}
			require.NoError(t, sundialv1.Unmarshal(header(r, sundialv1.HeaderContentType), r.Value, ev))
			out = append(out, ev)
			done = done || ev.GetState() == sundialv1.RunState_RUN_STATE_SUCCEEDED
		})
		if done {
			return out
		}
	}
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// jaegerTrace is the part of Jaeger's query answer (GET /api/traces/<id>)
// the test reads.
type jaegerTrace struct {
	Spans     []jaegerSpan `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	ProcessID     string `json:"processID"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
}

func (tr jaegerTrace) span(name string) *spanView {
	for i := range tr.Spans {
		if tr.Spans[i].OperationName == name {
			return &spanView{&tr.Spans[i]}
		}
	}
	return nil
}

func (tr jaegerTrace) service(s *spanView) string { return tr.Processes[s.ProcessID].ServiceName }

func (tr jaegerTrace) String() string {
	var b strings.Builder
	for _, s := range tr.Spans {
		fmt.Fprintf(&b, "\n  %s %s (%s) <- %s", s.SpanID, s.OperationName, tr.Processes[s.ProcessID].ServiceName, (&spanView{&s}).parent())
	}
	return b.String()
}

type spanView struct{ *jaegerSpan }

// parent is the span id of the span's CHILD_OF reference, "" for a root.
func (s *spanView) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// queryTrace asks Jaeger for a trace; an empty trace while it is not there.
func queryTrace(t *testing.T, queryURL, traceID string) jaegerTrace {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, queryURL+"/api/traces/"+traceID, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Data []jaegerTrace `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		return jaegerTrace{}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	if len(body.Data) == 0 {
		return jaegerTrace{}
	}
	return body.Data[0]
}
