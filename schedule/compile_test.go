package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompileRejects(t *testing.T) {
	t.Parallel()
	ref := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	berlinCron := func(expr string) Spec { return cronSpec(expr, "Europe/Berlin", skip, first) }
	tests := []struct {
		name   string
		spec   Spec
		fields []string // every field reported, in order
		reason string   // a substring of the first reason
	}{
		{"empty spec", Spec{}, []string{FieldTimeZone, FieldKind}, "required"},
		{"unknown zone", Spec{Kind: KindImmediate, Reference: ref, TimeZone: "Mars/Olympus"}, []string{FieldTimeZone}, `unknown time zone "Mars/Olympus"`},
		{"local zone", Spec{Kind: KindImmediate, Reference: ref, TimeZone: "Local"}, []string{FieldTimeZone}, "depends on the machine"},
		{"unknown kind", Spec{Kind: Kind(42), TimeZone: "UTC"}, []string{FieldKind}, "Kind(42)"},

		{"cron without policies", Spec{Kind: KindCron, Cron: "0 0 * * *", TimeZone: "UTC"}, []string{FieldNonexistent, FieldAmbiguous}, "skip or shift_forward"},
		{"bad policy values", Spec{Kind: KindCron, Cron: "0 0 * * *", TimeZone: "UTC", Nonexistent: 9, Ambiguous: -1}, []string{FieldNonexistent, FieldAmbiguous}, "unknown policy 9"},
		{"empty cron", berlinCron(""), []string{FieldCronExpression}, "required"},
		{"blank cron", berlinCron("   "), []string{FieldCronExpression}, "required"},
		{"too few fields", berlinCron("0 0 *"), []string{FieldCronExpression}, "expected 5 to 6 fields"},
		{"too many fields", berlinCron("0 0 0 * * * *"), []string{FieldCronExpression}, "expected 5 to 6 fields"},
		{"minute out of range", berlinCron("60 * * * *"), []string{FieldCronExpression}, "above maximum"},
		{"day of week 7", berlinCron("0 0 * * 7"), []string{FieldCronExpression}, "above maximum"},
		{"zero step", berlinCron("*/0 * * * *"), []string{FieldCronExpression}, "step"},
		{"garbage", berlinCron("every day at noon"), []string{FieldCronExpression}, ""},
		{"unknown descriptor", berlinCron("@fortnightly"), []string{FieldCronExpression}, "unrecognized descriptor"},
		{"TZ prefix", berlinCron("TZ=Asia/Tokyo 0 0 * * *"), []string{FieldCronExpression}, FieldTimeZone},
		{"CRON_TZ prefix", berlinCron("CRON_TZ=Asia/Tokyo 0 0 * * *"), []string{FieldCronExpression}, FieldTimeZone},
		{"malformed TZ prefix that panics the parser", berlinCron("TZ="), []string{FieldCronExpression}, FieldTimeZone},
		{"30th of February", berlinCron("0 0 30 2 *"), []string{FieldCronExpression}, "never fires"},
		{"31st of 30-day months", berlinCron("0 0 31 4,6,9,11 *"), []string{FieldCronExpression}, "never fires"},
		{"every without duration", berlinCron("@every"), []string{FieldCronExpression}, "one duration"},
		{"every two durations", berlinCron("@every 1h 2h"), []string{FieldCronExpression}, "one duration"},
		{"every bad duration", berlinCron("@every soon"), []string{FieldCronExpression}, "@every"},
		{"every too short", berlinCron("@every 500ms"), []string{FieldCronExpression}, "at least 1s"},
		{"every negative", berlinCron("@every -1h"), []string{FieldCronExpression}, "at least 1s"},
		{"cron with interval fields", Spec{Kind: KindCron, Cron: "0 0 * * *", TimeZone: "UTC", Nonexistent: skip, Ambiguous: first, Every: time.Hour, At: ref},
			[]string{FieldAt, FieldIntervalEvery}, "not used by a schedule of kind cron"},

		{"interval zero", Spec{Kind: KindInterval, TimeZone: "UTC"}, []string{FieldIntervalEvery}, "at least 1s"},
		{"interval too short", Spec{Kind: KindInterval, TimeZone: "UTC", Every: time.Millisecond}, []string{FieldIntervalEvery}, "got 1ms"},
		{"offset not below every", Spec{Kind: KindInterval, TimeZone: "UTC", Every: time.Hour, Offset: time.Hour}, []string{FieldIntervalOffset}, "less than every"},
		{"negative offset", Spec{Kind: KindInterval, TimeZone: "UTC", Every: time.Hour, Offset: -time.Minute}, []string{FieldIntervalOffset}, "at least 0"},
		{"start and offset", Spec{Kind: KindInterval, TimeZone: "UTC", Every: time.Hour, Offset: time.Minute, Start: ref}, []string{FieldIntervalOffset}, "not both"},
		{"interval with cron", Spec{Kind: KindInterval, TimeZone: "UTC", Every: time.Hour, Cron: "@hourly"}, []string{FieldCronExpression}, "kind interval"},

		{"at without time", Spec{Kind: KindAt, TimeZone: "UTC"}, []string{FieldAt}, "required"},
		{"at with delay", Spec{Kind: KindAt, TimeZone: "UTC", At: ref, Delay: time.Second}, []string{FieldDelay}, "kind at"},
		{"delay without reference", Spec{Kind: KindDelay, TimeZone: "UTC", Delay: time.Second}, []string{FieldReference}, "counts from"},
		{"zero delay", Spec{Kind: KindDelay, TimeZone: "UTC", Reference: ref}, []string{FieldDelay}, "must be positive"},
		{"negative delay", Spec{Kind: KindDelay, TimeZone: "UTC", Reference: ref, Delay: -time.Second}, []string{FieldDelay}, "-1s"},
		{"immediate without reference", Spec{Kind: KindImmediate, TimeZone: "UTC"}, []string{FieldReference}, "required"},
		{"immediate with cron and interval", Spec{Kind: KindImmediate, TimeZone: "UTC", Reference: ref, Cron: "* * * * *", Every: time.Hour, Start: ref, Offset: 1},
			[]string{FieldCronExpression, FieldIntervalEvery, FieldIntervalStart, FieldIntervalOffset}, "kind immediate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Compile(tc.spec)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Equal(t, tc.fields, fieldsOf(err))
			var fe *FieldError
			require.True(t, errors.As(err, &fe))
			assert.Contains(t, fe.Reason, tc.reason)
			assert.Contains(t, err.Error(), fe.Field+": "+fe.Reason)
		})
	}
}

