package jobspec

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/reflect/protoreflect"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// DecodeFile reads the job definitions of a file written by a person: a JSON
// array of JobSpecs, a stream of JSON JobSpecs (one per line or simply
// concatenated), or YAML documents separated by "---", each a JobSpec or a
// list of them. The first character decides: '[' or '{' is JSON, anything
// else YAML. Definitions are read as they come, so an input of any size is
// never held whole.
//
// The schema is the JobSpec's protobuf JSON form, which is always accepted
// as it is, plus what people write by hand: fields by their JSON or protobuf name (ownerTeam or owner_team), enum
// values by their short name in any case (FORBID, forbid, shift-forward as
// well as OVERLAP_POLICY_FORBID), and durations in Go ("1h30m") or ISO 8601
// ("PT1H30M") syntax as well as protobuf's "5400s". Records on Kafka and
// calls to the API take the protobuf JSON form only; this is for files.
//
// A definition that does not decode is yielded as a *FileError that lists
// every problem found in it at once, each with its line (in the YAML
// document, or in the JSON definition counted from its first line); reading
// goes on. Input that is not JSON or YAML at all ends the sequence with its
// error.
func DecodeFile(r io.Reader) iter.Seq2[*sundialv1.JobSpec, error] {
	return func(yield func(*sundialv1.JobSpec, error) bool) {
		br := bufio.NewReader(r)
		first, err := peekNonSpace(br)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			yield(nil, fmt.Errorf("read job definitions: %w", err))
			return
		}
		d := &fileDecoder{yield: yield}
		switch first {
		case '[':
			d.jsonArrays(json.NewDecoder(br))
		case '{':
			d.jsonStream(json.NewDecoder(br))
		default:
			d.yamlDocuments(yaml.NewDecoder(br))
		}
	}
}

// FileProblem is one problem of a definition in a file: where, which field
// (its path in the JobSpec as written) and why.
type FileProblem struct {
	// Line is the line of the value at fault: in the YAML stream, or in the
	// JSON definition counted from its first line. 0 when not known.
	Line int
	// Field is the path of the field as written ("schedule.timeZone");
	// empty for the definition as a whole.
	Field string
	// Reason says what is wrong.
	Reason string
}

func (p FileProblem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Reason)
	return b.String()
}

// FileError is a definition of a file that does not decode, with every
// problem found in it.
type FileError struct {
	// Definition is the definition's position in the file, from 1.
	Definition int
	// Problems are every problem found, in the order of the file.
	Problems []FileProblem
}

func (e *FileError) Error() string {
	if len(e.Problems) == 1 {
		return fmt.Sprintf("definition %d: %s", e.Definition, e.Problems[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "definition %d: %d problems:", e.Definition, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

type fileDecoder struct {
	yield func(*sundialv1.JobSpec, error) bool
	n     int // definitions seen so far
}

func (d *fileDecoder) fail(err error) {
	d.yield(nil, fmt.Errorf("read job definitions after definition %d: %w", d.n, err))
}

// fromJSON decodes one JSON definition. The protobuf JSON form goes to
// protojson untouched; only a definition that uses a readable form is
// rewritten first.
func (d *fileDecoder) fromJSON(raw []byte) bool {
	var node yaml.Node
	if err := yaml.Unmarshal(raw, &node); err != nil || len(node.Content) != 1 {
		return d.one(raw, nil, 0) // protojson names what is wrong
	}
	return d.one(raw, node.Content[0], 0)
}

// one decodes a definition. With a node, its readable forms are rewritten
// and every problem found is reported; raw, when set, is decoded as it is
// if nothing needed rewriting.
func (d *fileDecoder) one(raw []byte, node *yaml.Node, lineBase int) bool {
	d.n++
	if node != nil {
		r := readable{lineBase: lineBase}
		r.message(node, (&sundialv1.JobSpec{}).ProtoReflect().Descriptor(), "")
		if len(r.problems) > 0 {
			return d.yield(nil, &FileError{Definition: d.n, Problems: r.problems})
		}
		if raw == nil || r.rewritten {
			var v any
			if err := node.Decode(&v); err != nil {
				return d.yield(nil, &FileError{Definition: d.n, Problems: []FileProblem{{Line: node.Line, Reason: err.Error()}}})
			}
			var err error
			if raw, err = json.Marshal(v); err != nil {
				return d.yield(nil, &FileError{Definition: d.n, Problems: []FileProblem{{Line: node.Line, Reason: fmt.Sprintf("not expressible as JSON: %v", err)}}})
			}
		}
	}
	spec := &sundialv1.JobSpec{}
	if err := sundialv1.EncodingJSON.Unmarshal(raw, spec); err != nil {
		line := 0
		if node != nil {
			line = node.Line + lineBase
		}
		return d.yield(nil, &FileError{Definition: d.n, Problems: []FileProblem{{Line: line, Reason: err.Error()}}})
	}
	return d.yield(spec, nil)
}

func (d *fileDecoder) jsonArrays(dec *json.Decoder) {
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			d.fail(err)
			return
		}
		if delim, ok := tok.(json.Delim); !ok || delim != '[' {
			d.fail(fmt.Errorf("want an array of job definitions, got %v", tok))
			return
		}
		for dec.More() {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				d.fail(err)
				return
			}
			if !d.fromJSON(raw) {
				return
			}
		}
		if _, err := dec.Token(); err != nil { // the closing bracket
			d.fail(err)
			return
		}
	}
}

func (d *fileDecoder) jsonStream(dec *json.Decoder) {
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			d.fail(err)
			return
		}
		if !d.fromJSON(raw) {
			return
		}
	}
}

