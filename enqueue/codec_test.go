package enqueue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/enqueue"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

func entry(job string, due time.Time, kind store.Kind) store.DueEntry {
	due = store.Truncate(due)
	return store.DueEntry{Due: due, JobID: job, Kind: kind, RunID: store.RunID(job, due), Attempt: 1, Revision: 7}
}

func TestCodecRoundTrip(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 3, 29, 1, 30, 0, 123_456_789, time.UTC)
	retry := entry("billing", due, store.KindRetry)
	retry.Due = store.Truncate(due.Add(3 * time.Second))
	retry.Attempt = 3
	retry.Payload = []byte("serialized run")
	for name, e := range map[string]store.DueEntry{
		"scheduled": entry("nightly-report", due, store.KindScheduled),
		"retry":     retry,
		"trigger":   entry("a/b:c", due, store.KindTrigger),
		"dag":       entry("dag/node", due, store.KindDAG),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, err := enqueue.Encode(e)
			require.NoError(t, err)
			got, err := enqueue.Decode(b)
			require.NoError(t, err)
			assert.True(t, got.Due.Equal(e.Due), "due %s, want %s", got.Due, e.Due)
			got.Due = e.Due
			assert.Equal(t, e, got)
		})
	}
}

func TestEncodeRefusesInvalidEntry(t *testing.T) {
	t.Parallel()
	_, err := enqueue.Encode(store.DueEntry{JobID: "j"})
	require.ErrorIs(t, err, store.ErrInvalid)
	assert.ErrorContains(t, err, "due")
	assert.ErrorContains(t, err, "run id")
	assert.ErrorContains(t, err, "attempt")
}

func TestDecodeNamesBadFields(t *testing.T) {
	t.Parallel()
	valid := &sundialv1.DueEntry{DueTime: timestamppb.New(time.UnixMilli(1)), JobId: "j", RunId: "j@1", Attempt: 1, Kind: sundialv1.DueKind_DUE_KIND_SCHEDULED}
	tests := []struct {
		name string
		edit func(*sundialv1.DueEntry)
		want string
	}{
		{"no due time", func(m *sundialv1.DueEntry) { m.DueTime = nil }, "due_time: must be set"},
		{"no kind", func(m *sundialv1.DueEntry) { m.Kind = sundialv1.DueKind_DUE_KIND_UNSPECIFIED }, "kind"},
		{"no job", func(m *sundialv1.DueEntry) { m.JobId = "" }, "job id"},
		{"attempt 0", func(m *sundialv1.DueEntry) { m.Attempt = 0 }, "attempt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := proto.Clone(valid).(*sundialv1.DueEntry)
			tt.edit(m)
			b, err := proto.Marshal(m)
			require.NoError(t, err)
			_, err = enqueue.Decode(b)
			require.ErrorIs(t, err, enqueue.ErrMalformed)
			assert.ErrorContains(t, err, tt.want)
		})
	}
	_, err := enqueue.Decode([]byte{0xff, 0xff})
	require.ErrorIs(t, err, enqueue.ErrMalformed)
}

func FuzzDecode(f *testing.F) {
	b, err := enqueue.Encode(entry("job", time.UnixMilli(1767148200000), store.KindRetry))
	require.NoError(f, err)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := enqueue.Decode(b)
		if err != nil {
			return
		}
		// Whatever decodes is a valid entry that encodes and decodes to itself.
		require.NoError(t, e.Validate())
		again, err := enqueue.Encode(e)
		require.NoError(t, err)
		e2, err := enqueue.Decode(again)
		require.NoError(t, err)
		require.True(t, e.Due.Equal(e2.Due))
		e2.Due = e.Due
		if len(e.Payload) == 0 {
			e.Payload, e2.Payload = nil, nil
		}
		require.Equal(t, e, e2)
	})
}
