//go:build secure

package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/connect"
	"github.com/sundialhq/sundial/leasing"
)

// TestSecureStackRedisCluster reaches the secured Redis Cluster
// (deploy/local/secure-cluster.sh) with the options the runner's flags build
// (--redis-addr with several seeds, --redis-cluster, --redis-tls-ca-file,
// --redis-username, --redis-password-file): leases are acquired and
// completed over TLS as the ACL user, every key of a job sits on the master
// that owns the job's hash slot, and the jobs spread over several masters.
func TestSecureStackRedisCluster(t *testing.T) {
	t.Parallel()
	addrs := os.Getenv("SUNDIAL_SECURE_REDIS_CLUSTER_ADDRS")
	tlsDir := os.Getenv("SUNDIAL_SECURE_CLUSTER_TLS_DIR")
	secrets := os.Getenv("SUNDIAL_SECURE_CLUSTER_SECRETS_DIR")
	if addrs == "" || tlsDir == "" || secrets == "" {
		t.Fatal("the secured Redis Cluster is not described: run deploy/local/secure-cluster.sh up, then source <(deploy/local/secure-cluster.sh env) (or make test-secure)")
	}
	pass, err := connect.ReadSecret("--redis-password", "", filepath.Join(secrets, "redis-sundial.password"))
	require.NoError(t, err)
	r := connect.Redis{
		Addrs: []string{addrs}, Cluster: true, Username: "sundial", Password: pass,
		TLS: connect.TLS{Enabled: true, CAFile: filepath.Join(tlsDir, "ca.pem")},
	}
	c, err := r.Client()
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	cc, ok := c.(*redis.ClusterClient)
	require.True(t, ok, "several seeds and --redis-cluster give a cluster client, got %T", c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, connect.PingRedis(ctx, c))

	prefix := "sundial-test-" + randomName(t) + ":"
	t.Cleanup(func() { deletePrefix(t, c, prefix) })
	s, err := leasing.New(leasing.Config{Client: c, KeyPrefix: prefix, TTL: 10 * time.Second})
	require.NoError(t, err)

	masters := map[string]bool{}
	for i := range 12 {
		job := fmt.Sprintf("job-%d.x", i)
		run := job + "@1700000000000"
		l, err := s.Acquire(ctx, leasing.Request{JobID: job, RunID: run})
		require.NoError(t, err, "acquire %s", job)
		l, err = s.Renew(ctx, l)
		require.NoError(t, err, "renew %s", job)
		require.NoError(t, s.Complete(ctx, l), "complete %s", job)
		_, err = s.Acquire(ctx, leasing.Request{JobID: job, RunID: run})
		require.ErrorIs(t, err, leasing.ErrAlreadyDone, "a redelivered run of %s is refused", job)

		// The master owning the hash tag's slot, asked alone, holds every
		// key the job left (fence and dedupe mark at least).
		node, err := cc.MasterForKey(ctx, "{"+job+"}")
		require.NoError(t, err)
		masters[node.Options().Addr] = true
		keys, err := node.Keys(ctx, prefix+"{"+job+"}*").Result()
		require.NoError(t, err)
		assert.GreaterOrEqual(t, len(keys), 2, "keys of %s on master %s: %v", job, node.Options().Addr, keys)
	}
	t.Logf("12 jobs on %d masters over TLS as the ACL user: %v", len(masters), masters)
	assert.Greater(t, len(masters), 1, "the jobs spread over several masters")

	// The same cluster refuses a wrong password, naming Redis and the cause.
	bad := r
	bad.Password = "not-the-password"
	bc, err := bad.Client()
	require.NoError(t, err)
	defer func() { _ = bc.Close() }()
	err = connect.PingRedis(ctx, bc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redis:")
	assert.Contains(t, err.Error(), "WRONGPASS")
}

// TestSecureStackRedisSentinel reaches the local Sentinel group (cluster.sh
// up sentinel) with the options --redis-sentinel-master and
// --redis-sentinel-addrs build, forces a failover (SENTINEL FAILOVER) and
// shows that lease calls succeed on the new master afterwards, with fencing
// tokens that keep growing: the replica had every write before it was
// promoted, so the fence survived the move.
func TestSecureStackRedisSentinel(t *testing.T) {
	t.Parallel()
	master := os.Getenv("SUNDIAL_SENTINEL_MASTER")
	sentinels := os.Getenv("SUNDIAL_SENTINEL_ADDRS")
	if master == "" || sentinels == "" {
		t.Fatal("the Sentinel group is not described: run deploy/local/cluster.sh up sentinel, then source <(deploy/local/cluster.sh env) (or make test-secure)")
	}
	r := connect.Redis{SentinelMaster: master, SentinelAddrs: []string{sentinels}}
	c, err := r.Client()
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, connect.PingRedis(ctx, c))

	prefix := "sundial-test-" + randomName(t) + ":"
	t.Cleanup(func() { deletePrefix(t, c, prefix) })
	s, err := leasing.New(leasing.Config{Client: c, KeyPrefix: prefix, TTL: 10 * time.Second})
	require.NoError(t, err)

	const job = "job-sentinel.x"
	before, err := s.Acquire(ctx, leasing.Request{JobID: job, RunID: job + "@1"})
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, before))
	// The replica has every write so far before it is promoted: Redis
	// replicates asynchronously, and a failover drops what the replica has
	// not received. (WAIT would not tell: it counts the writes of its own
	// connection, and the store's calls went over other connections of the
	// pool.) A replica that was the master before an earlier failover may
	// still be resyncing; it is waited for.
	waitReplicated(ctx, t, c)

	first := strings.Split(sentinels, ",")[0]
	sc := redis.NewSentinelClient(&redis.Options{Addr: first})
	defer func() { _ = sc.Close() }()
	old, err := sc.GetMasterAddrByName(ctx, master).Result()
	require.NoError(t, err)
	require.NoError(t, sc.Failover(ctx, master).Err())
	// Sentinel names the new master once the replica is promoted.
	var now []string
	for {
		now, err = sc.GetMasterAddrByName(ctx, master).Result()
		require.NoError(t, err)
		if now[0]+":"+now[1] != old[0]+":"+old[1] {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Sentinel still names %v as the master after SENTINEL FAILOVER", old)
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Logf("failover: master %v -> %v", old, now)
	// Sentinel names the new master before it turns the old one into a
	// replica; until then the old master still takes writes, and the client
	// may still send them there, where the demotion drops them. The lease
	// calls below wait for the demotion: across a Sentinel failover, only
	// writes after it are safe.
	oc := redis.NewClient(&redis.Options{Addr: old[0] + ":" + old[1]})
	defer func() { _ = oc.Close() }()
	for {
		info, err := oc.Info(ctx, "replication").Result()
		require.NoError(t, err)
		if strings.Contains(info, "role:slave") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the old master %v was never turned into a replica: %s", old, info)
		case <-time.After(100 * time.Millisecond):
		}
	}

	// The client learns of the switch by itself; a call over a connection
	// to the demoted master may fail (a closed connection, READONLY), so
	// the first acquire after the failover is retried until it lands.
	var after leasing.Lease
	var seen []error
	for {
		after, err = s.Acquire(ctx, leasing.Request{JobID: job, RunID: job + "@2"})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no acquire succeeded after the failover; errors seen: %v", errors.Join(seen...))
		}
		seen = append(seen, err)
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d calls failed during the switch: %v", len(seen), errors.Join(seen...))
	assert.Greater(t, after.Token, before.Token, "the fencing token keeps growing across the failover")
	after, err = s.Renew(ctx, after)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, after))
	_, err = s.Acquire(ctx, leasing.Request{JobID: job, RunID: job + "@1"})
	require.ErrorIs(t, err, leasing.ErrAlreadyDone, "the dedupe mark written before the failover survived it")
}

