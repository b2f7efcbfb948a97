package apiserver

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/sundialhq/sundial/jobspec"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// maxDocumentBytes bounds a DefinitionDocument's text: a person's file of
// definitions, not a bulk import.
const maxDocumentBytes = 256 << 10

// yamlLine finds the line in a YAML syntax error ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`yaml: line (\d+):`)

// decodeDocument reads the definitions of doc with the rule of a file that
// `sundial jobs apply -f` reads (jobspec.DecodeFile), so that the API, the
// CLI and the console's YAML are one format. A document refused as a whole
// (no format, too long, no definition) is an error naming the field; the
// definitions that do not decode are problems, a FieldError each with the
// field as written and its line, and then specs is empty: a document is
// used whole or not at all.
func decodeDocument(doc *apiv1.DefinitionDocument) (specs []*sundialv1.JobSpec, problems []*sundialv1.FieldError, err error) {
	text := doc.GetText()
	switch {
	case doc.GetFormat() == apiv1.DocumentFormat_DOCUMENT_FORMAT_UNSPECIFIED:
		return nil, nil, errors.New("document.format: required (YAML or JSON)")
	case len(text) > maxDocumentBytes:
		return nil, nil, fmt.Errorf("document.text: %d bytes, at most %d", len(text), maxDocumentBytes)
	case strings.TrimSpace(text) == "":
		return nil, nil, errors.New("document.text: holds no definition")
	}
	first := strings.TrimLeftFunc(text, unicode.IsSpace)[0]
	if doc.GetFormat() == apiv1.DocumentFormat_DOCUMENT_FORMAT_JSON && first != '{' && first != '[' {
		return nil, nil, fmt.Errorf("document.text: JSON starts with { or [, not %q", first)
	}
	for spec, err := range jobspec.DecodeFile(strings.NewReader(text)) {
		var fe *jobspec.FileError
		switch {
		case errors.As(err, &fe):
			for _, p := range fe.Problems {
				field := p.Field
				if field == "" {
					field = "document"
				}
				problems = append(problems, &sundialv1.FieldError{Field: field, Reason: p.Reason, Line: uint32(max(p.Line, 0))})
			}
		case err != nil:
			// The text is not YAML or JSON from here on: reading ends.
			problems = append(problems, &sundialv1.FieldError{Field: "document", Reason: err.Error(), Line: syntaxLine(err)})
		default:
			specs = append(specs, spec)
		}
	}
	if len(problems) > 0 {
		return nil, problems, nil
	}
	if len(specs) == 0 {
		return nil, nil, errors.New("document.text: holds no definition")
	}
	return specs, nil, nil
}

// syntaxLine is the line a YAML syntax error names, or 0.
func syntaxLine(err error) uint32 {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n, perr := strconv.ParseUint(m[1], 10, 32)
	if perr != nil {
		return 0
	}
	return uint32(n)
}
