package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

func TestRemoteConfigNeedsTheAPIAndATokenOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"api and token", Config{APIURL: "https://sundial.example:8480", Token: "s3cret"}, nil},
		{"no token", Config{APIURL: "http://127.0.0.1:8480"}, []string{"Token: is required with APIURL"}},
		{"not a URL", Config{APIURL: "127.0.0.1:8480", Token: "t"}, []string{`APIURL: "127.0.0.1:8480": want an http or https URL`}},
		{"backends too", Config{APIURL: "http://a:1", Token: "t", RedisAddr: "r:6379"}, []string{"APIURL: a worker of the API holds no backend"}},
		{"neither", Config{}, []string{"Kafka: the seed brokers (kgo.SeedBrokers) are required (or APIURL and Token)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.cfg.Validate()
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

// fakeGateway is a WorkerService that hands out tasks of the handler
// "work", one per Poll, and records every outcome it takes, by path. As
// the gateway does, it takes one outcome per task: another is answered
// NotFound (Complete) or dropped (a Poll's), and counted in again.
type fakeGateway struct {
	apiv1connect.UnimplementedWorkerServiceHandler
	takes bool
	tasks chan *apiv1.WorkerTask

	mu        sync.Mutex
	outcomes  map[string]int // taken, by task token
	carried   int
	completes int
	again     int
}

func (f *fakeGateway) Poll(ctx context.Context, req *connect.Request[apiv1.PollRequest]) (*connect.Response[apiv1.PollResponse], error) {
	f.mu.Lock()
	for _, c := range req.Msg.GetCompletions() {
		if f.outcomes[c.GetTaskToken()] > 0 {
			f.again++
			continue
		}
		f.outcomes[c.GetTaskToken()]++
		f.carried++
	}
	f.mu.Unlock()
	res := &apiv1.PollResponse{HeartbeatInterval: durationpb.New(time.Second), TakesCompletions: f.takes}
	select {
	case t := <-f.tasks:
		res.Tasks = append(res.Tasks, t)
	case <-ctx.Done():
	case <-time.After(req.Msg.GetWait().AsDuration()):
	}
	return connect.NewResponse(res), nil
}

func (f *fakeGateway) Heartbeat(context.Context, *connect.Request[apiv1.HeartbeatRequest]) (*connect.Response[apiv1.HeartbeatResponse], error) {
	return connect.NewResponse(&apiv1.HeartbeatResponse{}), nil
}

func (f *fakeGateway) Complete(_ context.Context, req *connect.Request[apiv1.CompleteRequest]) (*connect.Response[apiv1.CompleteResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.outcomes[req.Msg.GetTaskToken()] > 0 {
		f.again++
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no such task"))
	}
	f.outcomes[req.Msg.GetTaskToken()]++
	f.completes++
	return connect.NewResponse(&apiv1.CompleteResponse{}), nil
}

// TestOutcomesAreCarriedOnPollsOnlyToAGatewayThatTakesThem: a gateway
// that says it takes outcomes on Polls receives every outcome once, on a
// Poll or, when no Poll carries it soon, in a Complete; one that does not
// say so (an older gateway) receives every outcome in a Complete, none on
// a Poll, where it would be ignored.
func TestOutcomesAreCarriedOnPollsOnlyToAGatewayThatTakesThem(t *testing.T) {
	t.Parallel()
	for _, takes := range []bool{true, false} {
		t.Run(fmt.Sprintf("takes=%v", takes), func(t *testing.T) {
			t.Parallel()
			const n = 50
			f := &fakeGateway{takes: takes, tasks: make(chan *apiv1.WorkerTask, n), outcomes: map[string]int{}}
			for i := range n {
				f.tasks <- &apiv1.WorkerTask{TaskToken: fmt.Sprintf("task-%d", i), RunId: fmt.Sprintf("j@%d", i), JobId: "j", Attempt: 1, Handler: "work"}
			}
			mux := http.NewServeMux()
			mux.Handle(apiv1connect.NewWorkerServiceHandler(f))
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			w, err := New(Config{APIURL: srv.URL, Token: "t", ID: "w-1", Concurrency: 4})
			require.NoError(t, err)
			var ran atomic.Int64
			w.Handle("work", func(context.Context, *Run) error { ran.Add(1); return nil })
			require.NoError(t, w.Start(t.Context()))
			t.Cleanup(w.Stop)
			require.Eventually(t, func() bool {
				f.mu.Lock()
				defer f.mu.Unlock()
				return len(f.outcomes) == n
			}, 3*time.Minute, 10*time.Millisecond, "every outcome reaches the gateway")
			w.Stop()
			f.mu.Lock()
			defer f.mu.Unlock()
			assert.Equal(t, int64(n), ran.Load())
			for tok, times := range f.outcomes {
				assert.Equal(t, 1, times, "the outcome of %s was given %d times", tok, times)
			}
			assert.Equal(t, n, f.carried+f.completes)
			if !takes {
				assert.Zero(t, f.carried, "outcomes were carried to a gateway that ignores them")
			}
			t.Logf("takes=%v: %d outcomes carried on Polls, %d in Completes, %d given again (a Poll cut by Stop)", takes, f.carried, f.completes, f.again)
		})
	}
}

// TestStopSendsTheOutcomesNoPollCarried: the outcome of an attempt that
// ends while the worker stops reaches the gateway although no Poll
// carries it any more.
func TestStopSendsTheOutcomesNoPollCarried(t *testing.T) {
	t.Parallel()
	f := &fakeGateway{takes: true, tasks: make(chan *apiv1.WorkerTask, 2), outcomes: map[string]int{}}
	f.tasks <- &apiv1.WorkerTask{TaskToken: "first", RunId: "j@1", JobId: "j", Attempt: 1, Handler: "work"}
	f.tasks <- &apiv1.WorkerTask{TaskToken: "held", RunId: "j@2", JobId: "j", Attempt: 1, Handler: "work"}
	mux := http.NewServeMux()
	mux.Handle(apiv1connect.NewWorkerServiceHandler(f))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	w, err := New(Config{APIURL: srv.URL, Token: "t", ID: "w-1", Concurrency: 1})
	require.NoError(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	w.Handle("work", func(_ context.Context, r *Run) error {
		if r.ID == "j@2" {
			close(started)
			<-release
		}
		return nil
	})
	require.NoError(t, w.Start(t.Context()))
	<-started // the first outcome told the worker that the gateway takes them
	stopped := make(chan struct{})
	go func() { defer close(stopped); w.Stop() }()
	close(release)
	<-stopped
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Equal(t, map[string]int{"first": 1, "held": 1}, f.outcomes)
}
