package enqueue

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// ErrMalformed reports a wake-up record whose value is not a valid DueEntry.
var ErrMalformed = errors.New("malformed wake-up record")

var kindToProto = map[store.Kind]sundialv1.DueKind{
	store.KindScheduled: sundialv1.DueKind_DUE_KIND_SCHEDULED,
	store.KindRetry:     sundialv1.DueKind_DUE_KIND_RETRY,
	store.KindTrigger:   sundialv1.DueKind_DUE_KIND_TRIGGER,
	store.KindDAG:       sundialv1.DueKind_DUE_KIND_DAG,
}

var kindFromProto = map[sundialv1.DueKind]store.Kind{
	sundialv1.DueKind_DUE_KIND_SCHEDULED: store.KindScheduled,
	sundialv1.DueKind_DUE_KIND_RETRY:     store.KindRetry,
	sundialv1.DueKind_DUE_KIND_TRIGGER:   store.KindTrigger,
	sundialv1.DueKind_DUE_KIND_DAG:       store.KindDAG,
}

// Encode returns the wire form of an entry: a serialized sundialv1.DueEntry,
// the value of a wake-up record. The entry must be valid.
func Encode(e store.DueEntry) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("encode due entry: %w", err)
	}
	if e.Attempt > math.MaxUint32 {
		return nil, fmt.Errorf("encode due entry: %w: attempt %d: too large", store.ErrInvalid, e.Attempt)
	}
	return proto.Marshal(&sundialv1.DueEntry{
		DueTime:  timestamppb.New(store.Truncate(e.Due)),
		JobId:    e.JobID,
		Kind:     kindToProto[e.Kind],
		RunId:    e.RunID,
		Attempt:  uint32(e.Attempt),
		Revision: e.Revision,
		Payload:  e.Payload,
	})
}

// Decode reads the value of a wake-up record. Anything that does not decode
// to a valid entry is an error wrapping ErrMalformed that names the field.
func Decode(b []byte) (store.DueEntry, error) {
	var m sundialv1.DueEntry
	if err := proto.Unmarshal(b, &m); err != nil {
		return store.DueEntry{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	var errs []error
	if m.DueTime == nil {
		errs = append(errs, errors.New("due_time: must be set"))
	} else if err := m.DueTime.CheckValid(); err != nil {
		errs = append(errs, fmt.Errorf("due_time: %w", err))
	}
	kind, ok := kindFromProto[m.Kind]
	if !ok {
		errs = append(errs, fmt.Errorf("kind %v: must be scheduled, retry, trigger or dag", m.Kind))
	}
	if len(errs) > 0 {
		return store.DueEntry{}, fmt.Errorf("%w: %w", ErrMalformed, errors.Join(errs...))
	}
	e := store.DueEntry{
		Due:      store.Truncate(m.DueTime.AsTime()),
		JobID:    m.JobId,
		Kind:     kind,
		RunID:    m.RunId,
		Attempt:  int(m.Attempt),
		Revision: m.Revision,
		Payload:  m.Payload,
	}
	if err := e.Validate(); err != nil {
		return store.DueEntry{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return e, nil
}
