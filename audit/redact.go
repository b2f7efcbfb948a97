package audit

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// redactChanges returns cs with the secrets of HTTP targets taken out of
// their text, for the changes Diff did not make: the rows written before
// Diff redacted (shown until their retention ends) and any Change a caller
// built itself. It reads the text as Diff writes it for a JobSpec's HTTP
// target fields; a value of such a field that does not read back (cut at
// MaxValue, say) is redacted whole. Text Diff already redacted comes out
// unchanged.
func redactChanges(cs []Change) []Change {
	var out []Change
	for i, c := range cs {
		r := redactChange(c)
		if r == c {
			continue
		}
		if out == nil {
			out = append([]Change(nil), cs...)
		}
		out[i] = r
	}
	if out == nil {
		return cs
	}
	return out
}

func redactChange(c Change) Change {
	var redact func(string) string
	switch c.Field {
	case "target":
		redact = func(v string) string { return redactJSON(v, &sundialv1.Target{}) }
	case "target.http":
		redact = func(v string) string { return redactJSON(v, &sundialv1.HttpTarget{}) }
	case "target.http.headers":
		redact = redactHeaderText
	case "target.http.url":
		redact = redactURLText
	default:
		return c
	}
	if c.Before != "" {
		c.Before = redact(c.Before)
	}
	if c.After != "" {
		c.After = redact(c.After)
	}
	return c
}

// redactJSON redacts a message written as compact protojson.
func redactJSON(v string, m proto.Message) string {
	if err := protojson.Unmarshal([]byte(v), m); err != nil {
		return jobspec.Redacted
	}
	jobspec.Redact(m)
	b, err := protojson.Marshal(m)
	if err != nil {
		return jobspec.Redacted
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return jobspec.Redacted
	}
	return c.String()
}

// redactHeaderText redacts a header map written as {Name: "value", ...}.
func redactHeaderText(v string) string {
	if !strings.HasPrefix(v, "{") || !strings.HasSuffix(v, "}") || len(v) < 2 {
		return jobspec.Redacted
	}
	inner := v[1 : len(v)-1]
	h := &sundialv1.HttpTarget{Headers: map[string]string{}}
	var names []string
	for inner != "" {
		name, rest, ok := strings.Cut(inner, ": ")
		if !ok {
			return jobspec.Redacted
		}
		quoted, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return jobspec.Redacted
		}
		value, _ := strconv.Unquote(quoted)
		h.Headers[name] = value
		names = append(names, name)
		inner = strings.TrimPrefix(rest[len(quoted):], ", ")
	}
	jobspec.Redact(h)
	items := make([]string, len(names))
	for i, name := range names {
		items[i] = name + ": " + strconv.Quote(h.Headers[name])
	}
	return "{" + strings.Join(items, ", ") + "}"
}

// redactURLText redacts a URL written as a quoted string.
func redactURLText(v string) string {
	u, err := strconv.Unquote(v)
	if err != nil {
		return jobspec.Redacted
	}
	return strconv.Quote(jobspec.RedactURL(u, nil))
}
