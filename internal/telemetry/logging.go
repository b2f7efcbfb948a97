package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Attribute keys of the identifiers logs are searched by.
const (
	KeyJobID = "job_id"
	KeyRunID = "run_id"
)

// Log formats of LogConfig.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// LogConfig configures NewLogger.
type LogConfig struct {
	// Format is "text" (logfmt-like key=value, for people) or "json" (one
	// object per line, for log pipelines). Default "text".
	Format string
	// Level is the lowest level written: "debug", "info", "warn" or
	// "error", case-insensitive, optionally with an offset ("info+2").
	// Default "info".
	Level string
	// AddSource adds the file and line of the log call to each record.
	AddSource bool
}

func (c LogConfig) withDefaults() LogConfig {
	c.Format = cmp.Or(strings.ToLower(c.Format), FormatText)
	c.Level = cmp.Or(c.Level, "info")
	return c
}

// Validate reports every invalid field, after defaults are applied.
func (c LogConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Format != FormatText && c.Format != FormatJSON {
		errs = append(errs, fmt.Errorf("log config: format: %q is not %q or %q", c.Format, FormatText, FormatJSON))
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.Level)); err != nil {
		errs = append(errs, fmt.Errorf("log config: level: %q is not debug, info, warn or error", c.Level))
	}
	return errors.Join(errs...)
}

// NewLogger returns the process's logger, writing to w. Records logged with
// a context carrying ContextWithRun's identifiers get job_id and run_id
// attributes.
func NewLogger(w io.Writer, c LogConfig) (*slog.Logger, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated
	opts := &slog.HandlerOptions{Level: level, AddSource: c.AddSource}
	var h slog.Handler
	if c.Format == FormatJSON {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(contextHandler{h}), nil
}

// WithRun returns a logger whose records carry the job and run ids. Empty
// ids are left out.
func WithRun(l *slog.Logger, jobID, runID string) *slog.Logger {
	attrs := runAttrs(jobID, runID)
	if len(attrs) == 0 {
		return l
	}
	return l.With(attrs...)
}

func runAttrs(jobID, runID string) []any {
	var attrs []any
	if jobID != "" {
		attrs = append(attrs, slog.String(KeyJobID, jobID))
	}
	if runID != "" {
		attrs = append(attrs, slog.String(KeyRunID, runID))
	}
	return attrs
}

type runKey struct{}

type runIDs struct{ job, run string }

// ContextWithRun returns a context whose log records (logger.InfoContext and
// friends, through a logger from NewLogger) carry the job and run ids. Use
// it where a run's context is made, so every package below logs them without
// passing a logger around. Empty ids are left out.
func ContextWithRun(ctx context.Context, jobID, runID string) context.Context {
	return context.WithValue(ctx, runKey{}, runIDs{job: jobID, run: runID})
}

// contextHandler adds the ids of ContextWithRun to each record.
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if ids, ok := ctx.Value(runKey{}).(runIDs); ok {
		if ids.job != "" {
			r.AddAttrs(slog.String(KeyJobID, ids.job))
		}
		if ids.run != "" {
			r.AddAttrs(slog.String(KeyRunID, ids.run))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}
