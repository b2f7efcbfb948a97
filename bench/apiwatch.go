package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

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
// The server is a child process, `sundial api` of the bench's own binary,
// so that its CPU is its own and not the bench's (the CPU table lists it as
// "api"); the client lives in the bench process. Both run from Start to
// Stop. The client counts what it receives by the second it arrived in, so the
// report can tell how busy the stream was during the measured window. A
// stream that ends early (the server answered an error) is opened again
// after a second; the reopenings and the last error are counted too.
type APIWatch struct {
	// Command runs the API server: the sundial binary and "api", to
	// which Start adds the flags of the namespace. Required.
	Command []string
	// Backends are the stack the server reads. Required.
	Backends Backends
	// Keyspace is the namespace's keyspace. Required.
	Keyspace string
	// Topics are the namespace's topics; the watch reads Topics.Events().
	Topics topics.Names
	// Log receives the server's output; nil discards it.
	Log io.Writer

	life lifecycle.Lifecycle
	pid  atomic.Int64 // the server's process id while it runs

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
	if len(a.Command) == 0 {
		return errors.New("api watch: command: empty")
	}
	a.mu.Lock()
	a.perSec, a.total, a.opened, a.lastErr = map[int64]int{}, 0, 0, nil
	a.received = make(chan struct{})
	a.mu.Unlock()

	// A secret of this run only: the server is on loopback and lives as
	// long as the run.
	secret := "bench-" + rand.Text()
	addr, err := freeLoopbackAddr()
	if err != nil {
		return fmt.Errorf("api watch: %w", err)
	}
	args := append(slices.Clone(a.Command[1:]),
		"--listen", addr,
		"--api-static-token", apiserver.ClusterAdminTeam+":admin:"+secret,
		"--kafka-brokers", strings.Join(a.Backends.Brokers, ","),
		"--cassandra-hosts", strings.Join(a.Backends.CassandraHosts, ","),
		"--keyspace", a.Keyspace,
		"--topic-prefix", a.Topics.Prefix,
		// The watch is cut at Stop: a stream never finishes by itself.
		"--shutdown-grace", "1s",
		"--log-level", "warn")
	// Not CommandContext: the server lives from Start to Stop, which ends
	// it and waits for it.
	cmd := exec.Command(a.Command[0], args...) //nolint:noctx // see above
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if a.Log != nil {
		cmd.Stdout, cmd.Stderr = a.Log, a.Log
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("api watch: start %v: %w", a.Command, err)
	}
	a.pid.Store(int64(cmd.Process.Pid))
	// exited is closed when the server has exited; exitErr is then its
	// status.
	exited := make(chan struct{})
	var exitErr error
	go func() {
		defer close(exited)
		exitErr = cmd.Wait()
	}()
	// Registered first, so it runs last: the client's stream ends with
	// the run's context before the server stops.
	run.OnStop(func() {
		defer a.pid.Store(0)
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	if err := waitListening(ctx, addr, exited, func() error { return exitErr }); err != nil {
		return fmt.Errorf("api watch: the server (%v): %w", a.Command, err)
	}
	client := apiv1connect.NewWatchServiceClient(http.DefaultClient, "http://"+addr)
	ready := make(chan error, 1)
	run.Go(func(runCtx context.Context) { a.consume(runCtx, client, "Bearer "+secret, ready) })
	select {
	case err := <-ready:
		return err
	case <-ctx.Done():
		return fmt.Errorf("api watch: open the stream: %w", ctx.Err())
	}
}

// PID is the process id of the API server while it runs.
func (a *APIWatch) PID() (int, bool) {
	pid := a.pid.Load()
	return int(pid), pid != 0
}

// waitListening waits until addr accepts a connection: the server has
// checked its backends and serves. It fails when the server exits first
// (exited closed, status its exit status), or ctx ends.
func waitListening(ctx context.Context, addr string, exited <-chan struct{}, status func() error) error {
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before it served: %w", status())
		case <-ctx.Done():
			return fmt.Errorf("not serving on %s: %w", addr, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
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
	out := fmt.Sprintf("the API server (a `sundial api` child process, on loopback) streamed WatchRuns of every run to a cluster-admin client from the end of the baselines to the end of the run: %d messages received, %d during the measured window (%.0f/s)",
		s.Messages, s.InWindow, s.InWindowPerSec)
	if s.Reopened > 0 {
		out += fmt.Sprintf("; the stream ended early and was opened again %d times (last: %s)", s.Reopened, s.LastError)
	}
	return out
}
