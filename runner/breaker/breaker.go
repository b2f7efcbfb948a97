package breaker

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/sundialhq/sundial/runner/target"
)

// Defaults of Config.
const (
	DefaultFailures         = 5
	DefaultOpenTimeout      = 30 * time.Second
	DefaultHalfOpenRequests = 1
	DefaultInterval         = time.Minute
	DefaultMaxDownstreams   = 10000
)

// Config configures a Set. The zero value of every field means its default.
type Config struct {
	// Failures is how many consecutive failures open a breaker. Default 5.
	Failures uint32
	// OpenTimeout is how long a breaker stays open before it lets probes
	// through. It is also the deferral of a run that finds it open.
	// Default 30s.
	OpenTimeout time.Duration
	// HalfOpenRequests is how many probes a half-open breaker lets through.
	// Default 1.
	HalfOpenRequests uint32
	// Interval is how often a closed breaker forgets its counts. Default 1m.
	Interval time.Duration
	// MaxDownstreams bounds the number of breakers (and metric series).
	// Default 10000.
	MaxDownstreams int
	// Registerer receives the breaker state gauge. Nil registers nothing.
	Registerer prometheus.Registerer
	// Logger logs state changes. Nil discards.
	Logger *slog.Logger
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	if c.OpenTimeout < 0 {
		errs = append(errs, fmt.Errorf("breaker config: OpenTimeout: %s is negative", c.OpenTimeout))
	}
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("breaker config: Interval: %s is negative", c.Interval))
	}
	if c.MaxDownstreams < 0 {
		errs = append(errs, fmt.Errorf("breaker config: MaxDownstreams: %d is negative", c.MaxDownstreams))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	c.Failures = cmp.Or(c.Failures, DefaultFailures)
	c.OpenTimeout = cmp.Or(c.OpenTimeout, DefaultOpenTimeout)
	c.HalfOpenRequests = cmp.Or(c.HalfOpenRequests, DefaultHalfOpenRequests)
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.MaxDownstreams = cmp.Or(c.MaxDownstreams, DefaultMaxDownstreams)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Key names a breaker: one team's calls to one downstream. A team's
// failing calls open its own breaker only, never another team's to the
// same downstream.
type Key struct {
	Team       string
	Downstream string
}

func (k Key) String() string { return k.Team + " " + k.Downstream }

// OpenError is returned by Do when the downstream's breaker refuses the call.
type OpenError struct {
	Key
	// RetryIn is when to try again: the breaker's open timeout, an upper
	// bound of how long it stays open.
	RetryIn time.Duration
	Err     error
}

func (e *OpenError) Error() string {
	return fmt.Sprintf("circuit breaker of %s for team %s: %v", e.Downstream, e.Team, e.Err)
}

func (e *OpenError) Unwrap() error { return e.Err }

// Set is the breakers of a runner, by team and downstream. Safe for
// concurrent use.
type Set struct {
	cfg   Config
	state *prometheus.GaugeVec

	mu sync.Mutex
	m  map[Key]*gobreaker.CircuitBreaker[struct{}]
}

// New returns an empty Set.
func New(cfg Config) (*Set, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Set{
		cfg: cfg.withDefaults(),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "breaker_state",
			Help: "Circuit breaker state per team and downstream: 0 closed, 1 half-open, 2 open.",
		}, []string{"team", "downstream"}),
		m: map[Key]*gobreaker.CircuitBreaker[struct{}]{},
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.state); err != nil {
			return nil, fmt.Errorf("breaker: register metrics: %w", err)
		}
	}
	return s, nil
}

func (s *Set) get(key Key) *gobreaker.CircuitBreaker[struct{}] {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cb, ok := s.m[key]; ok {
		return cb
	}
	if len(s.m) >= s.cfg.MaxDownstreams {
		return nil
	}
	cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        key.String(),
		MaxRequests: s.cfg.HalfOpenRequests,
		Interval:    s.cfg.Interval,
		Timeout:     s.cfg.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= s.cfg.Failures
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			s.state.WithLabelValues(key.Team, key.Downstream).Set(float64(to))
			s.cfg.Logger.Warn("circuit breaker changed state", "team", key.Team, "downstream", key.Downstream, "from", from.String(), "to", to.String())
		},
		IsSuccessful: healthy,
		IsExcluded:   cancelled,
	})
	s.m[key] = cb
	s.state.WithLabelValues(key.Team, key.Downstream).Set(float64(gobreaker.StateClosed))
	return cb
}

// healthy says whether the downstream answered, whatever the answer.
func healthy(err error) bool {
	if err == nil {
		return true
	}
	var te *target.Error
	return errors.As(err, &te) && !te.Retryable
}

// cancelled says whether the call was cut short by the runner itself.
func cancelled(err error) bool {
	var te *target.Error
	return errors.As(err, &te) && te.Code == target.CodeCancelled
}

// Open reports whether key's breaker would refuse a call now (open),
// without calling. A half-open breaker is not reported open: Do decides.
func (s *Set) Open(key Key) bool {
	if key.Downstream == "" {
		return false
	}
	cb := s.get(key)
	return cb != nil && cb.State() == gobreaker.StateOpen
}

// State returns key's breaker state.
func (s *Set) State(key Key) gobreaker.State {
	if cb := s.get(key); cb != nil {
		return cb.State()
	}
	return gobreaker.StateClosed
}

// Do calls fn through key's breaker. When the breaker refuses, fn is not
// called and the error is an *OpenError. An empty downstream has no
// breaker.
func (s *Set) Do(key Key, fn func() error) error {
	if key.Downstream == "" {
		return fn()
	}
	cb := s.get(key)
	if cb == nil {
		return fn()
	}
	_, err := cb.Execute(func() (struct{}, error) { return struct{}{}, fn() })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return &OpenError{Key: key, RetryIn: s.cfg.OpenTimeout, Err: err}
	}
	return err
}

// OpenTimeout is the configured open period.
func (s *Set) OpenTimeout() time.Duration { return s.cfg.OpenTimeout }