func TestCompileAccepts(t *testing.T) {
	t.Parallel()
	tests := []Spec{
		cronSpec("0 0 29 2 *", "UTC", skip, first),   // only in leap years, but it comes
		cronSpec(" 0  0 * * * ", "UTC", skip, first), // surrounding and repeated blanks
		cronSpec("0 0 31 2 mon", "UTC", shift, both), // Feb 31 never, Mondays yes (OR)
		cronSpec("@every 1h30m", "Asia/Kathmandu", skip, first),
		{Kind: KindInterval, TimeZone: "UTC", Every: time.Second},
		{Kind: KindAt, TimeZone: "UTC", At: time.Unix(1, 0), Nonexistent: skip}, // policies may be set, with no effect
	}
	for _, spec := range tests {
		t.Run(spec.Kind.String()+" "+spec.Cron, func(t *testing.T) {
			t.Parallel()
			s, err := Compile(spec)
			require.NoError(t, err)
			assert.Equal(t, spec, s.Spec())
			assert.Equal(t, spec.Kind, s.Kind())
			assert.Equal(t, spec.TimeZone, s.Location().String())
		})
	}
}

func TestFieldErrorsOfForeignErrors(t *testing.T) {
	t.Parallel()
	assert.Nil(t, FieldErrors(nil))
	assert.Nil(t, FieldErrors(errors.New("plain")))
	wrapped := errors.Join(errors.New("x"), &FieldError{Field: "a", Reason: "b"})
	assert.Equal(t, []string{"a"}, fieldsOf(wrapped))
}

func TestParseNames(t *testing.T) {
	t.Parallel()
	for _, k := range []Kind{KindImmediate, KindAt, KindDelay, KindCron, KindInterval} {
		got, err := ParseKind(k.String())
		require.NoError(t, err)
		assert.Equal(t, k, got)
	}
	_, err := ParseKind("unspecified")
	assert.Error(t, err)
	_, err = ParseKind("weekly")
	assert.ErrorContains(t, err, `"weekly"`)

	for in, want := range map[string]NonexistentPolicy{"skip": skip, "SKIP": skip, "shift": shift, "shift_forward": shift, "Shift-Forward": shift} {
		got, err := ParseNonexistent(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err = ParseNonexistent("unspecified")
	assert.Error(t, err)

	for in, want := range map[string]AmbiguousPolicy{"first": first, "SECOND": secnd, "both": both} {
		got, err := ParseAmbiguous(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err = ParseAmbiguous("unspecified")
	assert.Error(t, err)

	assert.Equal(t, "Kind(-1)", Kind(-1).String())
	assert.Equal(t, "NonexistentPolicy(7)", NonexistentPolicy(7).String())
	assert.Equal(t, "AmbiguousPolicy(7)", AmbiguousPolicy(7).String())
}
