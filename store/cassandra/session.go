package cassandra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
)

// ErrUnreachable is returned (wrapped) when no contact point accepted a
// connection within the connect timeout.
var ErrUnreachable = errors.New("cassandra unreachable")

// clusterConfig turns Config into the driver's configuration. The session is
// not bound to the keyspace: statements name their tables fully, so one
// session serves migrations (before the keyspace exists) and the store, and
// the driver still routes by token from the prepared statements' metadata.
func clusterConfig(c Config, timeout time.Duration) *gocql.ClusterConfig {
	cluster := gocql.NewCluster(c.Hosts...)
	// gocql dials every discovered peer on cluster.Port; contact points that
	// all name one port (the local stack's 19042) mean that port.
	if port, ok := commonPort(c.Hosts); ok {
		cluster.Port = port
	}
	cluster.Consistency, _ = gocql.ParseConsistencyWrapper(c.Consistency) // validated
	_ = cluster.SerialConsistency.UnmarshalText([]byte(c.SerialConsistency))
	cluster.ConnectTimeout = c.ConnectTimeout
	cluster.Timeout = timeout
	cluster.WriteTimeout = timeout
	cluster.NumConns = c.NumConns
	cluster.PageSize = c.PageSize
	// Every statement with bind markers is prepared once per host and its id
	// cached; the cache must hold all of the store's statements (about 25)
	// for every keyspace a process uses.
	cluster.MaxPreparedStmts = 1000
	// Token-aware routing sends each statement straight to a replica of its
	// partition (the due-entry batches, one partition each, in particular);
	// the fallback spreads the rest, preferring the local data centre.
	fallback := gocql.RoundRobinHostPolicy()
	if c.LocalDC != "" {
		fallback = gocql.DCAwareRoundRobinPolicy(c.LocalDC)
	}
	cluster.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(fallback)
	// The driver retries only statements marked idempotent (plain writes of
	// due entries and history, reads); lightweight transactions are not, and
	// the store resolves their timeouts itself by reading back.
	cluster.RetryPolicy = &gocql.ExponentialBackoffRetryPolicy{NumRetries: 3, Min: 50 * time.Millisecond, Max: time.Second}
	// Fail fast at start when nothing answers, instead of the driver's
	// default of retrying the initial hosts.
	cluster.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 1, Interval: 100 * time.Millisecond}
	if c.NodesShareAddress {
		cluster.Events.DisableNodeStatusEvents = true
		cluster.ConvictionPolicy = neverConvict{}
		cluster.PoolConfig.HostSelectionPolicy = &everyHostPolicy{}
	}
	cluster.MaxWaitSchemaAgreement = c.SchemaTimeout
	cluster.QueryObserver = c.QueryObserver
	cluster.BatchObserver = c.BatchObserver
	if c.Username != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: c.Username, Password: c.Password}
	}
	if c.TLS != nil {
		cluster.SslOpts = &gocql.SslOptions{Config: c.TLS.Clone(), EnableHostVerification: true}
	}
	return cluster
}

// commonPort returns the port all hosts name, if they all name the same one.
func commonPort(hosts []string) (int, bool) {
	port := 0
	for _, h := range hosts {
		_, p, err := net.SplitHostPort(h)
		if err != nil {
			return 0, false
		}
		n, err := strconv.Atoi(p)
		if err != nil || (port != 0 && n != port) {
			return 0, false
		}
		port = n
	}
	return port, port != 0
}

// connect opens a session. It returns within the context's deadline or the
// connect timeout's bound, whichever is sooner: an unreachable cluster is an
// error naming the hosts, never a hang.
func connect(ctx context.Context, c Config, timeout time.Duration) (*gocql.Session, error) {
	cluster := clusterConfig(c, timeout)
	if deadline, ok := ctx.Deadline(); ok {
		// Each host is dialled within ConnectTimeout; keep that inside the
		// caller's budget.
		if left := time.Until(deadline); left < cluster.ConnectTimeout {
			cluster.ConnectTimeout = max(left, time.Millisecond)
		}
	}
	start := time.Now()
	type result struct {
		sess *gocql.Session
		err  error
	}
	done := make(chan result, 1)
	go func() {
		sess, err := cluster.CreateSession()
		done <- result{sess, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("connect to cassandra at %v: %w after %v: %w", c.Hosts, ErrUnreachable, time.Since(start).Round(time.Millisecond), r.err)
		}
		return r.sess, nil
	case <-ctx.Done():
		// The driver offers no way to cancel CreateSession; the goroutine
		// finishes within the connect timeout and closes what it opened.
		go func() {
			if r := <-done; r.sess != nil {
				r.sess.Close()
			}
		}()
		return nil, fmt.Errorf("connect to cassandra at %v: %w: %w", c.Hosts, ErrUnreachable, context.Cause(ctx))
	}
}

// neverConvict keeps every host up in the driver's eyes (see
// Config.NodesShareAddress): a host whose connections all failed is
// skipped while its pool is empty and refilled on its next pick.
type neverConvict struct{}

func (neverConvict) AddFailure(error, *gocql.HostInfo) bool { return false }
func (neverConvict) Reset(*gocql.HostInfo)                  {}

// everyHostPolicy offers every host the driver ever added, in turn, and
// forgets none (see Config.NodesShareAddress). The driver's own policies
// remove hosts by address, so removing one node that shares its address
// with others would remove them all and leave "no hosts available in the
// pool" until each was added again. A host with no connection (a dead
// node) is skipped by the driver for the next. No token-aware routing: a
// coordinator forwards to the replicas.
type everyHostPolicy struct {
	mu    sync.RWMutex
	hosts []*gocql.HostInfo
	next  atomic.Uint64
}

var _ gocql.HostSelectionPolicy = (*everyHostPolicy)(nil)

func (p *everyHostPolicy) AddHost(h *gocql.HostInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, have := range p.hosts {
		if have.HostID() == h.HostID() {
			p.hosts[i] = h // the driver's latest view of the node
			return
		}
	}
	p.hosts = append(p.hosts, h)
}

func (p *everyHostPolicy) RemoveHost(*gocql.HostInfo)                {}
func (p *everyHostPolicy) HostUp(h *gocql.HostInfo)                  { p.AddHost(h) }
func (p *everyHostPolicy) HostDown(*gocql.HostInfo)                  {}
func (p *everyHostPolicy) SetPartitioner(string)                     {}
func (p *everyHostPolicy) KeyspaceChanged(gocql.KeyspaceUpdateEvent) {}
func (p *everyHostPolicy) Init(*gocql.Session)                       {}
func (p *everyHostPolicy) IsLocal(*gocql.HostInfo) bool              { return true }

func (p *everyHostPolicy) Pick(gocql.ExecutableQuery) gocql.NextHost {
	p.mu.RLock()
	hosts := slices.Clone(p.hosts)
	p.mu.RUnlock()
	start, i := int(p.next.Add(1)%uint64(max(len(hosts), 1))), 0
	return func() gocql.SelectedHost {
		if i >= len(hosts) {
			return nil
		}
		h := hosts[(start+i)%len(hosts)]
		i++
		return selected{h}
	}
}

// selected is a host picked by everyHostPolicy.
type selected struct{ h *gocql.HostInfo }

func (s selected) Info() *gocql.HostInfo { return s.h }
func (s selected) Mark(error)            {}
