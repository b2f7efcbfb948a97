package target

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func httpRun(url string, payload []byte) *sundialv1.Run {
	return &sundialv1.Run{
		RunId: "job-1@1767148200000", JobId: "job-1", Attempt: 2, Payload: payload,
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{
			Url: url, Headers: map[string]string{"X-Team": "payments"},
		}}},
	}
}

func TestClassifyResponse(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		status     int
		retryAfter string
		wantNil    bool
		retryable  bool
		wantAfter  time.Duration
	}{
		{200, "", true, false, 0},
		{201, "", true, false, 0},
		{204, "", true, false, 0},
		{299, "", true, false, 0},
		{301, "", false, false, 0},
		{400, "", false, false, 0},
		{401, "", false, false, 0},
		{404, "", false, false, 0},
		{409, "", false, false, 0},
		{422, "10", false, false, 0}, // Retry-After means nothing on a final failure
		{408, "", false, true, 0},
		{429, "7", false, true, 7 * time.Second},
		{429, now.Add(90 * time.Second).Format(http.TimeFormat), false, true, 90 * time.Second},
		{500, "", false, true, 0},
		{502, "garbage", false, true, 0},
		{503, "120", false, true, 2 * time.Minute},
		{503, now.Add(-time.Minute).Format(http.TimeFormat), false, true, 0},
		{504, "-3", false, true, 0},
		{599, "", false, true, 0},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status)+"/"+tt.retryAfter, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tt.retryAfter != "" {
				h.Set("Retry-After", tt.retryAfter)
			}
			e := ClassifyResponse(tt.status, h, now)
			if tt.wantNil {
				assert.Nil(t, e)
				return
			}
			require.NotNil(t, e)
			assert.Equal(t, "http_"+strconv.Itoa(tt.status), e.Code)
			assert.Equal(t, tt.retryable, e.Retryable)
			assert.Equal(t, tt.wantAfter, e.RetryAfter)
		})
	}
}

// TestHTTPStatuses drives a real server through each class of response.
func TestHTTPStatuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status    int
		header    string
		wantErr   bool
		retryable bool
		after     time.Duration
	}{
		{200, "", false, false, 0},
		{202, "", false, false, 0},
		{404, "", true, false, 0},
		{408, "", true, true, 0},
		{429, "3", true, true, 3 * time.Second},
		{500, "", true, true, 0},
		{503, "1", true, true, time.Second},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.header != "" {
					w.Header().Set("Retry-After", tt.header)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, "details from the server")
			}))
			defer srv.Close()
			h := loopbackHTTP(t)
			err := (&Targets{HTTP: h}).Execute(context.Background(), Request{Run: httpRun(srv.URL, nil), FencingToken: 1})
			if !tt.wantErr {
				require.NoError(t, err)
				return
			}
			var te *Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, "http_"+strconv.Itoa(tt.status), te.Code)
			assert.Equal(t, tt.retryable, te.Retryable)
			assert.Equal(t, tt.after, te.RetryAfter)
			assert.Contains(t, te.Message, "details from the server")
		})
	}
}

func TestHTTPSendsIdentityHeadersAndBody(t *testing.T) {
	t.Parallel()
	type seen struct {
		method string
		header http.Header
		body   string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Header.Clone(), string(b)}
	}))
	defer srv.Close()
	run := httpRun(srv.URL+"/hook", []byte(`{"x":1}`))
	run.GetTarget().GetHttp().Body = []byte("unused because the payload is set")
	require.NoError(t, (loopbackHTTP(t)).Execute(context.Background(), Request{Run: run, FencingToken: 42}, run.GetTarget().GetHttp()))
	s := <-got
	assert.Equal(t, http.MethodPost, s.method)
	assert.Equal(t, "job-1@1767148200000", s.header.Get("Idempotency-Key"))
	assert.Equal(t, "job-1@1767148200000", s.header.Get("Sundial-Run-Id"))
	assert.Equal(t, "job-1", s.header.Get("Sundial-Job-Id"))
	assert.Equal(t, "2", s.header.Get("Sundial-Attempt"))
	assert.Equal(t, "42", s.header.Get("Sundial-Fencing-Token"))
	assert.Equal(t, "payments", s.header.Get("X-Team"))
	assert.Equal(t, `{"x":1}`, s.body)
	assert.Empty(t, s.header.Values("Sundial-Shard"), "only a child run has a shard")

	// A child run of a SHARDED run names its shard.
	child := httpRun(srv.URL+"/hook", nil)
	child.BaseRunId, child.RunId, child.ShardIndex, child.ShardCount = child.GetRunId(), child.GetRunId()+"/s/3", 3, 4
	require.NoError(t, (loopbackHTTP(t)).Execute(context.Background(), Request{Run: child, FencingToken: 42}, child.GetTarget().GetHttp()))
	s = <-got
	assert.Equal(t, "3", s.header.Get("Sundial-Shard"))
	assert.Equal(t, "4", s.header.Get("Sundial-Shard-Count"))
	assert.Equal(t, "job-1@1767148200000/s/3", s.header.Get("Idempotency-Key"))

	// Without a payload, the target's own body is sent.
	run.Payload = nil
	run.GetTarget().GetHttp().Method = "put"
	require.NoError(t, (loopbackHTTP(t)).Execute(context.Background(), Request{Run: run, FencingToken: 43}, run.GetTarget().GetHttp()))
	s = <-got
	assert.Equal(t, http.MethodPut, s.method)
	assert.Equal(t, "unused because the payload is set", s.body)
}

