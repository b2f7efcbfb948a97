package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/logtail"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

// tailGateway is a fakeGateway that takes AppendLog: its Poll answers
// tell logTail, and it records every line it is sent, live and with the
// outcome.
type tailGateway struct {
	*fakeGateway
	logTail *apiv1.LogTail

	mu       sync.Mutex
	live     []string // the lines AppendLog received, in order
	liveByte int      // their bytes, each with a newline
	dropped  uint64
	appends  int
	outcome  *apiv1.CompleteRequest
}

func newTailGateway(t *testing.T, lt *apiv1.LogTail, tasks ...*apiv1.WorkerTask) (*tailGateway, string) {
	t.Helper()
	f := &tailGateway{fakeGateway: &fakeGateway{takes: false, tasks: make(chan *apiv1.WorkerTask, len(tasks)), outcomes: map[string]int{}}, logTail: lt}
	for _, task := range tasks {
		f.tasks <- task
	}
	mux := http.NewServeMux()
	mux.Handle(apiv1connect.NewWorkerServiceHandler(f))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *tailGateway) Poll(ctx context.Context, req *connect.Request[apiv1.PollRequest]) (*connect.Response[apiv1.PollResponse], error) {
	res, err := f.fakeGateway.Poll(ctx, req)
	if err == nil {
		res.Msg.LogTail = f.logTail
	}
	return res, err
}

func (f *tailGateway) AppendLog(_ context.Context, req *connect.Request[apiv1.AppendLogRequest]) (*connect.Response[apiv1.AppendLogResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.appends++
	for _, e := range req.Msg.GetTasks() {
		f.add(e.GetLog())
	}
	return connect.NewResponse(&apiv1.AppendLogResponse{}), nil
}

func (f *tailGateway) Complete(ctx context.Context, req *connect.Request[apiv1.CompleteRequest]) (*connect.Response[apiv1.CompleteResponse], error) {
	f.mu.Lock()
	f.outcome = req.Msg
	f.add(req.Msg.GetLiveLog())
	f.mu.Unlock()
	return f.fakeGateway.Complete(ctx, req)
}

// add records l's lines. Called with mu held.
func (f *tailGateway) add(l *apiv1.LiveLog) {
	f.live = append(f.live, l.GetLines()...)
	for _, line := range l.GetLines() {
		f.liveByte += len(line) + 1
	}
	f.dropped += l.GetDropped()
}

func (f *tailGateway) state() (live []string, bytes int, dropped uint64, outcome *apiv1.CompleteRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.live...), f.liveByte, f.dropped, f.outcome
}

// fastTail is a gateway's LogTail with the shortest interval the worker
// takes.
var fastTail = &apiv1.LogTail{Every: durationpb.New(minLogEvery), ChunkBytes: logtail.DefaultChunkBytes, AttemptBytes: logtail.DefaultAttemptBytes}

// startTailWorker starts a worker on the gateway at url with one handler,
// "work".
func startTailWorker(t *testing.T, url string, h Handler) *Worker {
	t.Helper()
	w, err := New(Config{APIURL: url, Token: "t", ID: "w-1", Concurrency: 1})
	require.NoError(t, err)
	w.Handle("work", h)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(w.Stop)
	return w
}

// TestLiveLinesReachTheGatewayWhileTheHandlerRuns: the lines a handler
// logs reach the gateway's AppendLog while the handler still runs; its
// outcome carries the final log for history and, for the tail, only the
// lines not sent before, so the tail gets each line once.
func TestLiveLinesReachTheGatewayWhileTheHandlerRuns(t *testing.T) {
	t.Parallel()
	f, url := newTailGateway(t, fastTail, &apiv1.WorkerTask{TaskToken: "task-1", RunId: "j@1", JobId: "j", Attempt: 1, Handler: "work"})
	release := make(chan struct{})
	open := sync.OnceFunc(func() { close(release) })
	startTailWorker(t, url, func(_ context.Context, r *Run) error {
		r.Log.Info("one")
		r.Log.Info("two")
		<-release
		r.Log.Info("three")
		return nil
	})
	// Before the worker's Stop, which drains the handler: a test that
	// fails early still ends.
	t.Cleanup(open)
	require.Eventually(t, func() bool { live, _, _, _ := f.state(); return len(live) == 2 }, time.Minute, 10*time.Millisecond,
		"the handler's lines reached the gateway while it ran")
	live, _, _, outcome := f.state()
	assert.Nil(t, outcome, "the handler ended before its lines were sent")
	assert.Contains(t, live[0], "msg=one")
	assert.Contains(t, live[1], "msg=two")

	open()
	require.Eventually(t, func() bool { _, _, _, o := f.state(); return o != nil }, time.Minute, 10*time.Millisecond)
	live, _, _, outcome = f.state()
	require.NotNil(t, outcome.GetLiveLog(), "the outcome says the tail received lines live")
	require.Len(t, outcome.GetLogLines(), 3, "the final log is the whole log")
	assert.Contains(t, outcome.GetLogLines()[2], "msg=three")
	// The last line went with the outcome or, had a send come between it
	// and the handler's return, just before: once either way.
	assert.Equal(t, outcome.GetLogLines(), live, "the tail received each line once, in order")
}

