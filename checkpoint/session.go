package checkpoint

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Session is the checkpointing of one attempt: what its handler saves and
// loads goes through it. The runner makes one per attempt.
type Session struct {
	store     Store
	runID     string
	attempt   uint32
	token     int64
	now       func() time.Time
	requested func(ctx context.Context) bool
	onSuspend func()
	mu        sync.Mutex
	loaded    bool
	last      Checkpoint
	has       bool
	suspended bool
}

// SessionConfig configures a Session.
type SessionConfig struct {
	Store        Store
	RunID        string
	Attempt      uint32
	FencingToken int64
	// Now is the clock of SavedAt.
	Now func() time.Time
	// SuspendRequested reports whether an operator asked to suspend the
	// run; it is asked after each stored save.
	SuspendRequested func(ctx context.Context) bool
	// OnSuspend is called once, when a save reports ErrSuspended: the
	// runner cancels the attempt there.
	OnSuspend func()
}

// NewSession returns the session of one attempt.
func NewSession(c SessionConfig) *Session {
	return &Session{store: c.Store, runID: c.RunID, attempt: c.Attempt, token: c.FencingToken,
		now: c.Now, requested: c.SuspendRequested, onSuspend: c.OnSuspend}
}

// load reads the run's latest checkpoint once per attempt. mu is held.
func (s *Session) load(ctx context.Context) error {
	if s.loaded {
		return nil
	}
	c, ok, err := s.store.LoadCheckpoint(ctx, s.runID)
	if err != nil {
		return fmt.Errorf("load the checkpoint of run %s: %w", s.runID, err)
	}
	s.last, s.has, s.loaded = c, ok, true
	return nil
}

// Last returns the run's latest checkpoint, saved by this attempt or an
// earlier one; ok is false when there is none.
func (s *Session) Last(ctx context.Context) (c Checkpoint, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(ctx); err != nil {
		return Checkpoint{}, false, err
	}
	return s.last, s.has, nil
}

// Save stores data as the run's latest checkpoint. It returns ErrSuspended
// (after storing) when the run is to be suspended, ErrStale when another
// attempt has taken the run over, and a *TooLargeError above MaxSize.
func (s *Session) Save(ctx context.Context, data []byte) error {
	if len(data) > MaxSize {
		return &TooLargeError{Size: len(data)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.suspended {
		return ErrSuspended
	}
	if err := s.load(ctx); err != nil {
		return err
	}
	c := Checkpoint{RunID: s.runID, Seq: s.last.Seq + 1, Attempt: s.attempt, FencingToken: s.token,
		Data: append([]byte(nil), data...), SavedAt: s.now().UTC()}
	if err := s.store.SaveCheckpoint(ctx, c); err != nil {
		return fmt.Errorf("save checkpoint %d of run %s: %w", c.Seq, s.runID, err)
	}
	s.last, s.has = c, true
	if s.requested != nil && s.requested(ctx) {
		s.suspended = true
		if s.onSuspend != nil {
			s.onSuspend()
		}
		return ErrSuspended
	}
	return nil
}

// Suspended reports whether a save reported ErrSuspended.
func (s *Session) Suspended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.suspended
}

type sessionKey struct{}

// NewContext returns ctx carrying s.
func NewContext(ctx context.Context, s *Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// FromContext returns the session ctx carries, or nil.
func FromContext(ctx context.Context) *Session {
	s, _ := ctx.Value(sessionKey{}).(*Session)
	return s
}