func TestHTTPRefusesReservedHeadersAndBadURLs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mod  func(*sundialv1.HttpTarget)
	}{
		{"idempotency key", func(h *sundialv1.HttpTarget) { h.Headers = map[string]string{"idempotency-key": "x"} }},
		{"fencing token", func(h *sundialv1.HttpTarget) { h.Headers = map[string]string{"Sundial-Fencing-Token": "9"} }},
		{"relative URL", func(h *sundialv1.HttpTarget) { h.Url = "/hook" }},
		{"ftp URL", func(h *sundialv1.HttpTarget) { h.Url = "ftp://example.test/x" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := httpRun("http://127.0.0.1:1/x", nil)
			tt.mod(run.GetTarget().GetHttp())
			err := (&HTTP{}).Execute(context.Background(), Request{Run: run}, run.GetTarget().GetHttp())
			var te *Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, CodeInvalidTarget, te.Code)
			assert.False(t, te.Retryable)
		})
	}
}

func TestHTTPConnectionFailureAndTimeout(t *testing.T) {
	t.Parallel()
	// A port with nothing listening: connection refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	err = (&Targets{HTTP: loopbackHTTP(t)}).Execute(context.Background(), Request{Run: httpRun("http://"+addr+"/", nil)})
	var te *Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, CodeConnection, te.Code)
	assert.True(t, te.Retryable)

	// A server slower than the job's timeout.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = (&Targets{HTTP: loopbackHTTP(t)}).Execute(ctx, Request{Run: httpRun(srv.URL, nil)})
	require.ErrorAs(t, err, &te)
	assert.Equal(t, CodeTimeout, te.Code)
	assert.True(t, te.Retryable)
}

func TestHandlers(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []string
	targets := &Targets{Handlers: map[string]Handler{
		"ok": HandlerFunc(func(_ context.Context, run *sundialv1.Run) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, run.GetRunId())
			return nil
		}),
		"flaky":     HandlerFunc(func(context.Context, *sundialv1.Run) error { return errors.New("try again") }),
		"permanent": HandlerFunc(func(context.Context, *sundialv1.Run) error { return Permanent(errors.New("bad input")) }),
		"coded":     HandlerFunc(func(context.Context, *sundialv1.Run) error { return Fail("quota", true, errors.New("over quota")) }),
		"panics":    HandlerFunc(func(context.Context, *sundialv1.Run) error { panic("boom") }),
	}}
	run := func(name string) *sundialv1.Run {
		return &sundialv1.Run{RunId: "j@1", JobId: "j", Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: name}}}}
	}
	require.NoError(t, targets.Execute(context.Background(), Request{Run: run("ok")}))
	assert.Equal(t, []string{"j@1"}, calls)

	tests := []struct {
		name      string
		code      string
		retryable bool
	}{
		{"flaky", CodeHandler, true},
		{"permanent", CodeHandler, false},
		{"coded", "quota", true},
		{"panics", CodeHandlerPanic, false},
		{"missing", CodeUnknownHandler, false},
	}
	for _, tt := range tests {
		err := targets.Execute(context.Background(), Request{Run: run(tt.name)})
		var te *Error
		require.ErrorAs(t, err, &te, tt.name)
		assert.Equal(t, tt.code, te.Code, tt.name)
		assert.Equal(t, tt.retryable, te.Retryable, tt.name)
	}
}

func TestKafkaTarget(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out"))
	require.NoError(t, err)
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()

	run := &sundialv1.Run{RunId: "job-7@5", JobId: "job-7", Attempt: 1, Payload: []byte("hello"),
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Kafka{Kafka: &sundialv1.KafkaTarget{Topic: "out", Headers: map[string]string{"team": "ops"}}}}}
	require.NoError(t, (&Targets{Kafka: &Kafka{Client: cl}, Egress: allowTopics(t, "out")}).Execute(context.Background(), Request{Run: run, FencingToken: 5}))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs := cl.PollFetches(ctx)
	require.NoError(t, fs.Err())
	recs := fs.Records()
	require.Len(t, recs, 1)
	r := recs[0]
	assert.Equal(t, "job-7", string(r.Key))
	assert.Equal(t, "hello", string(r.Value))
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	assert.Equal(t, map[string]string{
		"team": "ops", "idempotency-key": "job-7@5", "sundial-job-id": "job-7",
		"sundial-run-id": "job-7@5", "sundial-attempt": "1", "sundial-fencing-token": "5",
	}, headers)

	// A reserved header in the definition is refused before producing.
	run.GetTarget().GetKafka().Headers = map[string]string{"sundial-run-id": "forged"}
	err = (&Targets{Kafka: &Kafka{Client: cl}, Egress: allowTopics(t, "out")}).Execute(context.Background(), Request{Run: run})
	var te *Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, CodeInvalidTarget, te.Code)
}

func TestDownstream(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "http:api.example.test:8443", Downstream(httpRun("https://API.example.test:8443/x", nil)))
	assert.Equal(t, "", Downstream(httpRun("::bad", nil)))
	assert.Equal(t, "kafka", Downstream(&sundialv1.Run{Target: &sundialv1.Target{Kind: &sundialv1.Target_Kafka{Kafka: &sundialv1.KafkaTarget{Topic: "t"}}}}))
	assert.Equal(t, "handler:noop", Downstream(&sundialv1.Run{Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}}))
	assert.Equal(t, "", Downstream(&sundialv1.Run{}))
}
