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
		{"empty spec", Spec{}, []string{FieldKind}, "required"},
		{"unknown zone", Spec{Kind: KindImmediate, Reference: ref, TimeZone: "Mars/Olympus"}, []string{FieldTimeZone}, `unknown time zone "Mars/Olympus"`},
		{"local zone", Spec{Kind: KindImmediate, Reference: ref, TimeZone: "Local"}, []string{FieldTimeZone}, "depends on the machine"},
		{"unknown kind", Spec{Kind: Kind(42), TimeZone: "UTC"}, []string{FieldKind}, "Kind(42)"},

		{"bad policy values", Spec{Kind: KindCron, Cron: "0 0 * * *", TimeZone: "UTC", Nonexistent: 9, Ambiguous: -1}, []string{FieldNonexistent, FieldAmbiguous}, "unknown policy 9"},
		{"empty cron", berlinCron(""), []string{FieldCronExpression}, "required"},
		{"blank cron", berlinCron("   "), []string{FieldCronExpression}, "required"},
		{"too few fields", berlinCron("0 0 *"), []string{FieldCronExpression}, "expected 5 fields"},
		{"too many fields", berlinCron("0 0 0 * * * *"), []string{FieldCronExpression}, "got 7"},
		{"minute out of range", berlinCron("60 * * * *"), []string{FieldCronExpression}, `minute field "60": 60 in "60" is out of range: want 0-59`},
		{"day of week 7", berlinCron("0 0 * * 7"), []string{FieldCronExpression}, `day-of-week field "7": 7 in "7" is out of range: want 0-6`},
		{"zero step", berlinCron("*/0 * * * *"), []string{FieldCronExpression}, "step"},
		{"garbage", berlinCron("every day at noon"), []string{FieldCronExpression}, ""},
		{"unknown descriptor", berlinCron("@fortnightly"), []string{FieldCronExpression}, `unknown descriptor "@fortnightly"`},
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

// TestCronFieldErrors checks that every malformed field is refused with a
// reason that names the field and quotes the text written in it.
func TestCronFieldErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr   string
		reason string
	}{
		{"*-5 * * * *", `minute field "*-5": range "*-5" starts at "*": write "*" for every value or a range of numbers`},
		{"0 ?-3 * * *", `hour field "?-3": range "?-3" starts at "?": write "?" for every value or a range of numbers`},
		{", * * * *", `minute field ",": no value in the list`},
		{"0 0 ,, * *", `day-of-month field ",,": no value in the list`},
		{"0 0 * * 7", `day-of-week field "7": 7 in "7" is out of range: want 0-6`},
		{"+ * * * *", `minute field "+": "+" in "+" is not a number`},
		{"0 5-* * * *", `hour field "5-*": "*" in "5-*" is not a number`},
		{"-5 * * * *", `minute field "-5": "-5" is missing a value`},
		{"0 5- * * *", `hour field "5-": "5-" is missing a value`},
		{"0 1-2-3 * * *", `hour field "1-2-3": "2-3" in "1-2-3" is not a number`},
		{"0 0 0-31 * *", `day-of-month field "0-31": 0 in "0-31" is out of range: want 1-31`},
		{"0 0 1-32 * *", `day-of-month field "1-32": 32 in "1-32" is out of range: want 1-31`},
		{"0 0 * 0 *", `month field "0": 0 in "0" is out of range: want 1-12`},
		{"0 0 * 13 *", `month field "13": 13 in "13" is out of range: want 1-12`},
		{"0 0 * foo *", `month field "foo": "foo" in "foo" is neither a number nor a name (jan-dec)`},
		{"0 0 * * mon-fri,funday", `day-of-week field "mon-fri,funday": "funday" in "funday" is neither a number nor a name (sun-sat)`},
		{"0 0 * * 5-1", `day-of-week field "5-1": range "5-1" runs backwards`},
		{"0 0 * * fri-mon", `day-of-week field "fri-mon": range "fri-mon" runs backwards`},
		{"*/0 * * * *", `minute field "*/0": step 0 in "*/0" is out of range: want 1 or more`},
		{"*/ * * * *", `minute field "*/": step "" in "*/" is not a number`},
		{"*/x * * * *", `minute field "*/x": step "x" in "*/x" is not a number`},
		{"*/-1 * * * *", `minute field "*/-1": step "-1" in "*/-1" is not a number`},
		{"*/1/2 * * * *", `minute field "*/1/2": "*/1/2" has more than one step`},
		{"99999999999999999999 * * * *", `minute field "99999999999999999999": 99999999999999999999 in "99999999999999999999" is out of range: want 0-59`},
		{"60 0 0 * * *", `second field "60": 60 in "60" is out of range: want 0-59`},
		{"0 0 L * *", `day-of-month field "L": "L" in "L" is not a number`},
		{"0 0 * * 5#3", `day-of-week field "5#3": "5#3" in "5#3" is neither a number nor a name (sun-sat)`},
		{"0 jan * * *", `hour field "jan": "jan" in "jan" is not a number`},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			t.Parallel()
			_, err := Compile(cronSpec(tc.expr, "UTC", skip, first))
			require.Error(t, err)
			assert.Equal(t, []string{FieldCronExpression}, fieldsOf(err))
			assert.Equal(t, FieldCronExpression+": "+tc.reason, err.Error())
			assert.NotContains(t, err.Error(), "strconv")
		})
	}
}

