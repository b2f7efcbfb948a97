package sundialv1

import (
	"bufio"
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// docPath is the page whose JSON examples must equal the files in testdata.
const docPath = "../../../docs/job-definition.md"

// docExamplePrefix is where the doc's example markers point, relative to the
// repository root.
const docExamplePrefix = "proto/sundial/v1/"

// messageOf maps a directory under testdata to the message its files hold.
var messageOf = map[string]func() proto.Message{
	"jobspec":   func() proto.Message { return &JobSpec{} },
	"dagspec":   func() proto.Message { return &DagSpec{} },
	"trigger":   func() proto.Message { return &Trigger{} },
	"jobstatus": func() proto.Message { return &JobStatus{} },
}

// example is one JSON file under testdata.
type example struct {
	path string // relative to this package, "testdata/jobspec/at.json"
	data []byte
	new  func() proto.Message
}

// setup lists every example file; it fails the test if a file sits in a
// directory that names no message, so nothing escapes the checks below.
func setup(t *testing.T) []example {
	t.Helper()
	var out []example
	err := filepath.WalkDir("testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if filepath.Ext(p) != ".json" {
			return nil
		}
		dir := filepath.Base(filepath.Dir(p))
		newMsg, ok := messageOf[dir]
		require.Truef(t, ok, "%s: directory %q names no message; add it to messageOf", p, dir)
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		out = append(out, example{path: filepath.ToSlash(p), data: data, new: newMsg})
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, out)
	return out
}

func TestExamplesDecodeStrictly(t *testing.T) {
	t.Parallel()
	for _, ex := range setup(t) {
		t.Run(ex.path, func(t *testing.T) {
			t.Parallel()
			m := ex.new()
			require.NoError(t, Unmarshal(ContentTypeJSON, ex.data, m))
			assert.True(t, m.ProtoReflect().IsValid())
			assert.Empty(t, m.ProtoReflect().GetUnknown())
		})
	}
}

func TestExamplesRoundTrip(t *testing.T) {
	t.Parallel()
	for _, ex := range setup(t) {
		t.Run(ex.path, func(t *testing.T) {
			t.Parallel()
			want := ex.new()
			require.NoError(t, EncodingJSON.Unmarshal(ex.data, want))
			for _, enc := range []Encoding{EncodingProtobuf, EncodingJSON} {
				data, err := enc.Marshal(want)
				require.NoError(t, err, enc)
				got := ex.new()
				require.NoError(t, Unmarshal(enc.String(), data, got), enc)
				assert.Truef(t, proto.Equal(want, got), "%s round trip changed the message:\nwant %v\ngot  %v", enc, want, got)
			}
		})
	}
}

// docBlock is a fenced JSON block of the doc, with the example file its
// marker names ("" when it has none).
type docBlock struct {
	line int
	file string
	body string
}

var markerRE = regexp.MustCompile(`^<!-- example: (\S+) -->$`)

// readDocBlocks returns every ```json block of the doc.
func readDocBlocks(t *testing.T) []docBlock {
	t.Helper()
	f, err := os.Open(docPath)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })

	var (
		blocks  []docBlock
		marker  string // the marker on the line just before, if any
		current *docBlock
		body    strings.Builder
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case current != nil && line == "```":
			current.body = body.String()
			blocks = append(blocks, *current)
			current = nil
		case current != nil:
			body.WriteString(line)
			body.WriteByte('\n')
		case line == "```json":
			current = &docBlock{line: n, file: marker}
			body.Reset()
		}
		marker = ""
		if m := markerRE.FindStringSubmatch(line); m != nil {
			marker = m[1]
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, current, "unterminated ```json block in %s", docPath)
	return blocks
}

func TestDocExamplesEqualTestdata(t *testing.T) {
	t.Parallel()
	examples := setup(t)
	blocks := readDocBlocks(t)
	require.NotEmpty(t, blocks)

	shown := map[string]bool{}
	for _, b := range blocks {
		require.NotEmptyf(t, b.file, "%s:%d: a ```json block needs an <!-- example: path --> marker on the line before it, naming its file under %stestdata", docPath, b.line, docExamplePrefix)
		rel, ok := strings.CutPrefix(b.file, docExamplePrefix)
		require.Truef(t, ok, "%s:%d: example %q is not under %s", docPath, b.line, b.file, docExamplePrefix)
		data, err := os.ReadFile(filepath.FromSlash(rel))
		require.NoErrorf(t, err, "%s:%d", docPath, b.line)

		var inDoc, inFile any
		require.NoErrorf(t, json.Unmarshal([]byte(b.body), &inDoc), "%s:%d: invalid JSON", docPath, b.line)
		require.NoError(t, json.Unmarshal(data, &inFile), rel)
		assert.Equalf(t, inFile, inDoc, "%s:%d differs from %s: copy the file into the doc", docPath, b.line, rel)
		shown[rel] = true
	}
	for _, ex := range examples {
		assert.Truef(t, shown[ex.path], "%s is not shown in %s", ex.path, docPath)
	}
}

