package jobspec

import (
	"hash/fnv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// MaxSplay bounds JobSpec.splay: a splayed run waits in its dispatcher's
// memory (and holds its shard's watermark back) until it fires.
const MaxSplay = time.Hour

// Splay returns the offset after its due time at which the run runID of a
// job with the given splay window fires: a whole number of milliseconds in
// [0, window), from a hash of the run id alone, so that every dispatcher that
// fires the run (again after a failed try, or after taking the shard over)
// fires it at the same instant, and the runs of jobs due together spread
// evenly over the window. A window under a millisecond means no splay.
func Splay(runID string, window time.Duration) time.Duration {
	if window < time.Millisecond {
		return 0
	}
	ms := uint64(window / time.Millisecond)
	h := fnv.New64a()
	_, _ = h.Write([]byte(runID))
	return time.Duration(h.Sum64()%ms) * time.Millisecond
}

// SplayWindow returns the job's splay window (JobSpec.splay), zero when it
// has none or its schedule does not recur.
func SplayWindow(spec *sundialv1.JobSpec) time.Duration {
	if spec.GetSplay() == nil || !recurring(spec.GetSchedule()) {
		return 0
	}
	return max(spec.GetSplay().AsDuration(), 0)
}

// SplayWindowOf is SplayWindow of an encoded JobSpec, reading only the
// fields it needs (the dispatcher asks it of every scheduled entry it
// loads, before it decodes the job to fire it). Bytes that do not parse
// give zero.
func SplayWindowOf(spec []byte) time.Duration {
	var window time.Duration
	recurs := false
	for len(spec) > 0 {
		num, typ, n := protowire.ConsumeTag(spec)
		if n < 0 {
			return 0
		}
		spec = spec[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, spec); n < 0 {
				return 0
			}
			spec = spec[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(spec)
		if n < 0 {
			return 0
		}
		spec = spec[n:]
		switch num {
		case splayField:
			window = durationOf(v)
		case scheduleField:
			recurs = scheduleRecursOf(v)
		}
	}
	if !recurs {
		return 0
	}
	return max(window, 0)
}

// Field numbers SplayWindowOf reads: JobSpec.splay and JobSpec.schedule,
// and in a Schedule its cron and interval kinds.
const (
	splayField            = 22
	scheduleField         = 5
	scheduleCronField     = 4
	scheduleIntervalField = 5
)

// durationOf decodes a google.protobuf.Duration (seconds = 1, nanos = 2).
func durationOf(b []byte) time.Duration {
	var secs, nanos int64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0
		}
		b = b[n:]
		if typ != protowire.VarintType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return 0
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return 0
		}
		b = b[n:]
		switch num {
		case 1:
			secs = int64(v)
		case 2:
			nanos = int64(int32(v))
		}
	}
	if secs < 0 || secs > int64(MaxSplay/time.Second)+1 {
		return 0
	}
	return time.Duration(secs)*time.Second + time.Duration(nanos)
}

// scheduleRecursOf says whether an encoded Schedule is a cron or an
// interval schedule.
func scheduleRecursOf(b []byte) bool {
	recurs := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return false
		}
		b = b[n:]
		switch num {
		case scheduleCronField, scheduleIntervalField:
			recurs = true
		case 1, 2, 3: // immediate, at, delay: the last kind set wins
			recurs = false
		}
	}
	return recurs
}

// recurring says whether s is a cron or an interval schedule.
func recurring(s *sundialv1.Schedule) bool {
	return s.GetCron() != nil || s.GetInterval() != nil
}
