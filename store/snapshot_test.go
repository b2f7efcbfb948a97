package store

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJobSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	s := JobSnapshot{Spec: []byte("spec"), UpdatedAt: time.UnixMilli(1_700_000_000_123).UTC(), CheckedAt: time.UnixMilli(1_700_000_100_456).UTC()}
	got, err := DecodeSnapshot(s.Encode())
	require.NoError(t, err)
	assert.Equal(t, s, got)

	for _, bad := range [][]byte{nil, {}, {2, 0, 0, 'x'}, {snapshotVersion}, {snapshotVersion, 0x80}, {snapshotVersion, 0, 0}} {
		_, err := DecodeSnapshot(bad)
		assert.ErrorIs(t, err, ErrBadSnapshot, "%x", bad)
	}
}

func TestScheduledEntryCarriesTheSnapshot(t *testing.T) {
	t.Parallel()
	j := Job{ID: "a", Spec: []byte("spec"), Revision: 7, UpdatedAt: time.UnixMilli(1000).UTC(), NextDue: time.UnixMilli(5000)}
	s, err := DecodeSnapshot(j.ScheduledEntry().Payload)
	require.NoError(t, err)
	assert.Equal(t, j.Snapshot(j.UpdatedAt), s)
}

func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(JobSnapshot{Spec: []byte("spec"), UpdatedAt: time.UnixMilli(1), CheckedAt: time.UnixMilli(2)}.Encode())
	f.Add([]byte{snapshotVersion, 0x80})
	f.Fuzz(func(t *testing.T, payload []byte) {
		s, err := DecodeSnapshot(payload)
		if err != nil {
			return
		}
		again, err := DecodeSnapshot(s.Encode())
		if err != nil {
			t.Fatalf("a decoded snapshot does not decode again: %v", err)
		}
		if !bytes.Equal(again.Spec, s.Spec) || !again.UpdatedAt.Equal(s.UpdatedAt) || !again.CheckedAt.Equal(s.CheckedAt) {
			t.Fatalf("round trip changed the snapshot: %+v, %+v", s, again)
		}
	})
}
