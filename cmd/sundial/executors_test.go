package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
)

// TestExecutorsList: two live executors of two pools and one that left;
// --pool filters, and the one that left is listed, marked.
func TestExecutorsList(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	names := topics.Names{Prefix: k.TopicPrefix}
	kopts := []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}
	specs, err := names.Specs(1)
	require.NoError(t, err)
	specs = slices.DeleteFunc(specs, func(s topics.Spec) bool { return s.Name != names.Executors() })
	cl, err := kgo.NewClient(kopts...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = topics.Ensure(ctx, kadm.NewClient(cl), specs, 1)
	require.NoError(t, err)

	announce := func(id, pool string) *discovery.Announcer {
		a, err := discovery.NewAnnouncer(discovery.AnnouncerConfig{Kafka: kopts, Topics: names, ID: id, Pool: pool, Capacity: 8,
			Blocking: "fifo", Labels: map[string]string{"zone": "a"}, Interval: time.Hour})
		require.NoError(t, err)
		require.NoError(t, a.Start(ctx))
		t.Cleanup(a.Stop)
		return a
	}
	announce("exec-1", "default")
	announce("exec-2", "gpu")
	leaving := announce("exec-3", "default")

	args := []string{"executors", "list", "--kafka-brokers", strings.Join(k.Brokers, ","), "--topic-prefix", k.TopicPrefix}
	// The announcements are produced asynchronously: list until the
	// output shows what is awaited.
	listUntil := func(what string, cond func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			code, out, errOut := runCLI(t, args...)
			require.Equal(t, 0, code, errOut)
			if cond(out) {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not listed; last output:\n%s", what, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	listUntil("three live", func(o string) bool { return strings.Count(o, " live ") == 3 })
	leaving.Stop()
	out := listUntil("exec-3 left", func(o string) bool { return strings.Contains(o, " left ") })
	t.Logf("sundial executors list:\n%s", out)
	assert.Regexp(t, `default\s+exec-1\s+live\s+8\s+0\s+fifo`, out)
	assert.Regexp(t, `gpu\s+exec-2\s+live`, out)
	assert.Regexp(t, `default\s+exec-3\s+left`, out)
	assert.Contains(t, out, "zone=a")

	code, out, errOut := runCLI(t, append(args, "--pool", "gpu")...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "exec-2")
	assert.NotContains(t, out, "exec-1")
}