func (d *fileDecoder) yamlDocuments(dec *yaml.Decoder) {
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			d.fail(err)
			return
		}
		if len(doc.Content) == 0 {
			continue // an empty document
		}
		root := doc.Content[0]
		items := []*yaml.Node{root}
		if root.Kind == yaml.SequenceNode {
			items = root.Content
		}
		for _, item := range items {
			if item.Kind == yaml.ScalarNode && item.Tag == "!!null" {
				continue // an empty document or list item
			}
			if !d.one(nil, item, 0) {
				return
			}
		}
	}
}

// peekNonSpace skips leading white space and returns the next byte
// without consuming it.
func peekNonSpace(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.Peek(1)
		if err != nil {
			return 0, err
		}
		if !unicode.IsSpace(rune(b[0])) {
			return b[0], nil
		}
		if _, err := br.Discard(1); err != nil {
			return 0, err
		}
	}
}

// readable walks a definition's tree along the JobSpec's descriptor,
// rewriting readable enum and duration values to the protobuf JSON form and
// collecting every problem it finds.
type readable struct {
	lineBase  int
	problems  []FileProblem
	rewritten bool
}

func (r *readable) problem(n *yaml.Node, field, format string, args ...any) {
	r.problems = append(r.problems, FileProblem{Line: n.Line + r.lineBase, Field: field, Reason: fmt.Sprintf(format, args...)})
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// message walks a mapping node that holds md.
func (r *readable) message(n *yaml.Node, md protoreflect.MessageDescriptor, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		r.problem(n, path, "want an object (%s), got %s", md.Name(), kindOf(n))
		return
	}
	seen := map[protoreflect.FieldNumber]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		name := key.Value
		fd := md.Fields().ByJSONName(name)
		if fd == nil {
			fd = md.Fields().ByName(protoreflect.Name(name))
		}
		if fd == nil {
			r.problem(key, join(path, name), "unknown field%s", suggest(md, name))
			continue
		}
		if prev, ok := seen[fd.Number()]; ok {
			r.problem(key, join(path, name), "set twice (also as %s)", prev)
			continue
		}
		seen[fd.Number()] = name
		r.field(val, fd, join(path, name))
	}
}

