package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/audit"
)

// memStore keeps records by ID, with their TTL.
type memStore struct {
	mu   sync.Mutex
	recs map[string]audit.Record
	ttls map[string]time.Duration
	fail error
}

func (m *memStore) PutAudits(_ context.Context, recs []audit.Record, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	for _, rec := range recs {
		m.recs[rec.ID], m.ttls[rec.ID] = rec, ttl
	}
	return nil
}

func (m *memStore) ListAudit(context.Context, audit.Query) ([]audit.Record, error) {
	return nil, errors.New("not used")
}

func record(id string) audit.Record {
	return audit.Record{ID: id, At: time.UnixMilli(1_700_000_000_000).UTC(), Actor: "token:t1", Action: "job.paused",
		Subject: "j", Team: "a", Detail: "paused by the on-call"}
}

// TestTrailRecord: a record is kept with the retention as its TTL, then
// published, JSON and keyed by subject; an invalid one is neither, and a
// store failure publishes nothing.
func TestTrailRecord(t *testing.T) {
	t.Parallel()
	const topic = "sundial.audit"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	require.NoError(t, err)
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics(topic))
	require.NoError(t, err)
	defer cl.Close()

	st := &memStore{recs: map[string]audit.Record{}, ttls: map[string]time.Duration{}}
	trail, err := audit.New(audit.Config{Store: st, Producer: cl, Topic: topic, Retention: 48 * time.Hour})
	require.NoError(t, err)
	ctx := t.Context()

	require.NoError(t, trail.Record(ctx, record("r1")))
	assert.Equal(t, record("r1"), st.recs["r1"])
	assert.Equal(t, 48*time.Hour, st.ttls["r1"])

	bad := record("r2")
	bad.Actor = ""
	assert.ErrorIs(t, trail.Record(ctx, bad), audit.ErrInvalid)
	st.fail = errors.New("cassandra: timeout")
	assert.ErrorContains(t, trail.Record(ctx, record("r3")), "keep audit record r3: cassandra: timeout")
	st.fail = nil
	require.NoError(t, trail.Record(ctx, record("r4")))

	var got []audit.Record
	for len(got) < 2 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err())
		fs.EachRecord(func(r *kgo.Record) {
			var rec audit.Record
			require.NoError(t, json.Unmarshal(r.Value, &rec))
			assert.Equal(t, "j", string(r.Key))
			assert.Equal(t, []kgo.RecordHeader{{Key: "content-type", Value: []byte(audit.ContentType)}}, r.Headers)
			got = append(got, rec)
		})
	}
	assert.Equal(t, []audit.Record{record("r1"), record("r4")}, got, "only kept records are published")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := audit.New(audit.Config{Retention: time.Millisecond, Producer: &kgo.Client{}})
	for _, want := range []string{"store: required", "topic: required", "retention 1ms"} {
		assert.ErrorContains(t, err, want)
	}
	tr, err := audit.New(audit.Config{Store: &memStore{}})
	require.NoError(t, err)
	assert.Equal(t, audit.DefaultRetention, tr.Retention())
	_, err = tr.List(t.Context(), audit.Query{Subject: "j", Team: "a"})
	assert.ErrorIs(t, err, audit.ErrInvalid)
}
