package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// JobSnapshot is what a scheduled entry carries of its job's definition, so
// that firing it needs no read of the job: the spec and the time its
// schedule is anchored on, as of revision DueEntry.Revision.
//
// CheckedAt is a time at which that revision was known to be the job's
// current one: the registry's entry carries the definition's UpdatedAt
// (nothing newer can have been stored before the definition was produced),
// a dispatcher's successor the time up to which it had applied every change
// of the job when it fired the predecessor. A reader may use the snapshot
// without reading the job only when it knows of every change of the job
// stored since CheckedAt (see package dispatcher).
type JobSnapshot struct {
	Spec      []byte
	UpdatedAt time.Time
	CheckedAt time.Time
}

// snapshotVersion is the first byte of an encoded JobSnapshot.
const snapshotVersion = 1

// ErrBadSnapshot is returned for a payload that is not an encoded JobSnapshot.
var ErrBadSnapshot = errors.New("not a job snapshot")

// Snapshot returns the job's snapshot, checked at CheckedAt.
func (j Job) Snapshot(checkedAt time.Time) JobSnapshot {
	return JobSnapshot{Spec: j.Spec, UpdatedAt: j.UpdatedAt, CheckedAt: checkedAt}
}

// Encode returns the snapshot as an entry payload: a version byte, UpdatedAt
// and CheckedAt as varint unix milliseconds, then the spec.
func (s JobSnapshot) Encode() []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(s.Spec))
	b = append(b, snapshotVersion)
	b = binary.AppendVarint(b, s.UpdatedAt.UnixMilli())
	b = binary.AppendVarint(b, s.CheckedAt.UnixMilli())
	return append(b, s.Spec...)
}

// DecodeSnapshot decodes a payload written by JobSnapshot.Encode. The spec
// aliases payload.
func DecodeSnapshot(payload []byte) (JobSnapshot, error) {
	if len(payload) == 0 || payload[0] != snapshotVersion {
		return JobSnapshot{}, fmt.Errorf("%w: version byte: want %d", ErrBadSnapshot, snapshotVersion)
	}
	rest := payload[1:]
	updated, n := binary.Varint(rest)
	if n <= 0 {
		return JobSnapshot{}, fmt.Errorf("%w: updated at: bad varint", ErrBadSnapshot)
	}
	rest = rest[n:]
	checked, n := binary.Varint(rest)
	if n <= 0 {
		return JobSnapshot{}, fmt.Errorf("%w: checked at: bad varint", ErrBadSnapshot)
	}
	rest = rest[n:]
	if len(rest) == 0 {
		return JobSnapshot{}, fmt.Errorf("%w: spec: empty", ErrBadSnapshot)
	}
	return JobSnapshot{Spec: rest, UpdatedAt: time.UnixMilli(updated).UTC(), CheckedAt: time.UnixMilli(checked).UTC()}, nil
}
