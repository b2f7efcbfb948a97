package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/auth"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// WatchEventsPath is where EventsHandler is meant to be mounted: the
// server-sent events form of WatchEvents, for browsers.
const WatchEventsPath = "/v1/watch/events"

// WatchServiceConfig holds the watch service's dependencies.
type WatchServiceConfig struct {
	// Kafka are the options of the watches' one shared reader: the seed
	// brokers (kgo.SeedBrokers) and the connection's TLS and SASL, as
	// connect.Kafka.Options builds them. Required.
	Kafka []kgo.Opt
	// Topic is topics.Names.Events (required).
	Topic string
	// Now stamps watching_since (required).
	Now func() time.Time
	// Logger receives the backend failures a caller is not shown
	// (required).
	Logger *slog.Logger
	// MaxStreamsPerCaller bounds the watches one caller (one
	// auth.Principal.Subject) holds open at once; one more is refused
	// resource_exhausted. Default DefaultMaxWatchesPerCaller.
	MaxStreamsPerCaller int
	// MaxStreams bounds the watches the server holds open at once, every
	// caller together. Default DefaultMaxWatches.
	MaxStreams int
}

// Defaults of WatchServiceConfig's caps. Each watch holds a buffer of
// events and a goroutine for as long as it is open; the Kafka client is
// shared.
const (
	DefaultMaxWatchesPerCaller = 8
	DefaultMaxWatches          = 256
)

// Validate reports every missing dependency.
func (c WatchServiceConfig) Validate() error {
	var errs []error
	if len(c.Kafka) == 0 {
		errs = append(errs, errors.New("watch service: kafka options: must name the seed brokers"))
	}
	if c.Topic == "" {
		errs = append(errs, errors.New("watch service: topic: required"))
	}
	if c.Now == nil {
		errs = append(errs, errors.New("watch service: now: required"))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("watch service: logger: required"))
	}
	if c.MaxStreamsPerCaller < 0 {
		errs = append(errs, fmt.Errorf("watch service: max streams per caller %d: must not be negative", c.MaxStreamsPerCaller))
	}
	if c.MaxStreams < 0 {
		errs = append(errs, fmt.Errorf("watch service: max streams %d: must not be negative", c.MaxStreams))
	}
	return errors.Join(errs...)
}

// WatchService implements apiv1connect.WatchServiceHandler, and serves the
// same stream as server-sent events (EventsHandler).
//
// Every open watch shares one reader of sundial.events (watchHub), a client
// assigned the topic's partitions at their end offsets in no consumer
// group, so it takes nothing from the components that consume the topic,
// and N watches cost one client. A watch's first message says it is
// registered (watching_since; the SSE "ready" event): a client that waits
// for it misses no event published afterwards. A watch that cannot keep up
// (watchBuffer events unread) is ended unavailable, never allowed to slow
// the others. A watch ends when its client goes
// away or the server's context ends; it keeps nothing once it has ended.
// A caller holds at most MaxStreamsPerCaller watches, the server
// MaxStreams; one more is refused before it opens a client.
type WatchService struct {
	cfg   WatchServiceConfig
	slots *watchSlots
	hub   *watchHub
}

var _ apiv1connect.WatchServiceHandler = (*WatchService)(nil)

// NewWatchService returns a watch service, or the config's errors.
func NewWatchService(cfg WatchServiceConfig) (*WatchService, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.MaxStreamsPerCaller = cmp.Or(cfg.MaxStreamsPerCaller, DefaultMaxWatchesPerCaller)
	cfg.MaxStreams = cmp.Or(cfg.MaxStreams, DefaultMaxWatches)
	w := &WatchService{cfg: cfg, slots: newWatchSlots(cfg.MaxStreamsPerCaller, cfg.MaxStreams)}
	w.hub = newWatchHub(w.open, cfg.Logger)
	return w, nil
}

