package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/sundialhq/sundial/jobspec"
)

// MaxValue bounds the text of one value in a Change.
const MaxValue = 512

// Change is one field that differs between two versions of a definition.
type Change struct {
	// Field is the path of the field by proto names, nested messages
	// joined by dots ("schedule.cron.expression"). Lists and maps are one
	// field each.
	Field string `json:"field"`
	// Before and After are the values as text; empty when the field is
	// unset on that side.
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
}

// Diff returns the fields that differ between before and after, two
// messages of the same type (either may be nil, or a typed nil, for a
// creation or a deletion). Singular message fields set on both sides are compared field
// by field; a list, a map, or a message set on one side only, is one
// Change. Secret values of HTTP targets are never in a Change: they read
// jobspec.Redacted, and jobspec.RedactedChanged after a change
// (jobspec.RedactPair); before and after are not modified.
func Diff(before, after proto.Message) []Change {
	var b, a protoreflect.Message
	if before != nil && before.ProtoReflect().IsValid() { // a typed nil is none
		before = proto.Clone(before)
		b = before.ProtoReflect()
	}
	if after != nil && after.ProtoReflect().IsValid() {
		after = proto.Clone(after)
		a = after.ProtoReflect()
	}
	jobspec.RedactPair(before, after)
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		a = b.Type().Zero()
	case b == nil:
		b = a.Type().Zero()
	}
	if a.Descriptor().FullName() != b.Descriptor().FullName() {
		return []Change{{Field: "", Before: string(b.Descriptor().FullName()), After: string(a.Descriptor().FullName())}}
	}
	var out []Change
	diffMessage(&out, "", b, a)
	return out
}

func diffMessage(out *[]Change, prefix string, b, a protoreflect.Message) {
	fields := a.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		path := prefix + string(fd.Name())
		hasB, hasA := b.Has(fd), a.Has(fd)
		switch {
		case !hasB && !hasA:
			continue
		case hasB && hasA && fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			diffMessage(out, path+".", b.Get(fd).Message(), a.Get(fd).Message())
			continue
		}
		var before, after string
		if hasB {
			before = format(fd, b.Get(fd))
		}
		if hasA {
			after = format(fd, a.Get(fd))
		}
		if hasB != hasA || !equalValue(fd, b.Get(fd), a.Get(fd)) {
			*out = append(*out, Change{Field: path, Before: cut(before), After: cut(after)})
		}
	}
}

// equalValue compares two values of fd exactly (format may cut or lose
// precision).
func equalValue(fd protoreflect.FieldDescriptor, x, y protoreflect.Value) bool {
	switch {
	case fd.IsList(), fd.IsMap():
		return format(fd, x) == format(fd, y)
	case fd.Message() != nil:
		return proto.Equal(x.Message().Interface(), y.Message().Interface())
	case fd.Kind() == protoreflect.BytesKind:
		return string(x.Bytes()) == string(y.Bytes())
	}
	return x.Equal(y)
}

// format is a value as text: scalars as Go prints them, enums by name,
// bytes in base64, messages as protojson, lists and maps element by element.
func format(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch {
	case fd.IsList():
		l := v.List()
		items := make([]string, l.Len())
		for i := range l.Len() {
			items[i] = scalar(fd, l.Get(i))
		}
		return "[" + strings.Join(items, ", ") + "]"
	case fd.IsMap():
		m := v.Map()
		var items []string
		m.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			items = append(items, fmt.Sprintf("%v: %s", k.Interface(), scalar(fd.MapValue(), v)))
			return true
		})
		slices.Sort(items) // map order is random; a diff must be stable
		return "{" + strings.Join(items, ", ") + "}"
	}
	return scalar(fd, v)
}

func scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch {
	case fd.Message() != nil:
		b, err := protojson.MarshalOptions{}.Marshal(v.Message().Interface())
		if err != nil {
			return fmt.Sprintf("<%v>", err)
		}
		// protojson's spacing varies on purpose; compact it (outside
		// strings only) so that equal values read equal.
		var c bytes.Buffer
		if err := json.Compact(&c, b); err != nil {
			return string(b)
		}
		return c.String()
	case fd.Enum() != nil:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return fmt.Sprint(v.Enum())
	case fd.Kind() == protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes())
	case fd.Kind() == protoreflect.StringKind:
		return fmt.Sprintf("%q", v.String())
	}
	return fmt.Sprint(v.Interface())
}

func cut(s string) string {
	if len(s) <= MaxValue {
		return s
	}
	// Cutting may split a character; the store takes valid UTF-8 only.
	return strings.ToValidUTF8(s[:MaxValue], "") + "…"
}