// TestCronStandardParserForms checks that the forms the standard cron parser
// (the one Kubernetes CronJob uses) accepts are accepted here with the same
// meaning: a step up to and past the field's span keeps only the first
// value, empty list elements are skipped, a number may carry a leading "+".
func TestCronStandardParserForms(t *testing.T) {
	t.Parallel()
	bits := func(vs ...int) uint64 {
		var b uint64
		for _, v := range vs {
			b |= 1 << uint(v)
		}
		return b
	}
	allDom, allMonth, allDow := uint64(1<<32-2), uint64(1<<13-2), uint64(1<<7-1)
	tests := []struct {
		expr string
		want cronCalc
	}{
		{"*/60 * * * *", cronCalc{second: bits(0), minute: bits(0), hour: 1<<24 - 1, dom: allDom, month: allMonth, dow: allDow, domStar: true, dowStar: true}},
		{"*/59 * * * *", cronCalc{second: bits(0), minute: bits(0, 59), hour: 1<<24 - 1, dom: allDom, month: allMonth, dow: allDow, domStar: true, dowStar: true}},
		{"*/100 * * * *", cronCalc{second: bits(0), minute: bits(0), hour: 1<<24 - 1, dom: allDom, month: allMonth, dow: allDow, domStar: true, dowStar: true}},
		{"0 */24 * * *", cronCalc{second: bits(0), minute: bits(0), hour: bits(0), dom: allDom, month: allMonth, dow: allDow, domStar: true, dowStar: true}},
		{"0 0 */31 * *", cronCalc{second: bits(0), minute: bits(0), hour: bits(0), dom: bits(1), month: allMonth, dow: allDow, dowStar: true}},
		{"0 0 1 */12 *", cronCalc{second: bits(0), minute: bits(0), hour: bits(0), dom: bits(1), month: bits(1), dow: allDow, dowStar: true}},
		// "*/7" in day-of-week is Sunday only, and a restriction: with a
		// restricted day-of-month, either day fires.
		{"0 0 * * */7", cronCalc{second: bits(0), minute: bits(0), hour: bits(0), dom: allDom, month: allMonth, dow: bits(0), domStar: true}},
		{"0 0 13 * */7", cronCalc{second: bits(0), minute: bits(0), hour: bits(0), dom: bits(13), month: allMonth, dow: bits(0)}},
		{"0 0 * * 1-5/9", cronCalc{second: bits(0), minute: bits(0), hour: bits(0), dom: allDom, month: allMonth, dow: bits(1), domStar: true}},
		{"10/60 * * * *", cronCalc{second: bits(0), minute: bits(10), hour: 1<<24 - 1, dom: allDom, month: allMonth, dow: allDow, domStar: true, dowStar: true}},
		{"1,,2 * * * *", cronCalc{second: bits(0), minute: bits(1, 2), hour: 1<<24 - 1, dom: allDom, month: allMonth, dow: allDow, domStar: true, dowStar: true}},
		{",5 * * * *", cronCalc{second: bits(0), minute: bits(5), hour: 1<<24 - 1, dom: allDom, month: allMonth, dow: allDow, domStar: true, dowStar: true}},
		{"5, * * * *", cronCalc{second: bits(0), minute: bits(5), hour: 1<<24 - 1, dom: allDom, month: allMonth, dow: allDow, domStar: true, dowStar: true}},
		{"+5 +1-+3 * * *", cronCalc{second: bits(0), minute: bits(5), hour: bits(1, 2, 3), dom: allDom, month: allMonth, dow: allDow, domStar: true, dowStar: true}},
		{"*/+15 * * * *", cronCalc{second: bits(0), minute: bits(0, 15, 30, 45), hour: 1<<24 - 1, dom: allDom, month: allMonth, dow: allDow, domStar: true, dowStar: true}},
		{"0 0 ? * MON-FRI", cronCalc{second: bits(0), minute: bits(0), hour: bits(0), dom: allDom, month: allMonth, dow: bits(1, 2, 3, 4, 5), domStar: true}},
		{"0 0 1 JAN/6 *", cronCalc{second: bits(0), minute: bits(0), hour: bits(0), dom: bits(1), month: bits(1, 7), dow: allDow, dowStar: true}},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			t.Parallel()
			got, err := parseCronFields(tc.expr)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			_, err = Compile(cronSpec(tc.expr, "UTC", skip, first))
			require.NoError(t, err)
		})
	}
}

