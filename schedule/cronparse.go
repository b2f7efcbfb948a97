package schedule

import (
	"fmt"
	"strconv"
	"strings"
)

// cronField describes one field of a cron expression: its name in errors,
// the values it allows, and the names that may stand for values.
type cronField struct {
	name     string
	min, max int
	names    []string // names[i] stands for min+i; nil when the field has none
}

// The fields of a six-field expression, in order; a five-field expression
// omits the first.
func cronFields() [6]cronField {
	return [6]cronField{
		{name: "second", min: 0, max: 59},
		{name: "minute", min: 0, max: 59},
		{name: "hour", min: 0, max: 23},
		{name: "day-of-month", min: 1, max: 31},
		{name: "month", min: 1, max: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
		{name: "day-of-week", min: 0, max: 6, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
	}
}

// descriptor maps each descriptor to the six-field expression it stands for.
func descriptor(name string) (string, bool) {
	switch strings.ToLower(name) {
	case "@yearly", "@annually":
		return "0 0 0 1 1 *", true
	case "@monthly":
		return "0 0 0 1 * *", true
	case "@weekly":
		return "0 0 0 * * 0", true
	case "@daily", "@midnight":
		return "0 0 0 * * *", true
	case "@hourly":
		return "0 0 * * * *", true
	}
	return "", false
}

// CronFieldError is a malformed field of a cron expression: which field,
// the text written in it, and what is wrong with it.
type CronFieldError struct {
	// Field is the field's name: second, minute, hour, day-of-month, month
	// or day-of-week.
	Field string
	// Text is the whole field as written.
	Text string
	// Reason says what is wrong, naming the offending part of Text.
	Reason string
}

func (e *CronFieldError) Error() string {
	return fmt.Sprintf("%s field %q: %s", e.Field, e.Text, e.Reason)
}

// parseCronFields parses a five- or six-field expression or a descriptor
// (not "@every", which is an interval). It reports the first bad field as a
// *CronFieldError, or a plain error for a bad shape.
func parseCronFields(expr string) (cronCalc, error) {
	expr = strings.TrimSpace(expr)
	if strings.HasPrefix(expr, "@") {
		six, ok := descriptor(expr)
		if !ok {
			return cronCalc{}, fmt.Errorf("unknown descriptor %q: want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or \"@every <duration>\"", expr)
		}
		expr = six
	}
	words := strings.Fields(expr)
	switch len(words) {
	case 6:
	case 5:
		// Five fields fire at second zero.
		words = append([]string{"0"}, words...)
	default:
		return cronCalc{}, fmt.Errorf("expected 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), got %d in %q", len(words), expr)
	}
	var sets [6]uint64
	var stars [6]bool
	for i, f := range cronFields() {
		set, star, err := f.parse(words[i])
		if err != nil {
			return cronCalc{}, err
		}
		sets[i], stars[i] = set, star
	}
	return cronCalc{
		second: sets[0], minute: sets[1], hour: sets[2], dom: sets[3], month: sets[4], dow: sets[5],
		domStar: stars[3], dowStar: stars[5],
	}, nil
}

// parse reads one field: a comma-separated list of elements, each "*" or
// "?" (every value), a value, or a range "lo-hi", optionally followed by a
// step "/n". A single value with a step, "5/15", runs to the field's maximum.
// A step may exceed the field's span ("*/60" in minutes is minute 0 only) and
// empty elements of the list are skipped ("1,,2" is "1,2"), as in the
// standard cron parser Kubernetes CronJob uses; a field with no element at
// all is refused. It returns the allowed values as a bit set and whether the
// field is unrestricted: an element "*" or "?" without a step above one.
func (f cronField) parse(text string) (set uint64, star bool, err error) {
	bad := func(format string, args ...any) (uint64, bool, error) {
		return 0, false, &CronFieldError{Field: f.name, Text: text, Reason: fmt.Sprintf(format, args...)}
	}
	elems := 0
	for elem := range strings.SplitSeq(text, ",") {
		if elem == "" {
			continue
		}
		elems++
		rng, stepText, hasStep := strings.Cut(elem, "/")
		step := 1
		if hasStep {
			if strings.Contains(stepText, "/") {
				return bad("%q has more than one step", elem)
			}
			n, ok := number(stepText)
			if !ok {
				return bad("step %q in %q is not a number", stepText, elem)
			}
			if n < 1 {
				return bad("step %s in %q is out of range: want 1 or more", stepText, elem)
			}
			step = n
		}
		var lo, hi int
		switch {
		case rng == "*" || rng == "?":
			lo, hi = f.min, f.max
			star = star || step == 1
		case strings.HasPrefix(rng, "*-") || strings.HasPrefix(rng, "?-"):
			// The standard parser reads "*-5" as "*", dropping "-5"; a range
			// that says less than it appears to is refused instead.
			return bad("range %q starts at %q: write %q for every value or a range of numbers", rng, rng[:1], rng[:1])
		case strings.Contains(rng, "-"):
			loText, hiText, _ := strings.Cut(rng, "-")
			if lo, err = f.value(loText, elem); err != nil {
				return bad("%v", err)
			}
			if hi, err = f.value(hiText, elem); err != nil {
				return bad("%v", err)
			}
			if lo > hi {
				return bad("range %q runs backwards", rng)
			}
		default:
			if lo, err = f.value(rng, elem); err != nil {
				return bad("%v", err)
			}
			hi = lo
			if hasStep {
				hi = f.max
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << uint(v)
		}
	}
	if elems == 0 {
		return bad("no value in the list")
	}
	return set, star, nil
}

// value reads one value of the field: a number or, in month and
// day-of-week, a name. elem is the list element it came from, for the error.
func (f cronField) value(s, elem string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("%q is missing a value", elem)
	}
	if n, ok := number(s); ok {
		if n < f.min || n > f.max {
			return 0, fmt.Errorf("%s in %q is out of range: want %d-%d", s, elem, f.min, f.max)
		}
		return n, nil
	}
	for i, name := range f.names {
		if strings.EqualFold(s, name) {
			return f.min + i, nil
		}
	}
	if f.names != nil {
		return 0, fmt.Errorf("%q in %q is neither a number nor a name (%s-%s)", s, elem, f.names[0], f.names[len(f.names)-1])
	}
	return 0, fmt.Errorf("%q in %q is not a number", s, elem)
}

// number reads an unsigned decimal number, with an optional leading "+" as
// the standard cron parser allows. Numbers too long for any field read as a
// value out of every field's range rather than failing to convert.
func number(s string) (int, bool) {
	s = strings.TrimPrefix(s, "+")
	if s == "" {
		return 0, false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	if s = strings.TrimLeft(s, "0"); len(s) > 4 {
		return 1 << 20, true
	}
	n, _ := strconv.Atoi("0" + s)
	return n, true
}