// WatchEvents streams the run events the caller may see.
func (w *WatchService) WatchEvents(ctx context.Context, req *connect.Request[apiv1.WatchEventsRequest], stream *connect.ServerStream[apiv1.WatchEventsResponse]) error {
	p, err := requireCaller(ctx)
	if err != nil {
		return err
	}
	return w.watch(ctx, p, req.Msg.GetFilter(),
		func(since time.Time) error {
			return stream.Send(&apiv1.WatchEventsResponse{WatchingSince: timestamppb.New(since)})
		},
		func(ev *sundialv1.RunEvent) error {
			return stream.Send(&apiv1.WatchEventsResponse{Event: ev})
		})
}

// WatchRuns streams the state changes of the runs the caller may see.
func (w *WatchService) WatchRuns(ctx context.Context, req *connect.Request[apiv1.WatchRunsRequest], stream *connect.ServerStream[apiv1.WatchRunsResponse]) error {
	p, err := requireCaller(ctx)
	if err != nil {
		return err
	}
	return w.watch(ctx, p, req.Msg.GetFilter(),
		func(since time.Time) error {
			return stream.Send(&apiv1.WatchRunsResponse{WatchingSince: timestamppb.New(since)})
		},
		func(ev *sundialv1.RunEvent) error {
			return stream.Send(&apiv1.WatchRunsResponse{Change: changeOf(ev)})
		})
}

// changeOf is the run change an event reports.
func changeOf(ev *sundialv1.RunEvent) *apiv1.RunChange {
	c := &apiv1.RunChange{RunId: ev.GetRunId(), JobId: ev.GetJobId(), OwnerTeam: ev.GetOwnerTeam(),
		Attempt: ev.GetAttempt(), State: ev.GetState(), Time: ev.GetTime(), DagRunId: ev.GetDagRunId()}
	if e := ev.GetError(); e != nil {
		c.Error = strings.TrimPrefix(e.GetCode()+": "+e.GetMessage(), ": ")
	}
	return c
}

// checkWatchFilter reports every bad field of a filter.
func checkWatchFilter(f *apiv1.WatchFilter) error {
	var errs []error
	for _, st := range f.GetStates() {
		if _, ok := sundialv1.RunState_name[int32(st)]; !ok || st == sundialv1.RunState_RUN_STATE_UNSPECIFIED {
			errs = append(errs, fmt.Errorf("filter.states: %d is not a run state", st))
		}
	}
	return errors.Join(errs...)
}

// watch calls ready once it reads from the end of the topic, then send for
// every event that passes f and p may see, until ctx ends (nil) or send
// fails.
func (w *WatchService) watch(ctx context.Context, p auth.Principal, f *apiv1.WatchFilter, ready func(time.Time) error, send func(*sundialv1.RunEvent) error) error {
	if err := checkWatchFilter(f); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	if err := w.slots.take(p.Subject); err != nil {
		return connect.NewError(connect.CodeResourceExhausted, err)
	}
	defer w.slots.give(p.Subject)
	sub, err := w.hub.join(ctx)
	if err != nil {
		w.cfg.Logger.ErrorContext(ctx, "watch: open", "err", err)
		return internalError("watch")
	}
	defer w.hub.leave(sub)
	if err := ready(w.cfg.Now()); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			// The client went away or the server stops: the normal end of a
			// watch, not a failure.
			return nil
		case <-sub.gone:
			if errors.Is(sub.err, errFellBehind) {
				return connect.NewError(connect.CodeUnavailable, sub.err)
			}
			return internalError("watch")
		case ev := <-sub.events:
			if !passes(p, f, ev) {
				continue
			}
			if err := send(ev); err != nil {
				return err
			}
		}
	}
}

// passes reports whether ev is one p may see and f selects.
func passes(p auth.Principal, f *apiv1.WatchFilter, ev *sundialv1.RunEvent) bool {
	switch {
	case !p.CanSee(ev.GetOwnerTeam()),
		f.GetJobId() != "" && ev.GetJobId() != f.GetJobId(),
		f.GetTeam() != "" && ev.GetOwnerTeam() != f.GetTeam(),
		len(f.GetStates()) > 0 && !slices.Contains(f.GetStates(), ev.GetState()):
		return false
	}
	return true
}