// TestCompleteExampleSetsEveryField keeps the doc's "complete" example
// complete: every field of JobSpec, and of every message it contains, is
// written in it (exactly one field of each oneof), so a field added to the
// schema must be added to the example and explained.
func TestCompleteExampleSetsEveryField(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/jobspec/cron-http.json")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))

	missing := missingFields((&JobSpec{}).ProtoReflect().Descriptor(), doc, "")
	// A field valid only with another variant than the complete
	// example's (routing.shards, with SHARDED) is shown by the example of
	// that variant instead.
	var unshown []string
	for _, field := range missing {
		if !variantOnly[field] || !shownByAnotherJobExample(t, field) {
			unshown = append(unshown, field)
		}
	}
	assert.Empty(t, unshown, "fields of JobSpec that neither the complete example nor another job example writes")
}

// variantOnly are the JobSpec fields that no definition can set beside the
// complete example's choices, each valid only with another variant.
var variantOnly = map[string]bool{
	"routing.shards": true, // with ROUTING_STRATEGY_SHARDED; the example is FIXED
}

// shownByAnotherJobExample reports whether a job example other than the
// complete one writes field (a dotted path of JSON names or field names).
func shownByAnotherJobExample(t *testing.T, field string) bool {
	t.Helper()
	files, err := filepath.Glob("testdata/jobspec/*.json")
	require.NoError(t, err)
	for _, f := range files {
		if filepath.Base(f) == "cron-http.json" {
			continue
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(data, &doc))
		if !slices.Contains(missingFields((&JobSpec{}).ProtoReflect().Descriptor(), doc, ""), field) {
			return true
		}
	}
	return false
}

// missingFields lists the fields of md that the JSON object obj does not
// write, recursing into message fields (well-known types excepted: they are
// JSON scalars).
func missingFields(md protoreflect.MessageDescriptor, obj map[string]any, prefix string) []string {
	var missing []string
	oneofs := map[protoreflect.FullName]int{}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := prefix + string(fd.Name())
		v, ok := obj[fd.JSONName()]
		if !ok {
			v, ok = obj[string(fd.Name())]
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if !ok {
				oneofs[od.FullName()] += 0 // known, possibly with no member set
				continue                   // a oneof needs one member, checked below
			}
			oneofs[od.FullName()]++
		}
		if !ok {
			missing = append(missing, name)
			continue
		}
		switch {
		case fd.IsMap():
			if m, _ := v.(map[string]any); len(m) == 0 {
				missing = append(missing, name+" (empty map)")
			}
		case fd.IsList():
			if l, _ := v.([]any); len(l) == 0 {
				missing = append(missing, name+" (empty list)")
			}
		case fd.Message() != nil && !isWellKnown(fd.Message()):
			sub, _ := v.(map[string]any)
			missing = append(missing, missingFields(fd.Message(), sub, name+".")...)
		}
	}
	for name, n := range oneofs {
		if n != 1 {
			missing = append(missing, prefix+string(name.Name())+" (oneof: want exactly one member)")
		}
	}
	slices.Sort(missing)
	return missing
}

func isWellKnown(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile().Package() == "google.protobuf"
}

func TestMissingFieldsDetectsGaps(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{
		"id": "x",
		"schedule": {"cron": {}, "interval": {"every": "1s"}},
		"target": {},
		"labels": {}
	}`), &doc))
	missing := missingFields((&JobSpec{}).ProtoReflect().Descriptor(), doc, "")
	for _, want := range []string{
		"owner_team",
		"labels (empty map)",
		"schedule.cron.expression",
		"schedule.kind (oneof: want exactly one member)",
		"schedule.interval.anchor (oneof: want exactly one member)",
		"target.kind (oneof: want exactly one member)",
		"retry",
	} {
		assert.Contains(t, missing, want)
	}
	assert.NotContains(t, missing, "id")
}

func TestExampleDirectoriesNameMessages(t *testing.T) {
	t.Parallel()
	for dir, newMsg := range messageOf {
		name := strings.ToLower(string(newMsg().ProtoReflect().Descriptor().Name()))
		assert.Equal(t, name, dir, "testdata/%s holds %s", dir, name)
		_, err := os.Stat(path.Join("testdata", dir))
		assert.NoError(t, err)
	}
}
