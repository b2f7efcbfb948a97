package apiserver

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// watchBuffer is how many events a watch may have unread before the hub
// drops it: a watch that cannot keep up is ended (unavailable, "fell
// behind"), never allowed to slow the others or to grow without bound.
const watchBuffer = 4096

// errFellBehind ends a watch whose buffer filled up.
var errFellBehind = errors.New("the watch fell behind the event stream: reconnect")

// watchHub is the one reader of sundial.events that every open watch of a
// server shares, so that N watches cost one Kafka client, not N. The
// reader starts with the first watch, at the topic's end, and stops when
// the last one leaves; join waits for it, leave waits for its goroutine.
// It decodes each event once and hands it to every watch registered when
// the event is dispatched, so a watch registered before an event is
// published receives it.
type watchHub struct {
	open   func(ctx context.Context) (*kgo.Client, error)
	logger *slog.Logger

	mu   sync.Mutex
	subs map[*watcher]struct{}
	stop context.CancelFunc // the running reader's; nil when none runs
	done chan struct{}      // closed when that reader has exited
}

// watcher is one watch's end of the hub.
type watcher struct {
	events chan *sundialv1.RunEvent
	gone   chan struct{} // closed by the hub when it dropped the watch
	err    error         // why, set before gone is closed
}

func newWatchHub(open func(context.Context) (*kgo.Client, error), logger *slog.Logger) *watchHub {
	return &watchHub{open: open, logger: logger, subs: map[*watcher]struct{}{}}
}

// join registers a watch, starting the reader if none runs.
func (h *watchHub) join(ctx context.Context) (*watcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stop == nil {
		cl, err := h.open(ctx)
		if err != nil {
			return nil, err
		}
		// The reader outlives the request that started it: it ends when
		// the last watch leaves.
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		h.stop, h.done = cancel, done
		go h.read(rctx, cl, done)
	}
	w := &watcher{events: make(chan *sundialv1.RunEvent, watchBuffer), gone: make(chan struct{})}
	h.subs[w] = struct{}{}
	return w, nil
}

// leave unregisters w; the last watch to leave stops the reader and waits
// for it.
func (h *watchHub) leave(w *watcher) {
	h.mu.Lock()
	delete(h.subs, w)
	if len(h.subs) > 0 || h.stop == nil {
		h.mu.Unlock()
		return
	}
	stop, done := h.stop, h.done
	h.stop, h.done = nil, nil
	h.mu.Unlock()
	stop()
	<-done
}

// read polls until ctx ends or a fetch fails, dispatching every event.
// A failure drops every watch (each ends with it) and ends this reader;
// the next watch starts another.
func (h *watchHub) read(ctx context.Context, cl *kgo.Client, done chan struct{}) {
	defer close(done)
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		if err := fetchErrors(fs); err != nil {
			h.logger.Error("watch: read", "err", err)
			h.dropAll(done, err)
			return
		}
		var evs []*sundialv1.RunEvent
		for it := fs.RecordIter(); !it.Done(); {
			if ev, ok := decodeRunEvent(it.Next()); ok {
				evs = append(evs, ev)
			}
		}
		h.dispatch(evs)
	}
}

// dispatch hands evs to every registered watch, dropping one whose buffer
// is full.
func (h *watchHub) dispatch(evs []*sundialv1.RunEvent) {
	if len(evs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.subs {
		for _, ev := range evs {
			select {
			case w.events <- ev:
				continue
			default:
			}
			h.drop(w, errFellBehind)
			break
		}
	}
}

// dropAll ends every watch of the reader whose done channel is done with
// err, and forgets that reader so that the next join starts another.
func (h *watchHub) dropAll(done chan struct{}, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done != done {
		return // a newer reader runs; its watches are not this one's
	}
	for w := range h.subs {
		h.drop(w, err)
	}
	h.stop() // the reader is returning already; this frees its context
	h.stop, h.done = nil, nil
}

// drop ends w with err. h.mu is held.
func (h *watchHub) drop(w *watcher, err error) {
	delete(h.subs, w)
	w.err = err
	close(w.gone)
}
