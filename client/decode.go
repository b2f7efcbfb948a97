package client

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"unicode"

	"go.yaml.in/yaml/v3"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// DecodeSpecs reads job definitions from r as they come, so an input of any
// size is never held whole. It accepts JSON arrays of JobSpecs, a stream of
// JSON JobSpecs (one per line or simply concatenated), or YAML documents
// separated by "---", each a JobSpec or a list of them (YAML fields are
// the JSON ones: ownerTeam or owner_team). The first character decides:
// '[' or '{' is JSON, anything else YAML. Every definition is decoded
// strictly (protojson: unknown fields are errors).
//
// A definition that does not decode is yielded as an error naming its
// position ("definition 3: ...") and reading goes on; input that is not
// JSON or YAML at all ends the sequence with its error.
func DecodeSpecs(r io.Reader) iter.Seq2[*sundialv1.JobSpec, error] {
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
		d := &specDecoder{yield: yield}
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

type specDecoder struct {
	yield func(*sundialv1.JobSpec, error) bool
	n     int // definitions seen so far
}

// one decodes a definition from its JSON; false means the caller stops.
func (d *specDecoder) one(raw []byte) bool {
	d.n++
	spec := &sundialv1.JobSpec{}
	if err := sundialv1.EncodingJSON.Unmarshal(raw, spec); err != nil {
		return d.yield(nil, fmt.Errorf("definition %d: %w", d.n, err))
	}
	return d.yield(spec, nil)
}

func (d *specDecoder) fail(err error) {
	d.yield(nil, fmt.Errorf("read job definitions after definition %d: %w", d.n, err))
}

func (d *specDecoder) jsonArrays(dec *json.Decoder) {
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
			if !d.one(raw) {
				return
			}
		}
		if _, err := dec.Token(); err != nil { // the closing bracket
			d.fail(err)
			return
		}
	}
}

func (d *specDecoder) jsonStream(dec *json.Decoder) {
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
		if !d.one(raw) {
			return
		}
	}
}

func (d *specDecoder) yamlDocuments(dec *yaml.Decoder) {
	for {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			d.fail(err)
			return
		}
		items := []any{doc}
		if list, ok := doc.([]any); ok {
			items = list
		}
		for _, item := range items {
			if item == nil {
				continue // an empty document
			}
			raw, err := json.Marshal(item)
			if err != nil {
				d.n++
				if !d.yield(nil, fmt.Errorf("definition %d: not expressible as JSON: %w", d.n, err)) {
					return
				}
				continue
			}
			if !d.one(raw) {
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
