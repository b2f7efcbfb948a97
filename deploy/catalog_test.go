package deploy_test

import (
	"context"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/dispatcher"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/gateway"
	"github.com/sundialhq/sundial/history"
	"github.com/sundialhq/sundial/internal/telemetry"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/registry"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
	"github.com/sundialhq/sundial/trigger"
)

// metricInfo is what the catalogue knows of one metric family.
type metricInfo struct {
	name      string
	histogram bool
	summary   bool
	labels    []string // variable and constant label names
}

// catalog is a Registerer that remembers every metric family registered
// through it (from the collectors' descriptors, so label vectors that have
// no series yet are known too) and forwards to a real registry.
type catalog struct {
	reg *prometheus.Registry

	mu      sync.Mutex
	metrics map[string]*metricInfo
}

func newCatalog() *catalog {
	return &catalog{reg: telemetry.NewRegistry(), metrics: map[string]*metricInfo{}}
}

func (c *catalog) Register(col prometheus.Collector) error {
	if err := c.reg.Register(col); err != nil {
		return err
	}
	c.record(col)
	return nil
}

func (c *catalog) MustRegister(cols ...prometheus.Collector) {
	for _, col := range cols {
		if err := c.Register(col); err != nil {
			panic(err)
		}
	}
}

func (c *catalog) Unregister(col prometheus.Collector) bool { return c.reg.Unregister(col) }

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}\}$`)
)

// record reads the collector's descriptors, and the type of each family from
// the vector's type or, for the rest, from what it collects now.
func (c *catalog) record(col prometheus.Collector) {
	descs := make(chan *prometheus.Desc)
	go func() { col.Describe(descs); close(descs) }()
	var infos []*metricInfo
	for d := range descs {
		info := &metricInfo{}
		s := d.String()
		if m := descName.FindStringSubmatch(s); m != nil {
			info.name = m[1]
		}
		if m := descLabels.FindStringSubmatch(s); m != nil {
			for _, part := range []string{m[1], m[2]} {
				for _, l := range strings.Split(part, ",") {
					if l = strings.TrimSpace(l); l != "" {
						info.labels = append(info.labels, strings.SplitN(l, "=", 2)[0])
					}
				}
			}
		}
		switch col.(type) {
		case *prometheus.HistogramVec:
			info.histogram = true
		case *prometheus.SummaryVec:
			info.summary = true
		}
		infos = append(infos, info)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, info := range infos {
		if old, ok := c.metrics[info.name]; ok {
			info.histogram = info.histogram || old.histogram
			info.summary = info.summary || old.summary
		}
		c.metrics[info.name] = info
	}
}

// gather adds what the registry gathers now, with the types it reports.
func (c *catalog) gather(t *testing.T) {
	t.Helper()
	mfs, err := c.reg.Gather()
	require.NoError(t, err)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, mf := range mfs {
		info, ok := c.metrics[mf.GetName()]
		if !ok {
			info = &metricInfo{name: mf.GetName()}
			c.metrics[mf.GetName()] = info
		}
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			info.histogram = true
		case dto.MetricType_SUMMARY:
			info.summary = true
		}
	}
}

// seriesNames returns every series name a query may select: a histogram N
// gives N (native), N_bucket, N_sum and N_count; a summary N, N_sum and
// N_count.
func (c *catalog) seriesNames() map[string]*metricInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]*metricInfo{}
	for name, info := range c.metrics {
		out[name] = info
		if info.histogram {
			out[name+"_bucket"] = info
		}
		if info.histogram || info.summary {
			out[name+"_sum"] = info
			out[name+"_count"] = info
		}
	}
	return out
}

func (c *catalog) families() []*metricInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*metricInfo, 0, len(c.metrics))
	for _, info := range c.metrics {
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

type nopEnqueuer struct{}

func (nopEnqueuer) Enqueue(context.Context, ...store.DueEntry) error     { return nil }
func (nopEnqueuer) Wake(context.Context, ...store.DueEntry) error        { return nil }
func (nopEnqueuer) WakeRecords(...store.DueEntry) ([]*kgo.Record, error) { return nil, nil }

// buildCatalog constructs the components of every Sundial process the way
// their commands do, with the process's telemetry, against backends that are
// never contacted (no component does I/O before Start), and returns the
// catalogue of the metrics they register. A metric renamed in a component
// changes this catalogue, and the dashboards' and rules' check fails.
func buildCatalog(t *testing.T) *catalog {
	t.Helper()
	c := newCatalog()
	mem, err := memory.New(memory.Options{})
	require.NoError(t, err)
	brokers := []string{"127.0.0.1:1"}

	_, err = dispatcher.New(dispatcher.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Store: mem, Registerer: c})
	require.NoError(t, err, "dispatcher")
	// The dispatcher's process reads sundial.executors.
	_, err = discovery.NewDirectory(discovery.DirectoryConfig{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Registerer: c})
	require.NoError(t, err, "discovery")

	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rc.Close() })
	leases, err := leasing.New(leasing.Config{Client: rc})
	require.NoError(t, err)
	_, err = runner.New(runner.Config{
		Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Leases: leases, Redis: rc,
		Enqueuer: nopEnqueuer{}, Registerer: c,
	})
	require.NoError(t, err, "runner")
	// The runner process also exports the team quotas and their usage.
	require.NoError(t, c.Register(quota.NewCollector(quota.NewMemory(), leases, 0)))

	// The history process (or a runner's, with --history).
	_, err = history.New(history.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, History: mem, Registerer: c})
	require.NoError(t, err, "history")
	// The registry's and the runner's processes enqueue through one
	// Enqueuer each.
	enqClient, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(enqueue.Partitioner(topics.Names{}, nil)))
	require.NoError(t, err)
	t.Cleanup(enqClient.Close)
	_, err = enqueue.New(enqueue.Config{Store: mem, Client: enqClient, Shards: 128, Registerer: c})
	require.NoError(t, err, "enqueue")

	_, err = registry.New(registry.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Store: mem, Waker: nopEnqueuer{}, Registerer: c})
	require.NoError(t, err, "registry")
	_, err = trigger.New(trigger.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Store: mem, Enqueuer: nopEnqueuer{}, Registerer: c})
	require.NoError(t, err, "trigger")

	// Backend clients, instrumented as every process instruments them.
	require.NoError(t, telemetry.InstrumentRedis(rc, c, "leases"))
	_, err = telemetry.NewCassandraObserver(c)
	require.NoError(t, err)
	require.NoError(t, (&telemetry.WorkCounter{}).Register(c))
	kc, err := kgo.NewClient(kgo.SeedBrokers(brokers...), telemetry.KafkaMetrics(c, "catalog"))
	require.NoError(t, err)
	t.Cleanup(kc.Close)

	_, err = dagengine.New(dagengine.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Store: mem, Enqueuer: nopEnqueuer{}, Producer: kc, Shards: 128, Registerer: c})
	require.NoError(t, err, "dagengine")

	// The API's worker gateway (sundial api --worker-gateway).
	_, err = gateway.New(gateway.Config{Registerer: c})
	require.NoError(t, err, "gateway")

	c.gather(t)
	return c
}
