package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// InstrumentRedis adds a hook to client that records how long every command
// and pipeline takes, and registers the client's connection-pool statistics.
// Metrics, each with a constant label client=name:
//
//	sundial_redis_command_duration_seconds{command, outcome}  histogram
//	sundial_redis_dials_total{outcome}                        counter
//	sundial_redis_pool_connections{state="total"|"idle"}      gauge
//	sundial_redis_pool_hits_total, _misses_total, _timeouts_total, _waits_total  counters
//	sundial_redis_pool_wait_seconds_total                     counter
//
// command is the lower-case command name (evalsha, eval, get, publish...),
// "pipeline" for a pipeline and "multi" for a transaction; outcome is ok,
// nil (redis.Nil: a missing key, not a failure), canceled, timeout or error.
// Lease scripts run as evalsha, so the lease round trip is
// command="evalsha".
func InstrumentRedis(client redis.UniversalClient, reg prometheus.Registerer, name string) error {
	labels := prometheus.Labels{"client": name}
	opts := HistogramOpts("sundial_redis_command_duration_seconds",
		"Time from sending a Redis command (or pipeline) to reading its reply, by command and outcome.", CallBuckets())
	opts.ConstLabels = labels
	h := &redisHook{
		duration: prometheus.NewHistogramVec(opts, []string{"command", "outcome"}),
		dials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_redis_dials_total", Help: "Connections dialled to Redis, by outcome.", ConstLabels: labels,
		}, []string{"outcome"}),
	}
	pool := newRedisPoolCollector(client, labels)
	var errs []error
	for _, c := range []prometheus.Collector{h.duration, h.dials, pool} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, c := range []prometheus.Collector{h.duration, h.dials, pool} {
			reg.Unregister(c)
		}
		return fmt.Errorf("telemetry: redis client %q: register metrics: %w", name, err)
	}
	client.AddHook(h)
	return nil
}

type redisHook struct {
	duration *prometheus.HistogramVec
	dials    *prometheus.CounterVec
}

func (h *redisHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		h.dials.WithLabelValues(redisOutcome(err)).Inc()
		return conn, err
	}
}

func (h *redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		h.duration.WithLabelValues(strings.ToLower(cmd.Name()), redisOutcome(err)).Observe(time.Since(start).Seconds())
		return err
	}
}

func (h *redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		name := "pipeline"
		if len(cmds) > 0 && strings.EqualFold(cmds[0].Name(), "multi") {
			name = "multi"
		}
		h.duration.WithLabelValues(name, redisOutcome(err)).Observe(time.Since(start).Seconds())
		return err
	}
}

// redisOutcome classifies err into a bounded set of label values.
func redisOutcome(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, redis.Nil):
		return "nil"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "error"
	}
}

// redisPoolCollector reads the client's pool statistics at each scrape.
type redisPoolCollector struct {
	client                                  redis.UniversalClient
	conns, hits, misses, timeouts, waits, w *prometheus.Desc
}

func newRedisPoolCollector(client redis.UniversalClient, labels prometheus.Labels) *redisPoolCollector {
	d := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, variable, labels)
	}
	return &redisPoolCollector{
		client:   client,
		conns:    d("sundial_redis_pool_connections", "Connections in the Redis client's pool, by state (total, idle).", "state"),
		hits:     d("sundial_redis_pool_hits_total", "Times a free connection was found in the pool."),
		misses:   d("sundial_redis_pool_misses_total", "Times no free connection was found in the pool (a new one was dialled or awaited)."),
		timeouts: d("sundial_redis_pool_timeouts_total", "Times waiting for a pool connection timed out."),
		waits:    d("sundial_redis_pool_waits_total", "Times a command waited for a pool connection."),
		w:        d("sundial_redis_pool_wait_seconds_total", "Time spent waiting for pool connections."),
	}
}

func (c *redisPoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.hits, c.misses, c.timeouts, c.waits, c.w} {
		ch <- d
	}
}

func (c *redisPoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.client.PoolStats()
	if s == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.TotalConns), "total")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.IdleConns), "idle")
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(s.Hits))
	ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(s.Misses))
	ch <- prometheus.MustNewConstMetric(c.timeouts, prometheus.CounterValue, float64(s.Timeouts))
	ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(s.WaitCount))
	ch <- prometheus.MustNewConstMetric(c.w, prometheus.CounterValue, time.Duration(s.WaitDurationNs).Seconds())
}
