package client_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/client"
)

func decodeAll(t *testing.T, in string) (ids []string, errs []string) {
	t.Helper()
	for spec, err := range client.DecodeSpecs(strings.NewReader(in)) {
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		ids = append(ids, spec.GetId())
	}
	return ids, errs
}

func TestDecodeSpecs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		ids  []string
		errs []string
	}{
		{name: "empty", in: " \n"},
		{name: "JSON array", in: `[{"id":"a"},{"id":"b"}]`, ids: []string{"a", "b"}},
		{name: "JSON arrays one after the other", in: "[{\"id\":\"a\"}]\n[{\"id\":\"b\"}]", ids: []string{"a", "b"}},
		{name: "JSON lines", in: "{\"id\":\"a\"}\n{\"id\":\"b\"}\n", ids: []string{"a", "b"}},
		{name: "JSON unknown field, then more", in: `{"id":"a","ownerTeem":"x"} {"id":"b"}`, ids: []string{"b"},
			errs: []string{"definition 1:", "ownerTeem"}},
		{name: "JSON broken", in: `[{"id":"a"}, {"id":`, ids: []string{"a"}, errs: []string{"after definition 1"}},
		{name: "YAML documents and lists", in: "id: a\nownerTeam: t\n---\n- id: b\n- id: c\n---\n", ids: []string{"a", "b", "c"}},
		{name: "YAML with snake case and a duration", in: "id: a\nowner_team: t\nschedule:\n  interval:\n    every: 90s\n", ids: []string{"a"}},
		{name: "YAML typo, with its line and a suggestion", in: "id: a\novertapPolicy: x\n", ids: nil, errs: []string{"definition 1:", "line 2: overtapPolicy: unknown field (did you mean overlapPolicy?)"}},
		{name: "YAML readable forms", in: "id: a\noverlapPolicy: forbid\ntimeout: 1h\nschedule:\n  interval:\n    every: PT90M\n", ids: []string{"a"}},
		{name: "JSON readable forms", in: `{"id":"a","overlapPolicy":"FORBID","timeout":"PT1H"}`, ids: []string{"a"}},
		{name: "YAML every problem at once", in: "id: a\noverlapPolicy: sometimes\ntimeout: 90\n", errs: []string{"definition 1: 2 problems:", "line 2: overlapPolicy", "line 3: timeout"}},
		{name: "YAML unknown field", in: "id: a\nowner: t\n---\nid: b\n", ids: []string{"b"}, errs: []string{"definition 1:", "owner"}},
		{name: "not YAML", in: "id: [a\n", errs: []string{"read job definitions"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ids, errs := decodeAll(t, tc.in)
			assert.Equal(t, tc.ids, ids)
			if len(tc.errs) == 0 {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, "%v", errs)
			for _, want := range tc.errs {
				assert.Contains(t, errs[0], want)
			}
		})
	}
}

// FuzzDecodeSpecs: any input ends the sequence without a panic, and every
// element is either a definition or an error.
func FuzzDecodeSpecs(f *testing.F) {
	for _, seed := range []string{`[{"id":"a"}]`, "{\"id\":\"a\"}\n{}", "id: a\n---\n- id: b\n", "[", "- [1, {a: b}]"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for spec, err := range client.DecodeSpecs(strings.NewReader(in)) {
			if (spec == nil) == (err == nil) {
				t.Fatalf("want a definition or an error, got %v and %v", spec, err)
			}
		}
	})
}
