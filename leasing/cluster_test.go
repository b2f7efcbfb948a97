//go:build cluster

package leasing

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/testenv"
)

// TestLeaseKeysShareSlotOnCluster asks the local Redis Cluster itself
// (CLUSTER KEYSLOT) where each key of a job lives: every key the scripts
// touch for one job hashes to the slot of the job's hash tag, and the
// master owning that slot holds all of them after an acquire and a
// complete. The jobs land on more than one master, so the cluster really
// routes them apart.
func TestLeaseKeysShareSlotOnCluster(t *testing.T) {
	t.Parallel()
	b := redisCluster(t)
	s, c := setup(t, b, func(c *Config) { c.TTL, c.Margin = 5*time.Second, time.Second })
	cc, ok := c.(*redis.ClusterClient)
	require.True(t, ok, "the cluster backend gives a cluster client, got %T", c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	masters := map[string]bool{}
	untaggedApart := 0
	for i := range 12 {
		job := fmt.Sprintf("job-%d.x:y", i)
		run := job + "@1700000000000"
		keys := []string{s.slotsKey(job), s.holdersKey(job), s.fenceKey(job), s.doneKey(job, run)}
		want, err := cc.ClusterKeySlot(ctx, "{"+job+"}").Result()
		require.NoError(t, err)
		for _, k := range keys {
			got, err := cc.ClusterKeySlot(ctx, k).Result()
			require.NoError(t, err)
			assert.Equal(t, want, got, "key %s of job %s", k, job)
		}
		// The same names without the braces would scatter: the check above
		// can tell.
		untagged, err := cc.ClusterKeySlot(ctx, b.prefix+job+":fence").Result()
		require.NoError(t, err)
		if untagged != want {
			untaggedApart++
		}

		l, err := s.Acquire(ctx, Request{JobID: job, RunID: run, Limit: 1})
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, l))
		node, err := cc.MasterForKey(ctx, keys[0])
		require.NoError(t, err)
		masters[node.Options().Addr] = true
		// A plain client of that one master: it answers for its own keys
		// only, so finding them there proves where they are.
		n, err := node.Exists(ctx, keys[2], keys[3]).Result()
		require.NoError(t, err)
		assert.EqualValues(t, 2, n, "fence and dedupe mark of job %s on master %s", job, node.Options().Addr)
	}
	t.Logf("12 jobs on %d masters: %v", len(masters), masters)
	assert.Greater(t, len(masters), 1, "the jobs spread over several masters")
	assert.Positive(t, untaggedApart, "without the hash tag some keys would leave their job's slot")
}

// TestConformanceRedisCluster runs the suite on the local Redis Cluster:
// every script's keys must hash to one slot, or the cluster refuses the
// call with CROSSSLOT.
func TestConformanceRedisCluster(t *testing.T) { runConformance(t, redisCluster) }

// redisCluster is the local Redis Cluster (deploy/local/cluster.sh).
func redisCluster(t testing.TB) backend {
	env := testenv.NeedRedisCluster(t)
	return backend{cluster: env.Addrs, prefix: env.KeyPrefix}
}
