package apiserver

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// A watch whose buffer is full is dropped with errFellBehind; the others
// get every event, in order.
func TestHubDropsOnlyTheWatchThatFellBehind(t *testing.T) {
	t.Parallel()
	h := newWatchHub(nil, slog.New(slog.DiscardHandler))
	slow := &watcher{events: make(chan *sundialv1.RunEvent, 1), gone: make(chan struct{})}
	fast := &watcher{events: make(chan *sundialv1.RunEvent, 8), gone: make(chan struct{})}
	h.subs[slow], h.subs[fast] = struct{}{}, struct{}{}

	evs := []*sundialv1.RunEvent{{RunId: "a"}, {RunId: "b"}}
	h.dispatch(evs)

	select {
	case <-slow.gone:
		assert.ErrorIs(t, slow.err, errFellBehind)
	default:
		t.Fatal("the slow watch was not dropped")
	}
	require.Len(t, h.subs, 1)
	assert.Contains(t, h.subs, fast)
	assert.Equal(t, "a", (<-fast.events).GetRunId())
	assert.Equal(t, "b", (<-fast.events).GetRunId())
	h.leave(slow) // a dropped watch leaving changes nothing
	assert.Len(t, h.subs, 1)
}
