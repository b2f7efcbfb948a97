package connect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Redis is how to reach Redis: one node, a Redis Cluster, or a master
// found through Sentinel.
type Redis struct {
	// Addrs are the node's address, or a cluster's seed nodes (several mean
	// a cluster). Not used with Sentinel.
	Addrs []string
	// Cluster makes a single address a Redis Cluster seed.
	Cluster bool
	// SentinelMaster is the name of the master Sentinel watches; with it,
	// SentinelAddrs are the Sentinels and the client follows failovers.
	SentinelMaster string
	SentinelAddrs  []string
	// Username and Password authenticate with an ACL user (AUTH); a
	// password alone is the default user's.
	Username string
	Password Secret
	// TLS of every connection, to the nodes and the Sentinels.
	TLS TLS
	// PoolSize bounds the connections to each node; 0 is the driver's
	// default.
	PoolSize int
}

// Options returns the driver's options, reporting every bad setting.
func (r Redis) Options() (*redis.UniversalOptions, error) {
	var errs []error
	addrs, err := list("--redis-addr", r.Addrs)
	if err != nil {
		errs = append(errs, err)
	}
	sentinels, err := list("--redis-sentinel-addrs", r.SentinelAddrs)
	if err != nil {
		errs = append(errs, err)
	}
	switch {
	case r.SentinelMaster != "":
		if len(sentinels) == 0 {
			errs = append(errs, errors.New("--redis-sentinel-addrs: required with --redis-sentinel-master"))
		}
		if len(addrs) > 0 {
			errs = append(errs, errors.New("--redis-addr: not used with a sentinel master (the Sentinels name the master); set one of them"))
		}
		if r.Cluster {
			errs = append(errs, errors.New("--redis-cluster: Sentinel watches a master with replicas, not a cluster; set one of them"))
		}
		addrs = sentinels
	case len(sentinels) > 0:
		errs = append(errs, errors.New("--redis-sentinel-master: required with --redis-sentinel-addrs"))
	case len(addrs) == 0:
		errs = append(errs, errors.New("--redis-addr: required (or a sentinel master and its sentinels)"))
	}
	if r.Password == "" && r.Username != "" {
		errs = append(errs, errors.New("--redis-password: required with --redis-username (or its file)"))
	}
	if r.PoolSize < 0 {
		errs = append(errs, fmt.Errorf("--redis-pool-size %d: negative", r.PoolSize))
	}
	tlsCfg, err := r.TLS.Config("redis")
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &redis.UniversalOptions{
		Addrs: addrs, IsClusterMode: r.Cluster, MasterName: r.SentinelMaster,
		Username: r.Username, Password: r.Password.Reveal(),
		// The Sentinels of a secured deployment usually share the nodes' ACL.
		SentinelUsername: r.Username, SentinelPassword: r.Password.Reveal(),
		TLSConfig: tlsCfg, PoolSize: r.PoolSize,
	}, nil
}

// Client returns a client over Options: a *redis.Client, a
// *redis.ClusterClient or a Sentinel-backed *redis.Client.
func (r Redis) Client() (redis.UniversalClient, error) {
	o, err := r.Options()
	if err != nil {
		return nil, err
	}
	return redis.NewUniversalClient(o), nil
}

// PingRedis asks every reachable node (each master of a cluster) for PONG
// within ctx's deadline; the error starts with "redis:" and carries the
// server's answer (WRONGPASS, NOPERM) or the TLS cause.
func PingRedis(ctx context.Context, c redis.UniversalClient) error {
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			return n.Ping(ctx).Err()
		})
	} else {
		err = c.Ping(ctx).Err()
	}
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

func list(field string, in []string) ([]string, error) {
	var out []string
	for _, a := range in {
		for part := range strings.SplitSeq(a, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				return nil, fmt.Errorf("%s %q: an empty address in the list", field, strings.Join(in, ","))
			}
			out = append(out, part)
		}
	}
	return out, nil
}
