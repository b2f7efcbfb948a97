package topics

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Header returns the value of rec's header key, matched without regard to
// case, or "" when rec has none.
func Header(rec *kgo.Record, key string) string {
	for _, h := range rec.Headers {
		if strings.EqualFold(h.Key, key) {
			return string(h.Value)
		}
	}
	return ""
}

// DagRunOf reads the DAG run of a RunEvent record of sundial.events from
// its sundialv1.HeaderDagRun header, without decoding the value. marked
// says whether the header is there: a current writer puts it on every
// RunEvent, with the event's dag_run_id, or empty for a run outside any
// DAG. A record without it (one written before the header existed, or
// not a RunEvent at all) says nothing: only decoding it tells. The rule
// for a reader that wants DAG node events only: skip a marked record with
// an empty id, decode everything else.
func DagRunOf(rec *kgo.Record) (id string, marked bool) {
	for _, h := range rec.Headers {
		if h.Key == sundialv1.HeaderDagRun {
			return string(h.Value), true
		}
	}
	return "", false
}

// runEventType is the message type a RunEvent's content-type names.
var runEventType = string((&sundialv1.RunEvent{}).ProtoReflect().Descriptor().FullName())

// DecodeRunEvent decodes a record of sundial.events that holds a RunEvent.
// The topic carries DagRunEvents too: a record is a RunEvent when its
// content-type names that message type or, without a message type (records
// that predate it), when its sundial-kind header is run_event or absent.
// ok is false, with no error, for a record that is not a RunEvent; the
// error is a RunEvent that does not decode. Every reader of sundial.events
// tells the two apart here.
func DecodeRunEvent(rec *kgo.Record) (ev *sundialv1.RunEvent, ok bool, err error) {
	ct := Header(rec, sundialv1.HeaderContentType)
	if mt := sundialv1.MessageType(ct); mt != "" {
		if mt != runEventType {
			return nil, false, nil
		}
	} else if kind := Header(rec, sundialv1.HeaderKind); kind != "" && kind != sundialv1.KindRunEvent {
		return nil, false, nil
	}
	ev = &sundialv1.RunEvent{}
	if err := sundialv1.Decode(ct, rec.Value, ev); err != nil {
		return nil, false, fmt.Errorf("run event at %s[%d]@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	return ev, true, nil
}
