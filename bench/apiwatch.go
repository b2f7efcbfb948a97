package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/topics"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

// APIWatch is the control-plane load of an --api-watch run: the API server
// serving the watch service (Connect and server-sent events) on a loopback
// port, and one client reading WatchRuns through it with a cluster-admin
// token, so that every run event of the namespace crosses the server, as
// it would for a dashboard watching the whole cluster.
//
// The server and the client live in the bench process, from Start to Stop.
// The client counts what it receives by the second it arrived in, so the
// report can tell how busy the stream was during the measured window. A
// stream that ends early (the server answered an error) is opened again
// after a second; the reopenings and the last error are counted too.
type APIWatch struct {
	// Kafka are the options of the watch service's own Kafka clients
	// (seed brokers). Required.
	Kafka []kgo.Opt
	// Topics are the namespace's topics; the watch reads Topics.Events().
	Topics topics.Names
	// Logger; nil discards.
	Logger *slog.Logger

	life lifecycle.Lifecycle
	srv  *apiserver.Server

	mu       sync.Mutex
	perSec   map[int64]int // messages received, by arrival second
	total    int
	opened   int
	lastErr  error
	received chan struct{} // closed by the first run change
}

// Start serves the API on 127.0.0.1 (a free port) and opens the watch; it
// returns once the stream reads from the end of the events topic, so that
// every event published afterwards is received.
func (a *APIWatch) Start(ctx context.Context) error {
	return a.life.Start(ctx, a.start)
}

func (a *APIWatch) start(ctx context.Context, run *lifecycle.Run) error {
	logger := a.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a.mu.Lock()
	a.perSec, a.total, a.opened, a.lastErr = map[int64]int{}, 0, 0, nil
	a.received = make(chan struct{})
	a.mu.Unlock()

	// A secret of this run only: the server is on loopback and lives as
	// long as the run.
	secret := "bench-" + rand.Text()
	authn, err := apiserver.ParseStaticTokens([]string{apiserver.ClusterAdminTeam + ":admin:" + secret})
	if err != nil {
		return fmt.Errorf("api watch: %w", err)
	}
	watch, err := apiserver.NewWatchService(apiserver.WatchServiceConfig{
		KafkaOpts: a.Kafka, Topic: a.Topics.Events(), Now: time.Now, Logger: logger.With("component", "api-watch")})
	if err != nil {
		return fmt.Errorf("api watch: %w", err)
	}
	srv, err := apiserver.New(apiserver.Config{
		Addr: "127.0.0.1:0", Authenticator: authn,
		Services: []apiserver.Service{apiserver.ConnectService(apiv1connect.NewWatchServiceHandler, apiv1connect.WatchServiceHandler(watch))},
		Handlers: []apiserver.Handler{{Path: apiserver.WatchEventsPath, Handler: watch.EventsHandler()}},
		// The watch is cut at Stop: a stream never finishes by itself.
		ShutdownGrace: time.Second,
		Logger:        logger.With("component", "api-server"),
	})
	if err != nil {
		return fmt.Errorf("api watch: %w", err)
	}
	if err := srv.Start(ctx); err != nil {
		return fmt.Errorf("api watch: %w", err)
	}
	a.srv = srv
	// Registered first, so it runs last: the client's stream ends with
	// the run's context before the server stops.
	run.OnStop(srv.Stop)

	client := apiv1connect.NewWatchServiceClient(http.DefaultClient, "http://"+srv.Addr().String())
	ready := make(chan error, 1)
	run.Go(func(runCtx context.Context) { a.consume(runCtx, client, "Bearer "+secret, ready) })
	select {
	case err := <-ready:
		return err
	case <-ctx.Done():
		return fmt.Errorf("api watch: open the stream: %w", ctx.Err())
	}
}

// consume reads the stream until ctx ends, opening it again after a second
// when it ends early. The first opening's outcome goes to ready.
func (a *APIWatch) consume(ctx context.Context, client apiv1connect.WatchServiceClient, bearer string, ready chan<- error) {
	first := true
	for ctx.Err() == nil {
		err := a.stream(ctx, client, bearer, func() {
			if first {
				first = false
				ready <- nil
			}
		})
		if ctx.Err() != nil {
			break
		}
		if err == nil {
			err = errors.New("the server ended the stream")
		}
		if first {
			ready <- fmt.Errorf("api watch: open the stream: %w", err)
			return
		}
		a.mu.Lock()
		a.lastErr = err
		a.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	if first {
		ready <- fmt.Errorf("api watch: open the stream: %w", ctx.Err())
	}
}

// stream reads one WatchRuns stream: opened is called on its first message
// (watching_since), every run change is counted.
func (a *APIWatch) stream(ctx context.Context, client apiv1connect.WatchServiceClient, bearer string, opened func()) error {
	req := connect.NewRequest(&apiv1.WatchRunsRequest{})
	req.Header().Set("Authorization", bearer)
	s, err := client.WatchRuns(ctx, req)
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	for s.Receive() {
		if s.Msg().GetWatchingSince() != nil {
			a.mu.Lock()
			a.opened++
			a.mu.Unlock()
			opened()
			continue
		}
		a.count(time.Now())
	}
	return s.Err()
}

// count records one run change received at t.
func (a *APIWatch) count(t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.total == 0 {
		close(a.received)
	}
	a.total++
	a.perSec[t.Unix()]++
}

// Received is closed once the first run change has arrived.
func (a *APIWatch) Received() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.received
}

// Stats is what the watch received: in all, and in [from, to) by the
// second of arrival.
func (a *APIWatch) Stats(from, to time.Time) WatchStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := WatchStats{Messages: a.total, Reopened: max(a.opened-1, 0)}
	for sec, n := range a.perSec {
		if sec >= from.Unix() && sec < to.Unix() {
			s.InWindow += n
		}
	}
	if secs := to.Unix() - from.Unix(); secs > 0 {
		s.InWindowPerSec = float64(s.InWindow) / float64(secs)
	}
	if a.lastErr != nil {
		s.LastError = a.lastErr.Error()
	}
	return s
}

// Stop ends the watch and stops the server; it is idempotent and safe
// before Start.
func (a *APIWatch) Stop() { a.life.Stop() }

// WatchStats is what the watch client of an --api-watch run received.
type WatchStats struct {
	// Messages are the run changes received from the start of the watch
	// (the end of the baselines) to the end of the run.
	Messages int `json:"messages"`
	// InWindow are those received during the measured window, and
	// InWindowPerSec their rate over it.
	InWindow       int     `json:"in_window"`
	InWindowPerSec float64 `json:"in_window_per_sec"`
	// Reopened counts the streams opened again after one ended early, and
	// LastError says why the last one ended.
	Reopened  int    `json:"reopened"`
	LastError string `json:"last_error,omitempty"`
}

// String is the report's line about the watch.
func (s WatchStats) String() string {
	out := fmt.Sprintf("the API server (in the bench process, on loopback) streamed WatchRuns of every run to a cluster-admin client from the end of the baselines to the end of the run: %d messages received, %d during the measured window (%.0f/s)",
		s.Messages, s.InWindow, s.InWindowPerSec)
	if s.Reopened > 0 {
		out += fmt.Sprintf("; the stream ended early and was opened again %d times (last: %s)", s.Reopened, s.LastError)
	}
	return out
}