// field walks the value of one field.
func (r *readable) field(n *yaml.Node, fd protoreflect.FieldDescriptor, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if isNull(n) {
		return
	}
	switch {
	case fd.IsMap():
		if n.Kind != yaml.MappingNode {
			r.problem(n, path, "want an object (a map), got %s", kindOf(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			r.single(n.Content[i+1], fd.MapValue(), fmt.Sprintf("%s[%q]", path, n.Content[i].Value))
		}
	case fd.IsList():
		if n.Kind != yaml.SequenceNode {
			r.problem(n, path, "want a list, got %s", kindOf(n))
			return
		}
		for i, item := range n.Content {
			r.single(item, fd, fmt.Sprintf("%s[%d]", path, i))
		}
	default:
		r.single(n, fd, path)
	}
}

// single walks one value of fd's type.
func (r *readable) single(n *yaml.Node, fd protoreflect.FieldDescriptor, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if isNull(n) {
		return
	}
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		md := fd.Message()
		switch md.FullName() {
		case "google.protobuf.Duration":
			r.duration(n, path)
		default:
			if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
				return // a well-known type: protojson reads its own form
			}
			r.message(n, md, path)
		}
	case protoreflect.EnumKind:
		r.enum(n, fd.Enum(), path)
	case protoreflect.StringKind:
		if n.Kind != yaml.ScalarNode {
			r.problem(n, path, "want a string, got %s", kindOf(n))
			return
		}
		if n.Tag != "!!str" {
			// YAML reads "id: 2026" or "version: 1.10" as a number;
			// a string field means the text as written.
			n.Tag, n.Style = "!!str", yaml.DoubleQuotedStyle
			r.rewritten = true
		}
	default:
		if n.Kind != yaml.ScalarNode {
			r.problem(n, path, "want a %s, got %s", fd.Kind(), kindOf(n))
		}
	}
}

// enum rewrites a short or differently cased enum name to its full name.
func (r *readable) enum(n *yaml.Node, ed protoreflect.EnumDescriptor, path string) {
	if n.Kind != yaml.ScalarNode {
		r.problem(n, path, "want one of %s, got %s", enumChoices(ed), kindOf(n))
		return
	}
	if n.Tag == "!!int" || ed.Values().ByName(protoreflect.Name(n.Value)) != nil {
		return // a number or the full name: protojson's own forms
	}
	full, ok := EnumValue(ed, n.Value)
	if !ok {
		r.problem(n, path, "%q is not one of %s", n.Value, enumChoices(ed))
		return
	}
	n.Value, n.Tag, n.Style = full, "!!str", 0
	r.rewritten = true
}

// duration rewrites a Go or ISO 8601 duration to protobuf's seconds form.
func (r *readable) duration(n *yaml.Node, path string) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		r.problem(n, path, "want a duration such as \"90s\", \"1h30m\" or \"PT1H30M\", got %s", kindOf(n))
		return
	}
	text, err := ParseReadableDuration(n.Value)
	if err != nil {
		r.problem(n, path, "%v", err)
		return
	}
	if text != n.Value {
		n.Value, n.Style = text, 0
		r.rewritten = true
	}
}

func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!str":
		return fmt.Sprintf("the text %q", n.Value)
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!bool":
		return "the boolean " + n.Value
	}
	return fmt.Sprintf("%q", n.Value)
}

// suggest names a field of md that name may have meant: within two edits,
// ignoring case and underscores.
func suggest(md protoreflect.MessageDescriptor, name string) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		if editDistance(norm(fd.JSONName()), norm(name)) <= 2 {
			return fmt.Sprintf(" (did you mean %s?)", fd.JSONName())
		}
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// enumPrefix is the prefix every value name of ed shares: its type name in
// upper snake case and "_" (OVERLAP_POLICY_ for OverlapPolicy); empty when
// the values do not all carry it.
func enumPrefix(ed protoreflect.EnumDescriptor) string {
	var b strings.Builder
	for i, c := range string(ed.Name()) {
		if i > 0 && unicode.IsUpper(c) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(c))
	}
	prefix := b.String() + "_"
	for i := range ed.Values().Len() {
		if !strings.HasPrefix(string(ed.Values().Get(i).Name()), prefix) {
			return ""
		}
	}
	return prefix
}

// EnumValue reads an enum value as a person writes it: its full name or its
// short name (the full name without the type's prefix), in any case, with
// "-" or " " for "_" (FORBID, forbid and OVERLAP_POLICY_FORBID are one
// value). It returns the full name.
func EnumValue(ed protoreflect.EnumDescriptor, text string) (string, bool) {
	norm := strings.ToUpper(strings.NewReplacer("-", "_", " ", "_").Replace(strings.TrimSpace(text)))
	if norm == "" {
		return "", false
	}
	if v := ed.Values().ByName(protoreflect.Name(norm)); v != nil {
		return string(v.Name()), true
	}
	if prefix := enumPrefix(ed); prefix != "" {
		if v := ed.Values().ByName(protoreflect.Name(prefix + norm)); v != nil {
			return string(v.Name()), true
		}
	}
	return "", false
}

