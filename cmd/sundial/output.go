package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/urfave/cli/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Every command that reads prints in one of three forms, chosen with -o:
// a table for people (the default), JSON (one object a line, for jq and
// scripts) or YAML (one document per object). This file is the one place
// that writes the two machine forms, so every command spells them alike.

// Output forms of -o.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// outputFlag is -o/--output of a command that reads.
func outputFlag() cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: outputTable,
		Usage: "table, json (one JSON object a line) or yaml (one YAML document per object)", Sources: envVar("output")}
}

// outputOf reads -o; "text" is accepted for table, as earlier releases
// spelled it.
func outputOf(cmd *cli.Command) (string, error) {
	switch o := cmd.String("output"); o {
	case outputTable, "text":
		return outputTable, nil
	case outputJSON, outputYAML:
		return o, nil
	default:
		return "", fmt.Errorf("--output %q: want table, json or yaml", o)
	}
}

// emitter writes values in a machine form (json or yaml); table output is
// each command's own.
type emitter struct {
	w    io.Writer
	form string
}

// structured reports whether the command prints values rather than its
// table.
func (e emitter) structured() bool { return e.form == outputJSON || e.form == outputYAML }

// emit writes v: a protobuf message in its JSON mapping, anything else as
// encoding/json writes it.
func (e emitter) emit(v any) error {
	var (
		b   []byte
		err error
	)
	if m, ok := v.(proto.Message); ok {
		b, err = protojson.Marshal(m)
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	if e.form == outputJSON {
		_, err = fmt.Fprintf(e.w, "%s\n", b)
		return err
	}
	// JSON is YAML: decode it as YAML and write it back in block style,
	// keeping the fields' order.
	var node yaml.Node
	if err := yaml.Unmarshal(b, &node); err != nil {
		return err
	}
	plainStyle(&node)
	out, err := yaml.Marshal(&node)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.w, "---\n%s", out)
	return err
}

// plainStyle clears the flow style and the quoting the JSON input gave
// every node, so that the YAML reads as block YAML.
func plainStyle(n *yaml.Node) {
	n.Style &^= yaml.FlowStyle
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		n.Style &^= yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		plainStyle(c)
	}
}

// must returns v of a call whose error was checked before (outputOf after
// the command's flag checks).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// emitAll emits each item as view makes it.
func emitAll[T, V any](out emitter, items []T, view func(T) V) error {
	for _, it := range items {
		if err := out.emit(view(it)); err != nil {
			return err
		}
	}
	return nil
}

// errs is err as the list of flag problems withStore takes.
func errs(err error) []error {
	if err == nil {
		return nil
	}
	return []error{err}
}
