package apiserver

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func TestDecodeDocument(t *testing.T) {
	t.Parallel()
	const (
		yamlFormat = apiv1.DocumentFormat_DOCUMENT_FORMAT_YAML
		jsonFormat = apiv1.DocumentFormat_DOCUMENT_FORMAT_JSON
	)
	good := "id: dev.a\nownerTeam: dev\nschedule:\n  cron:\n    expression: \"0 * * * * *\"\n  timeZone: UTC\ntarget:\n  handler:\n    name: dev.hello\noverlapPolicy: forbid\ntimeout: 1m30s\n"
	cases := []struct {
		name     string
		doc      *apiv1.DefinitionDocument
		ids      []string                // the definitions read
		problems []*sundialv1.FieldError // or these, each with its line
		refused  string                  // or the document refused whole, naming this
	}{
		{name: "YAML in the readable forms of a file", doc: &apiv1.DefinitionDocument{Text: good, Format: yamlFormat}, ids: []string{"dev.a"}},
		{name: "JSON", doc: &apiv1.DefinitionDocument{Text: `{"id": "dev.b", "ownerTeam": "dev"}`, Format: jsonFormat}, ids: []string{"dev.b"}},
		{name: "YAML documents and lists", doc: &apiv1.DefinitionDocument{Text: "- id: dev.a\n- id: dev.b\n---\nid: dev.c\n", Format: yamlFormat},
			ids: []string{"dev.a", "dev.b", "dev.c"}},
		{name: "an enum value that does not exist names its field and line",
			doc:      &apiv1.DefinitionDocument{Text: strings.Replace(good, "forbid", "sometimes", 1), Format: yamlFormat},
			problems: []*sundialv1.FieldError{{Field: "overlapPolicy", Line: 10}}},
		{name: "every problem of every definition, and no definition is used",
			doc:      &apiv1.DefinitionDocument{Text: "id: dev.a\ntimeout: soon\n---\nid: dev.b\nschedul: {}\n", Format: yamlFormat},
			problems: []*sundialv1.FieldError{{Field: "timeout", Line: 2}, {Field: "schedul", Line: 5}}},
		{name: "a syntax error names the document and its line",
			doc:      &apiv1.DefinitionDocument{Text: "id: dev.a\nschedule:\n  cron: [\n", Format: yamlFormat},
			problems: []*sundialv1.FieldError{{Field: "document", Line: 3}}},
		{name: "a definition that is not an object", doc: &apiv1.DefinitionDocument{Text: "just words\n", Format: yamlFormat},
			problems: []*sundialv1.FieldError{{Field: "document", Line: 1}}},
		{name: "no format", doc: &apiv1.DefinitionDocument{Text: good}, refused: "document.format: required"},
		{name: "YAML said to be JSON", doc: &apiv1.DefinitionDocument{Text: good, Format: jsonFormat}, refused: "document.text: JSON starts with { or ["},
		{name: "empty", doc: &apiv1.DefinitionDocument{Text: " \n", Format: yamlFormat}, refused: "document.text: holds no definition"},
		{name: "only empty documents", doc: &apiv1.DefinitionDocument{Text: "---\n---\n", Format: yamlFormat}, refused: "document.text: holds no definition"},
		{name: "too long", doc: &apiv1.DefinitionDocument{Text: good + "description: " + strings.Repeat("x", maxDocumentBytes) + "\n", Format: yamlFormat},
			refused: "document.text: 262"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			specs, problems, err := decodeDocument(c.doc)
			if c.refused != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.refused)
				assert.Empty(t, specs)
				return
			}
			require.NoError(t, err)
			var ids []string
			for _, s := range specs {
				ids = append(ids, s.GetId())
			}
			assert.Equal(t, c.ids, ids)
			require.Len(t, problems, len(c.problems), "problems: %v", problems)
			for i, want := range c.problems {
				assert.Equal(t, want.GetField(), problems[i].GetField(), "problem %d: %v", i, problems[i])
				assert.Equal(t, want.GetLine(), problems[i].GetLine(), "problem %d: %v", i, problems[i])
				assert.NotEmpty(t, problems[i].GetReason())
			}
		})
	}
	// The readable forms are rewritten to the protobuf form.
	specs, _, err := decodeDocument(&apiv1.DefinitionDocument{Text: good, Format: yamlFormat})
	require.NoError(t, err)
	require.Len(t, specs, 1)
	assert.Equal(t, sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID, specs[0].GetOverlapPolicy())
	assert.Equal(t, int64(90), specs[0].GetTimeout().GetSeconds())
}