// enumChoices lists an enum's short names, for an error.
func enumChoices(ed protoreflect.EnumDescriptor) string {
	prefix := enumPrefix(ed)
	var names []string
	for i := range ed.Values().Len() {
		name := strings.TrimPrefix(string(ed.Values().Get(i).Name()), prefix)
		if name == "UNSPECIFIED" {
			continue
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

// ParseReadableDuration reads a duration in protobuf's JSON form ("3600s",
// "1.5s"), Go's syntax ("1h", "90m", "1h30m", "250ms") or ISO 8601's
// ("PT1H", "P1DT2H", "PT0.5S"; a day is 24 hours, and years, months and
// weeks, whose length varies or is ambiguous, are refused) and returns it in
// protobuf's JSON form, seconds with up to nine decimals and "s".
func ParseReadableDuration(text string) (string, error) {
	s := strings.TrimSpace(text)
	if s == "" {
		return "", errors.New("empty duration: want one such as \"90s\", \"1h30m\" or \"PT1H30M\"")
	}
	neg := strings.HasPrefix(s, "-")
	body := strings.TrimPrefix(s, "-")
	if strings.HasPrefix(strings.ToUpper(body), "P") {
		d, err := parseISODuration(body)
		if err != nil {
			return "", fmt.Errorf("duration %q: %w", text, err)
		}
		if neg {
			d = -d
		}
		return protoDuration(d), nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return protoDuration(d), nil
	}
	// Protobuf's form beyond what time.Duration holds (about 292 years):
	// protojson reads it, and the limits are the validator's to say.
	if strings.HasSuffix(s, "s") {
		if _, err := strconv.ParseFloat(strings.TrimSuffix(s, "s"), 64); err == nil {
			return s, nil
		}
	}
	return "", fmt.Errorf("duration %q: want one such as \"90s\", \"1h30m\" or \"PT1H30M\"", text)
}

// protoDuration writes d as protobuf's JSON form does.
func protoDuration(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	sec, nanos := int64(d/time.Second), int64(d%time.Second)
	if nanos == 0 {
		return fmt.Sprintf("%s%ds", sign, sec)
	}
	frac := strings.TrimRight(fmt.Sprintf("%09d", nanos), "0")
	return fmt.Sprintf("%s%d.%ss", sign, sec, frac)
}

// parseISODuration reads an ISO 8601 duration of days, hours, minutes and
// seconds: "P" [n "D"] ["T" [n "H"] [n "M"] [n "S"]], the last number
// written may have a fraction.
func parseISODuration(s string) (time.Duration, error) {
	up := strings.ToUpper(s)
	rest := up[1:]
	if rest == "" || rest == "T" {
		return 0, errors.New("an ISO 8601 duration needs at least one number: PT1H, P1D")
	}
	datePart, timePart, hasT := strings.Cut(rest, "T")
	if hasT && timePart == "" {
		return 0, errors.New("nothing after T")
	}
	var total time.Duration
	read := func(part string, units map[byte]time.Duration, order string) error {
		last := -1
		for part != "" {
			i := strings.IndexFunc(part, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != ',' })
			if i <= 0 {
				return fmt.Errorf("want a number before each unit, at %q", part)
			}
			num, unit := strings.ReplaceAll(part[:i], ",", "."), part[i]
			pos := strings.IndexByte(order, unit)
			if _, ok := units[unit]; !ok || pos < 0 {
				switch unit {
				case 'Y', 'W':
					return fmt.Errorf("unit %c: years and weeks are not supported (write days or hours)", unit)
				case 'M':
					return errors.New("months are not supported: write days (P30D) or minutes after T (PT30M)")
				}
				return fmt.Errorf("unknown unit %q", string(unit))
			}
			if pos <= last {
				return fmt.Errorf("unit %c out of order", unit)
			}
			last = pos
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return fmt.Errorf("%q is not a number", num)
			}
			total += time.Duration(f * float64(units[unit]))
			part = part[i+1:]
		}
		return nil
	}
	if err := read(datePart, map[byte]time.Duration{'D': 24 * time.Hour}, "D"); err != nil {
		return 0, err
	}
	if err := read(timePart, map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second}, "HMS"); err != nil {
		return 0, err
	}
	return total, nil
}
