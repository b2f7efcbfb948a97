package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/internal/topics"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// clientCounter counts the Kafka clients made with its options.
type clientCounter struct{ n atomic.Int64 }

func (c *clientCounter) OnNewClient(*kgo.Client) { c.n.Add(1) }

// TestWatchesShareOneKafkaClient: however many watches are open, the server
// reads sundial.events with one client (plus one short-lived client that
// lists the end offsets when the reader starts); every watch gets the
// events it may see. Before, each watch opened two clients of its own.
func TestWatchesShareOneKafkaClient(t *testing.T) {
	t.Parallel()
	s := setupStack(t, 1, topics.Names.Events)
	counter := &clientCounter{}
	svc, err := apiserver.NewWatchService(apiserver.WatchServiceConfig{
		Kafka: []kgo.Opt{kgo.SeedBrokers(s.brokers...), kgo.WithHooks(counter)}, Topic: s.names.Events(), Now: time.Now, Logger: s.logger})
	require.NoError(t, err)
	srv := serve(t, func(mux *http.ServeMux) { mux.Handle(apiv1connect.NewWatchServiceHandler(svc)) })
	client := apiv1connect.NewWatchServiceClient(srv.Client(), srv.URL)

	const watches = 6
	ctx, cancel := context.WithCancel(t.Context())
	var streams []interface {
		Receive() bool
		Msg() *apiv1.WatchEventsResponse
		Err() error
	}
	for range watches {
		stream, err := client.WatchEvents(ctx, as("owner", &apiv1.WatchEventsRequest{}))
		require.NoError(t, err)
		require.True(t, stream.Receive(), "ready: %v", stream.Err())
		streams = append(streams, stream)
	}
	assert.Equal(t, int64(2), counter.n.Load(), "one reader and one offset lookup for %d watches", watches)

	for i := range 3 {
		s.produce(t, s.names.Events(), "alpha.shared", &sundialv1.RunEvent{RunId: fmt.Sprintf("alpha.shared@%d", i), JobId: "alpha.shared",
			OwnerTeam: "alpha", State: sundialv1.RunState_RUN_STATE_STARTED})
	}
	for i, stream := range streams {
		for j := range 3 {
			require.True(t, stream.Receive(), "watch %d, event %d: %v", i, j, stream.Err())
			assert.Equal(t, fmt.Sprintf("alpha.shared@%d", j), stream.Msg().GetEvent().GetRunId())
		}
	}

	// The last watch to leave stops the reader; the next watch starts one.
	cancel()
	for _, stream := range streams {
		for stream.Receive() {
		}
	}
	require.Eventually(t, func() bool {
		actx, acancel := context.WithCancel(t.Context())
		defer acancel()
		again, err := client.WatchEvents(actx, as("owner", &apiv1.WatchEventsRequest{}))
		if err != nil || !again.Receive() {
			return false
		}
		return counter.n.Load() >= 4
	}, 2*time.Minute, 100*time.Millisecond, "a new reader after the last watch left")
}
