package apiserver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/internal/topics"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

// TestWatchStreamsAreCappedPerCaller protects the server from one caller
// opening watch streams without end (each holds a Kafka client): past the
// caller's cap, and past the server's, a watch is refused
// resource_exhausted naming the cap, and a closed watch frees its slot.
func TestWatchStreamsAreCappedPerCaller(t *testing.T) {
	t.Parallel()
	s := setupStack(t, 1, topics.Names.Events)
	svc, err := apiserver.NewWatchService(apiserver.WatchServiceConfig{
		Kafka: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Topic: s.names.Events(), Now: time.Now, Logger: s.logger,
		MaxStreamsPerCaller: 2, MaxStreams: 3,
	})
	require.NoError(t, err)
	srv := serve(t, func(mux *http.ServeMux) { mux.Handle(apiv1connect.NewWatchServiceHandler(svc)) })
	client := apiv1connect.NewWatchServiceClient(srv.Client(), srv.URL)

	// open opens a watch and waits for its first message, or returns the
	// error it ended with.
	open := func(caller string) (context.CancelFunc, error) {
		ctx, cancel := context.WithCancel(t.Context())
		stream, err := client.WatchRuns(ctx, as(caller, &apiv1.WatchRunsRequest{}))
		if err != nil {
			cancel()
			return nil, err
		}
		if !stream.Receive() {
			cancel()
			return nil, stream.Err()
		}
		t.Cleanup(cancel)
		return func() { cancel(); _ = stream.Close() }, nil
	}

	first, err := open("owner")
	require.NoError(t, err)
	_, err = open("owner")
	require.NoError(t, err)
	_, err = open("owner")
	requireConnectCode(t, connect.CodeResourceExhausted, err)
	assert.Contains(t, err.Error(), "holds 2 open watches, the most one caller may")

	_, err = open("other")
	require.NoError(t, err, "another caller has slots of its own")
	_, err = open("other-viewer")
	requireConnectCode(t, connect.CodeResourceExhausted, err)
	assert.Contains(t, err.Error(), "the server holds 3 open watches")

	first()
	// The slot is freed when the server sees the stream end.
	require.Eventually(t, func() bool {
		cancel, err := open("owner")
		if err != nil {
			return false
		}
		cancel()
		return true
	}, time.Minute, 50*time.Millisecond, "a closed watch frees its caller's slot")
}
