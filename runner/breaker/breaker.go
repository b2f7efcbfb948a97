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

// OpenError is returned by Do when the downstream's breaker refuses the call.
type OpenError struct {
	Downstream string
	// RetryIn is when to try again: the breaker's open timeout, an upper
	// bound of how long it stays open.
	RetryIn time.Duration
	Err     error
}

func (e *OpenError) Error() string {
	return fmt.Sprintf("circuit breaker of %s: %v", e.Downstream, e.Err)
}

func (e *OpenError) Unwrap() error { return e.Err }

// Set is the breakers of a runner, by downstream name. Safe for concurrent use.
type Set struct {
	cfg   Config
	state *prometheus.GaugeVec

	mu sync.Mutex
	m  map[string]*gobreaker.CircuitBreaker[struct{}]
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
			Help: "Circuit breaker state per downstream: 0 closed, 1 half-open, 2 open.",
		}, []string{"downstream"}),
		m: map[string]*gobreaker.CircuitBreaker[struct{}]{},
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.state); err != nil {
			return nil, fmt.Errorf("breaker: register metrics: %w", err)
		}
	}
	return s, nil
}

func (s *Set) get(downstream string) *gobreaker.CircuitBreaker[struct{}] {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cb, ok := s.m[downstream]; ok {
		return cb
	}
	if len(s.m) >= s.cfg.MaxDownstreams {
		return nil
	}
	cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        downstream,
		MaxRequests: s.cfg.HalfOpenRequests,
		Interval:    s.cfg.Interval,
		Timeout:     s.cfg.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= s.cfg.Failures
		},
		OnStateChange: func(name string, from, to gobreaker.State) {
			s.state.WithLabelValues(name).Set(float64(to))
			s.cfg.Logger.Warn("circuit breaker changed state", "downstream", name, "from", from.String(), "to", to.String())
		},
		IsSuccessful: healthy,
		IsExcluded:   cancelled,
	})
	s.m[downstream] = cb
	s.state.WithLabelValues(downstream).Set(float64(gobreaker.StateClosed))
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

// Open reports whether downstream's breaker would refuse a call now (open),
// without calling. A half-open breaker is not reported open: Do decides.
func (s *Set) Open(downstream string) bool {
	if downstream == "" {
		return false
	}
	cb := s.get(downstream)
	return cb != nil && cb.State() == gobreaker.StateOpen
}

// State returns downstream's breaker state.
func (s *Set) State(downstream string) gobreaker.State {
	if cb := s.get(downstream); cb != nil {
		return cb.State()
	}
	return gobreaker.StateClosed
}

// Do calls fn through downstream's breaker. When the breaker refuses, fn is
// not called and the error is an *OpenError. An empty downstream has no
// breaker.
func (s *Set) Do(downstream string, fn func() error) error {
	if downstream == "" {
		return fn()
	}
	cb := s.get(downstream)
	if cb == nil {
		return fn()
	}
	_, err := cb.Execute(func() (struct{}, error) { return struct{}{}, fn() })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return &OpenError{Downstream: downstream, RetryIn: s.cfg.OpenTimeout, Err: err}
	}
	return err
}

// OpenTimeout is the configured open period.
func (s *Set) OpenTimeout() time.Duration { return s.cfg.OpenTimeout }