// waitReplicated waits until the master's replica reports the master's
// replication offset as read after the writes so far.
func waitReplicated(ctx context.Context, t *testing.T, c redis.UniversalClient) {
	t.Helper()
	field := func(info, name string) string {
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
				return v
			}
		}
		return ""
	}
	info, err := c.Info(ctx, "replication").Result()
	require.NoError(t, err)
	want, err := strconv.ParseInt(field(info, "master_repl_offset"), 10, 64)
	require.NoError(t, err, "master_repl_offset in %q", info)
	for {
		// slave0:ip=127.0.0.1,port=25202,state=online,offset=1234,lag=0
		var got int64 = -1
		for kv := range strings.SplitSeq(field(info, "slave0"), ",") {
			if v, ok := strings.CutPrefix(kv, "offset="); ok {
				got, err = strconv.ParseInt(v, 10, 64)
				require.NoError(t, err)
			}
		}
		if got >= want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the replica did not reach offset %d: %s", want, info)
		case <-time.After(100 * time.Millisecond):
		}
		info, err = c.Info(ctx, "replication").Result()
		require.NoError(t, err)
	}
}

// deletePrefix removes the keys a test wrote, on every master of a cluster.
func deletePrefix(t *testing.T, c redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	del := func(ctx context.Context, n redis.Cmdable) error {
		keys, err := n.Keys(ctx, prefix+"*").Result()
		if err != nil || len(keys) == 0 {
			return err
		}
		for _, k := range keys {
			if err := n.Del(ctx, k).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return del(ctx, n) })
	} else {
		err = del(ctx, c)
	}
	if err != nil {
		t.Logf("cleaning up keys %s*: %v", prefix, err)
	}
}
