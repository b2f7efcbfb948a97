package logtailtest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/logtail"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// RunService is the API's RunService over the runners' Redis rdb and key
// prefix keys (runner.Config.KeyPrefix), reading each run's team from
// specs, with an empty history: its TailRunLog answers from the live
// tails only, polling every 200 ms.
func RunService(t *testing.T, rdb redis.UniversalClient, keys string, specs ...*sundialv1.JobSpec) apiserver.Service {
	t.Helper()
	defs := jobs{}
	for _, s := range specs {
		defs[s.GetId()] = s
	}
	runs, err := apiserver.NewRunService(apiserver.RunServiceConfig{
		History: noHistory{}, Jobs: defs, DagRuns: noHistory{}, Events: noHistory{}, Logger: slog.New(slog.DiscardHandler),
		Logs: logtail.Reader{Redis: rdb, KeyPrefix: keys}, TailPoll: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	return apiserver.ConnectService(apiv1connect.NewRunServiceHandler, apiv1connect.RunServiceHandler(runs))
}

// jobs is the definitions the run service resolves a run's team from.
type jobs map[string]*sundialv1.JobSpec

func (j jobs) GetJob(_ context.Context, id string) (store.Job, error) {
	spec, ok := j[id]
	if !ok {
		return store.Job{}, store.ErrNotFound
	}
	b, err := proto.Marshal(spec)
	return store.Job{ID: id, Spec: b}, err
}

// noHistory is an empty run history: the tests read the live tail only.
type noHistory struct{}

func (noHistory) ListRuns(context.Context, string, int) ([]store.RunRecord, error) { return nil, nil }
func (noHistory) JobSummary(context.Context, string) (store.Summary, error) {
	return store.Summary{}, nil
}
func (noHistory) GetDagRun(context.Context, string) (store.DagRun, error) {
	return store.DagRun{}, store.ErrNotFound
}
func (noHistory) RunEvents(context.Context, string, string) ([]*sundialv1.RunEvent, error) {
	return nil, nil
}

// Tailed is what a TailRunLog stream received.
type Tailed struct {
	Lines []string
	// Bytes counts the lines' bytes, each with a newline, as the bounds
	// count them.
	Bytes   int
	Dropped int64
	Ended   bool
}

// Follow reads a TailRunLog stream of runID until until says so or the
// stream ends.
func Follow(t *testing.T, ctx context.Context, c apiv1connect.RunServiceClient, runID string, until func(Tailed) bool) Tailed {
	t.Helper()
	stream, err := c.TailRunLog(ctx, connect.NewRequest(&apiv1.TailRunLogRequest{RunId: runID}))
	require.NoError(t, err)
	defer func() { _ = stream.Close() }()
	var got Tailed
	for stream.Receive() {
		m := stream.Msg()
		got.Lines = append(got.Lines, m.GetLines()...)
		for _, l := range m.GetLines() {
			got.Bytes += len(l) + 1
		}
		got.Dropped += m.GetDropped()
		got.Ended = got.Ended || m.GetEnded()
		if until(got) {
			return got
		}
	}
	require.NoError(t, stream.Err(), "the tail broke")
	return got
}

// Forever never stops a Follow: it reads until the stream ends.
func Forever(Tailed) bool { return false }

// NotFound asserts that each caller in clients is answered not_found when
// it tails runID, before any message: a caller who may not see the run
// does not learn it exists. The map's keys name the callers.
func NotFound(t *testing.T, ctx context.Context, clients map[string]apiv1connect.RunServiceClient, runID string) {
	t.Helper()
	for who, c := range clients {
		stream, err := c.TailRunLog(ctx, connect.NewRequest(&apiv1.TailRunLogRequest{RunId: runID}))
		require.NoError(t, err)
		assert.False(t, stream.Receive(), "%s received a message", who)
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(stream.Err()), "%s: %v", who, stream.Err())
		require.NoError(t, stream.Close())
	}
}