// TestShortAttemptSendsItsLinesWithItsOutcome: an attempt that ends before
// its lines were sent live gives them with its outcome only, unmarked,
// so that the gateway tails them then; and a gateway that takes no
// AppendLog (an older one) never receives one.
func TestShortAttemptSendsItsLinesWithItsOutcome(t *testing.T) {
	t.Parallel()
	for _, lt := range []*apiv1.LogTail{nil, {Every: durationpb.New(time.Hour)}} {
		f, url := newTailGateway(t, lt, &apiv1.WorkerTask{TaskToken: "task-1", RunId: "j@1", JobId: "j", Attempt: 1, Handler: "work"})
		startTailWorker(t, url, func(_ context.Context, r *Run) error { r.Log.Info("quick"); return nil })
		require.Eventually(t, func() bool { _, _, _, o := f.state(); return o != nil }, time.Minute, 10*time.Millisecond)
		_, _, _, outcome := f.state()
		assert.Nil(t, outcome.GetLiveLog(), "log tail %v: the outcome says lines were sent live", lt)
		require.Len(t, outcome.GetLogLines(), 1)
		f.mu.Lock()
		assert.Zero(t, f.appends, "log tail %v: AppendLog was called", lt)
		f.mu.Unlock()
	}
	l := newLiveLog(nil, "w", nil)
	assert.Nil(t, l.open("t"), "a live tail before the gateway said it takes one")
	l.configure(fastTail)
	assert.NotNil(t, l.open("t"))
	l.configure(nil)
	assert.Nil(t, l.open("t"), "a live tail after the gateway said it takes none")
}

// TestLiveLogIsBoundedAtTheWorker: a handler that logs 100 MB sends the
// gateway at most the bounds it told (AttemptBytes in all), and counts
// every line it left out, so the tail says how many.
func TestLiveLogIsBoundedAtTheWorker(t *testing.T) {
	t.Parallel()
	const lines = 200_000
	f, url := newTailGateway(t, fastTail, &apiv1.WorkerTask{TaskToken: "task-1", RunId: "j@1", JobId: "j", Attempt: 1, Handler: "work"})
	release := make(chan struct{})
	open := sync.OnceFunc(func() { close(release) })
	msg := strings.Repeat("x", 500)
	startTailWorker(t, url, func(_ context.Context, r *Run) error {
		for range lines {
			r.Log.Info(msg)
		}
		<-release
		return nil
	})
	t.Cleanup(open) // before the worker's Stop, which drains the handler
	require.Eventually(t, func() bool { _, _, d, _ := f.state(); return d > 0 }, 3*time.Minute, 10*time.Millisecond)
	open()
	require.Eventually(t, func() bool { _, _, _, o := f.state(); return o != nil }, 3*time.Minute, 10*time.Millisecond)
	live, bytes, dropped, _ := f.state()
	assert.LessOrEqual(t, bytes, logtail.DefaultAttemptBytes, "the worker sent more than the attempt's bound")
	assert.Equal(t, uint64(lines), uint64(len(live))+dropped, "every line is either sent or counted as left out")
}

func TestTailBoundsFollowTheGatewayWithinTheWorkersLimits(t *testing.T) {
	t.Parallel()
	defaults := logtail.Bounds{}.WithDefaults()
	for _, tc := range []struct {
		name string
		lt   *apiv1.LogTail
		want logtail.Bounds
	}{
		{"a gateway that takes no AppendLog sends nothing", nil, logtail.Bounds{}},
		{"a gateway that says nothing more gets logtail's defaults", &apiv1.LogTail{}, defaults},
		{"the gateway's bounds are the worker's", &apiv1.LogTail{Every: durationpb.New(2 * time.Second), ChunkBytes: 100, AttemptBytes: 1000},
			logtail.Bounds{Every: 2 * time.Second, ChunkBytes: 100, AttemptBytes: 1000, Retain: logtail.DefaultRetain}},
		{"a negative interval is the default", &apiv1.LogTail{Every: durationpb.New(-time.Second)}, defaults},
		{"the worker sends no more often than minLogEvery", &apiv1.LogTail{Every: durationpb.New(time.Millisecond)},
			logtail.Bounds{Every: minLogEvery, ChunkBytes: logtail.DefaultChunkBytes, AttemptBytes: logtail.DefaultAttemptBytes, Retain: logtail.DefaultRetain}},
		{"one attempt's chunk fits one call", &apiv1.LogTail{ChunkBytes: 1 << 31},
			logtail.Bounds{Every: logtail.DefaultEvery, ChunkBytes: maxAppendBytes, AttemptBytes: logtail.DefaultAttemptBytes, Retain: logtail.DefaultRetain}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, tailBounds(tc.lt))
		})
	}
}