// open returns a client reading every partition of the topic from its
// current end. The end offsets are listed before the client starts, so
// nothing published after open returns is missed.
func (w *WatchService) open(ctx context.Context) (*kgo.Client, error) {
	admCl, err := kgo.NewClient(w.cfg.Kafka...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	ends, err := endOffsets(ctx, kadm.NewClient(admCl), w.cfg.Topic)
	admCl.Close()
	if err != nil {
		return nil, err
	}
	start := map[int32]kgo.Offset{}
	for p, end := range ends {
		start[p] = kgo.NewOffset().At(end)
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, w.cfg.Kafka...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.cfg.Topic: start}))...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return cl, nil
}

// EventsHandler serves WatchEvents as server-sent events at
// GET WatchEventsPath?job=ID&team=T&state=FAILED&state=DEAD, for browsers
// that cannot read a streaming response of the Connect protocol. It
// expects the server's authentication to have put the principal in the
// request's context. The first event is "ready" (data: the
// watching_since instant); each run event follows as event "run" with its
// protojson in data. The stream ends when the client disconnects.
func (w *WatchService) EventsHandler() http.Handler {
	return http.HandlerFunc(w.serveEvents)
}

func (w *WatchService) serveEvents(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		rw.Header().Set("Allow", http.MethodGet)
		http.Error(rw, "method "+r.Method+": the event stream is read with GET", http.StatusMethodNotAllowed)
		return
	}
	p, ok := auth.FromContext(r.Context())
	if !ok {
		http.Error(rw, "no credentials: send a bearer token", http.StatusUnauthorized)
		return
	}
	q := r.URL.Query()
	f := &apiv1.WatchFilter{JobId: q.Get("job"), Team: q.Get("team")}
	for _, s := range q["state"] {
		name := strings.ToUpper(s)
		if !strings.HasPrefix(name, "RUN_STATE_") {
			name = "RUN_STATE_" + name
		}
		v, ok := sundialv1.RunState_value[name]
		if !ok || v == 0 {
			http.Error(rw, fmt.Sprintf("state %q: not a run state (started, succeeded, failed, dead...)", s), http.StatusBadRequest)
			return
		}
		f.States = append(f.States, sundialv1.RunState(v))
	}
	rc := http.NewResponseController(rw)
	ready := func(since time.Time) error {
		h := rw.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		rw.WriteHeader(http.StatusOK)
		if _, err := fmt.Fprintf(rw, "event: ready\ndata: %q\n\n", since.UTC().Format(time.RFC3339Nano)); err != nil {
			return err
		}
		return rc.Flush()
	}
	send := func(ev *sundialv1.RunEvent) error {
		b, err := protojson.Marshal(ev)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(rw, "event: run\ndata: %s\n\n", b); err != nil {
			return err
		}
		return rc.Flush()
	}
	err := w.watch(r.Context(), p, f, ready, send)
	var cerr *connect.Error
	if errors.As(err, &cerr) {
		// Before ready, nothing has been written: the error is the answer.
		status := http.StatusServiceUnavailable
		switch cerr.Code() {
		case connect.CodeInvalidArgument:
			status = http.StatusBadRequest
		case connect.CodeResourceExhausted:
			status = http.StatusTooManyRequests
		}
		http.Error(rw, cerr.Message(), status)
	}
}

// watchSlots counts the open watches, per caller and in all. It is the
// caps' one decision: take refuses past either cap and names it.
type watchSlots struct {
	perCaller, total int

	mu     sync.Mutex
	open   int
	byUser map[string]int
}

func newWatchSlots(perCaller, total int) *watchSlots {
	return &watchSlots{perCaller: perCaller, total: total, byUser: map[string]int{}}
}

// take reserves a slot for caller, or says which cap is reached.
func (s *watchSlots) take(caller string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.byUser[caller] >= s.perCaller:
		return fmt.Errorf("watch: the caller holds %d open watches, the most one caller may (--api-max-watches-per-caller): close one first", s.byUser[caller])
	case s.open >= s.total:
		return fmt.Errorf("watch: the server holds %d open watches, the most it serves at once (--api-max-watches): try again later", s.open)
	}
	s.open++
	s.byUser[caller]++
	return nil
}

// give releases a slot take reserved.
func (s *watchSlots) give(caller string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if s.byUser[caller]--; s.byUser[caller] <= 0 {
		delete(s.byUser, caller)
	}
}
