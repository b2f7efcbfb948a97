package apiserver_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/internal/topics"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

type watchFixture struct {
	s      *stack
	srv    *httptest.Server
	client apiv1connect.WatchServiceClient
}

// setupWatch serves the watch service over an events topic of one
// partition, so that the order events are produced in is the order every
// watch reads them: an event a watch must not see, produced before one it
// must, is known to have been skipped once the second arrives.
func setupWatch(t *testing.T) watchFixture {
	t.Helper()
	s := setupStack(t, 1, topics.Names.Events)
	svc, err := apiserver.NewWatchService(apiserver.WatchServiceConfig{
		Kafka: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Topic: s.names.Events(), Now: time.Now, Logger: s.logger})
	require.NoError(t, err)
	srv := serve(t, func(mux *http.ServeMux) {
		mux.Handle(apiv1connect.NewWatchServiceHandler(svc))
		mux.Handle(apiserver.WatchEventsPath, svc.EventsHandler())
	})
	return watchFixture{s: s, srv: srv,
		client: apiv1connect.NewWatchServiceClient(srv.Client(), srv.URL)}
}

func (f watchFixture) event(t *testing.T, job, team string, state sundialv1.RunState) *sundialv1.RunEvent {
	t.Helper()
	ev := &sundialv1.RunEvent{RunId: job + "@1930000000000", JobId: job, Attempt: 1, State: state, OwnerTeam: team,
		Time: timestamppb.Now(), DueTime: timestamppb.New(time.UnixMilli(1930000000000))}
	if state == sundialv1.RunState_RUN_STATE_FAILED {
		ev.Error = &sundialv1.RunError{Code: "http_500", Message: "boom"}
	}
	f.s.produce(t, f.s.names.Events(), job, ev)
	return ev
}

func TestWatchEvents(t *testing.T) {
	t.Parallel()
	f := setupWatch(t)
	started := sundialv1.RunState_RUN_STATE_STARTED

	open := func(t *testing.T, caller string, filter *apiv1.WatchFilter) *connect.ServerStreamForClient[apiv1.WatchEventsResponse] {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		stream, err := f.client.WatchEvents(ctx, as(caller, &apiv1.WatchEventsRequest{Filter: filter}))
		require.NoError(t, err)
		// The first message says the watch reads from the end of the topic:
		// every event produced from now on reaches it.
		require.True(t, stream.Receive(), "first message: %v", stream.Err())
		require.NotNil(t, stream.Msg().GetWatchingSince())
		require.Nil(t, stream.Msg().GetEvent())
		return stream
	}

	t.Run("owner, by job", func(t *testing.T) {
		stream := open(t, "owner", &apiv1.WatchFilter{JobId: "alpha.watch"})
		f.event(t, "beta.watch", "beta", started)
		f.event(t, "alpha.other", "alpha", started)
		want := f.event(t, "alpha.watch", "alpha", started)
		require.True(t, stream.Receive(), "event: %v", stream.Err())
		got := stream.Msg().GetEvent()
		assert.Equal(t, want.GetRunId(), got.GetRunId())
		assert.Equal(t, "alpha", got.GetOwnerTeam())
	})
	t.Run("another team sees none of alpha's events", func(t *testing.T) {
		stream := open(t, "other", nil)
		f.event(t, "alpha.watch", "alpha", started)
		want := f.event(t, "beta.watch", "beta", started)
		require.True(t, stream.Receive(), "event: %v", stream.Err())
		assert.Equal(t, want.GetRunId(), stream.Msg().GetEvent().GetRunId(), "alpha's event, produced first, was left out")
	})
	t.Run("cluster admin, by team", func(t *testing.T) {
		stream := open(t, "cluster-admin", &apiv1.WatchFilter{Team: "beta"})
		f.event(t, "alpha.watch", "alpha", started)
		want := f.event(t, "beta.watch", "beta", started)
		require.True(t, stream.Receive(), "event: %v", stream.Err())
		assert.Equal(t, want.GetRunId(), stream.Msg().GetEvent().GetRunId(), "alpha's event, produced first, was left out")
	})
	t.Run("no principal", func(t *testing.T) {
		stream, err := f.client.WatchEvents(t.Context(), as("", &apiv1.WatchEventsRequest{}))
		require.NoError(t, err)
		require.False(t, stream.Receive())
		requireConnectCode(t, connect.CodeUnauthenticated, stream.Err())
	})
	t.Run("bad filter", func(t *testing.T) {
		stream, err := f.client.WatchEvents(t.Context(), as("owner", &apiv1.WatchEventsRequest{
			Filter: &apiv1.WatchFilter{States: []sundialv1.RunState{99}}}))
		require.NoError(t, err)
		require.False(t, stream.Receive())
		requireConnectCode(t, connect.CodeInvalidArgument, stream.Err())
	})
}

