package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// mustTime parses an RFC 3339 instant.
func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err, "bad test time %q", s)
	return v
}

// utc formats instants as RFC 3339 UTC strings, so expectations read as
// text and failures show both lists.
func utc(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// cronSpec is a cron Spec with the given zone and policies.
func cronSpec(expr, zone string, n NonexistentPolicy, a AmbiguousPolicy) Spec {
	return Spec{Kind: KindCron, Cron: expr, TimeZone: zone, Nonexistent: n, Ambiguous: a}
}

// setup compiles spec, failing the test on error.
func setup(t testing.TB, spec Spec) *Schedule {
	t.Helper()
	s, err := Compile(spec)
	require.NoError(t, err)
	return s
}

// fieldsOf lists the fields named by the errors in err.
func fieldsOf(err error) []string {
	var out []string
	for _, fe := range FieldErrors(err) {
		out = append(out, fe.Field)
	}
	return out
}
