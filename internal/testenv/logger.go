package testenv

import (
	"log/slog"
	"sync"
	"testing"
)

// Logger is a logger that writes to the test's log at level and above. A
// line that arrives after the test ended (a component's goroutine that
// outlives it) is dropped rather than logged to a finished test, which
// would panic.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.done = true
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// testWriter writes to t's log until the test ends.
type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(p))
	}
	return len(p), nil
}
