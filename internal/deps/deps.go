package deps

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Logger returns l, or a logger that discards when l is nil.
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Clock returns now, or time.Now when now is nil.
func Clock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}

// Registerer returns r, or a new private registry when r is nil.
func Registerer(r prometheus.Registerer) prometheus.Registerer {
	if r == nil {
		return prometheus.NewRegistry()
	}
	return r
}