// TestCronFieldsAccepted pins the sets the parser builds for the forms it
// accepts.
func TestCronFieldsAccepted(t *testing.T) {
	t.Parallel()
	bits := func(vs ...int) uint64 {
		var b uint64
		for _, v := range vs {
			b |= 1 << uint(v)
		}
		return b
	}
	tests := []struct {
		expr string
		want cronCalc
	}{
		{"* * * * *", cronCalc{second: bits(0), minute: 1<<60 - 1, hour: 1<<24 - 1, dom: 1<<32 - 2, month: 1<<13 - 2, dow: 1<<7 - 1, domStar: true, dowStar: true}},
		{"5/20 1-3,7 */10 jan,MAR-apr sun,6", cronCalc{second: bits(0), minute: bits(5, 25, 45), hour: bits(1, 2, 3, 7), dom: bits(1, 11, 21, 31), month: bits(1, 3, 4), dow: bits(0, 6)}},
		{"0-59/30 0 0 ? * ?", cronCalc{second: bits(0, 30), minute: bits(0), hour: bits(0), dom: 1<<32 - 2, month: 1<<13 - 2, dow: 1<<7 - 1, domStar: true, dowStar: true}},
		{"0 0 1,* * 1-5", cronCalc{second: bits(0), minute: bits(0), hour: bits(0), dom: 1<<32 - 2, month: 1<<13 - 2, dow: bits(1, 2, 3, 4, 5), domStar: true}},
		{"@weekly", cronCalc{second: bits(0), minute: bits(0), hour: bits(0), dom: 1<<32 - 2, month: 1<<13 - 2, dow: bits(0), domStar: true}},
		{"@HOURLY", cronCalc{second: bits(0), minute: bits(0), hour: 1<<24 - 1, dom: 1<<32 - 2, month: 1<<13 - 2, dow: 1<<7 - 1, domStar: true, dowStar: true}},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			t.Parallel()
			got, err := parseCronFields(tc.expr)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
