package discovery

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestDirectoryExpiresByItsClock drives the Directory's shell (records in,
// expiry ticks, gauge, change signal) with a fake clock and no Kafka: a
// member is live for 3 × its interval after its last heartbeat, then the
// pool's gauge reads 0 and a change is signalled.
func TestDirectoryExpiresByItsClock(t *testing.T) {
	t.Parallel()
	now := t0
	d, err := NewDirectory(DirectoryConfig{Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Now: func() time.Time { return now }})
	require.NoError(t, err)
	ann := &sundialv1.ExecutorAnnouncement{ExecutorId: "e1", Pool: "p", Capacity: 2, HeartbeatTime: timestamppb.New(t0), HeartbeatIntervalMs: 1000}
	val, err := proto.Marshal(ann)
	require.NoError(t, err)
	apply := func(rec *kgo.Record) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.applyLocked(rec, now) {
			d.changedLocked()
		}
	}
	apply(&kgo.Record{Key: []byte("e1"), Value: val, Headers: topics.ProtobufHeaders(ann)})
	<-d.Changes()
	assert.Len(t, d.Live("p"), 1)
	assert.Equal(t, 1.0, testutil.ToFloat64(d.live.WithLabelValues("p")))

	now = t0.Add(3 * time.Second)
	d.expire(now)
	assert.Len(t, d.Live("p"), 1, "live up to its bound")
	select {
	case <-d.Changes():
		t.Fatal("no change before the bound")
	default:
	}
	now = now.Add(time.Millisecond)
	d.expire(now)
	assert.Empty(t, d.Live("p"))
	<-d.Changes()
	assert.Equal(t, 0.0, testutil.ToFloat64(d.live.WithLabelValues("p")))

	// A record whose key is not its executor id is refused.
	apply(&kgo.Record{Key: []byte("other"), Value: val, Headers: topics.ProtobufHeaders(ann)})
	_, ok := d.Member("other")
	assert.False(t, ok)
	// Garbage is skipped.
	apply(&kgo.Record{Key: []byte("e2"), Value: []byte{0xff, 0xff}})
	_, ok = d.Member("e2")
	assert.False(t, ok)
}