func TestWatchRuns(t *testing.T) {
	t.Parallel()
	f := setupWatch(t)
	for _, tc := range []struct {
		caller, job, team string
	}{
		{"owner", "alpha.runs", "alpha"},
		{"other", "beta.runs", "beta"},
	} {
		t.Run(tc.caller, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			stream, err := f.client.WatchRuns(ctx, as(tc.caller, &apiv1.WatchRunsRequest{Filter: &apiv1.WatchFilter{
				States: []sundialv1.RunState{sundialv1.RunState_RUN_STATE_FAILED}}}))
			require.NoError(t, err)
			require.True(t, stream.Receive(), "first message: %v", stream.Err())
			require.NotNil(t, stream.Msg().GetWatchingSince())
			// Another team's failure and this team's start come first; only
			// this team's failure passes.
			otherTeam := map[string]string{"alpha": "beta", "beta": "alpha"}[tc.team]
			f.event(t, otherTeam+".runs", otherTeam, sundialv1.RunState_RUN_STATE_FAILED)
			f.event(t, tc.job, tc.team, sundialv1.RunState_RUN_STATE_STARTED)
			f.event(t, tc.job, tc.team, sundialv1.RunState_RUN_STATE_FAILED)
			require.True(t, stream.Receive(), "change: %v", stream.Err())
			c := stream.Msg().GetChange()
			assert.Equal(t, tc.job, c.GetJobId())
			assert.Equal(t, tc.team, c.GetOwnerTeam())
			assert.Equal(t, sundialv1.RunState_RUN_STATE_FAILED, c.GetState())
			assert.Equal(t, "http_500: boom", c.GetError())
		})
	}
	t.Run("no principal", func(t *testing.T) {
		stream, err := f.client.WatchRuns(t.Context(), as("", &apiv1.WatchRunsRequest{}))
		require.NoError(t, err)
		require.False(t, stream.Receive())
		requireConnectCode(t, connect.CodeUnauthenticated, stream.Err())
	})
}

// sse reads server-sent events.
type sse struct {
	t    *testing.T
	r    *bufio.Reader
	resp *http.Response
}

func openSSE(t *testing.T, ctx context.Context, f watchFixture, caller, query string) *sse {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+apiserver.WatchEventsPath+query, nil)
	require.NoError(t, err)
	if caller != "" {
		req.Header.Set(callerHeader, caller)
	}
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return &sse{t: t, r: bufio.NewReader(resp.Body), resp: resp}
}

// next returns the next event's name and data.
func (s *sse) next() (name, data string) {
	s.t.Helper()
	for {
		line, err := s.r.ReadString('\n')
		require.NoError(s.t, err, "reading the event stream")
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && name != "":
			return name, data
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

func TestWatchEventsSSE(t *testing.T) {
	t.Parallel()
	f := setupWatch(t)
	started := sundialv1.RunState_RUN_STATE_STARTED

	for _, tc := range []struct{ caller, job, team, otherJob, otherTeam string }{
		{"owner", "alpha.sse", "alpha", "beta.sse", "beta"},
		{"other", "beta.sse", "beta", "alpha.sse", "alpha"},
	} {
		t.Run(tc.caller, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			s := openSSE(t, ctx, f, tc.caller, "?state=started")
			require.Equal(t, http.StatusOK, s.resp.StatusCode)
			assert.Equal(t, "text/event-stream", s.resp.Header.Get("Content-Type"))
			name, _ := s.next()
			require.Equal(t, "ready", name)
			f.event(t, tc.otherJob, tc.otherTeam, started)
			f.event(t, tc.job, tc.team, sundialv1.RunState_RUN_STATE_SUCCEEDED)
			want := f.event(t, tc.job, tc.team, started)
			name, data := s.next()
			require.Equal(t, "run", name)
			got := &sundialv1.RunEvent{}
			require.NoError(t, protojson.Unmarshal([]byte(data), got), "data: %s", data)
			assert.Equal(t, want.GetRunId(), got.GetRunId())
			assert.Equal(t, tc.team, got.GetOwnerTeam())
			assert.Equal(t, started, got.GetState())
		})
	}
	t.Run("no principal", func(t *testing.T) {
		s := openSSE(t, t.Context(), f, "", "")
		assert.Equal(t, http.StatusUnauthorized, s.resp.StatusCode)
	})
	t.Run("bad state", func(t *testing.T) {
		s := openSSE(t, t.Context(), f, "owner", "?state=sleeping")
		assert.Equal(t, http.StatusBadRequest, s.resp.StatusCode)
	})
	t.Run("the stream ends when the client goes away", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		s := openSSE(t, ctx, f, "owner", "?job=alpha.sse")
		name, _ := s.next()
		require.Equal(t, "ready", name)
		cancel()
		// Close waits for every outstanding request: it returns only once
		// the handler has seen the disconnect and ended.
		f.srv.Close()
	})
}
