package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/internal/configfile"
	"github.com/sundialhq/sundial/internal/connect"
)

// configFile is the YAML file --config names. Its keys are the flags'
// names; a key at the top level sets that flag of every command that has it,
// and a key under a section named after a command ("runner", "dag engine")
// sets it for that command only, winning over the top level:
//
//	kafka-brokers: [kafka-1:9093, kafka-2:9093]
//	kafka-sasl-mechanism: SCRAM-SHA-512
//	runner:
//	  concurrency: 256
//
// A flag on the command line wins over the environment, which wins over the
// file, which wins over the default. Unknown keys are an error naming them;
// the section "worker" is the worker SDK's (package worker), which checks
// it. The rule's home is package configfile.
type configFile struct {
	path     string
	values   map[string]string            // flag name -> value
	sections map[string]map[string]string // command path -> flag name -> value
}

// configPath returns the file --config names in args, else SUNDIAL_CONFIG
// (configfile.Path). The file is read before the command line is parsed:
// the flags' value sources need it then.
func configPath(args []string) string { return configfile.Path(args, os.Getenv) }

// loadConfigFile reads and parses path (configfile.Load); an empty path is
// an empty file.
func loadConfigFile(path string) (*configFile, error) {
	f, err := configfile.Load(path)
	if f == nil {
		return nil, err
	}
	return &configFile{path: f.Path, values: f.Values, sections: f.Sections}, err
}

func (c *configFile) file() *configfile.File {
	return &configfile.File{Path: c.path, Values: c.values, Sections: c.sections}
}

// walkPaths calls fn for every command of the tree, root included, with its
// path below the root ("runner", "dag engine"; "" for the root). The tree
// need not have run: the path is built from the names, not from parents.
func walkPaths(root *cli.Command, fn func(cmd *cli.Command, path string)) {
	var visit func(cmd *cli.Command, path []string)
	visit = func(cmd *cli.Command, path []string) {
		fn(cmd, strings.Join(path, " "))
		for _, sub := range cmd.Commands {
			visit(sub, append(slices.Clip(path), sub.Name))
		}
	}
	visit(root, nil)
}

// attach adds the file as the last value source of every flag of the tree
// (after the environment) and reports keys that name no flag or command.
func (c *configFile) attach(root *cli.Command) error {
	known := map[string]bool{}
	commands := map[string]map[string]bool{}
	walkPaths(root, func(cmd *cli.Command, p string) {
		flags := map[string]bool{}
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			if name == "help" || name == "config" {
				continue
			}
			flags[name], known[name] = true, true
			if chain := sourcesOf(f); chain != nil {
				chain.Chain = append(chain.Chain, &configSource{file: c, command: p, flag: name})
			}
		}
		if p != "" {
			commands[p] = flags
		}
	})
	var errs []error
	for _, k := range sortedKeys(c.values) {
		if !known[k] {
			errs = append(errs, fmt.Errorf("config file %s: unknown key %q (not a flag of any command)", c.path, k))
		}
	}
	for _, s := range sortedKeys(c.sections) {
		if s == configfile.WorkerSection {
			continue // the worker SDK's settings (package worker), checked by it
		}
		flags, ok := commands[s]
		if !ok {
			errs = append(errs, fmt.Errorf("config file %s: unknown section %q (not a command; write a command's path, e.g. \"dag engine\")", c.path, s))
			continue
		}
		for _, k := range sortedKeys(c.sections[s]) {
			if !flags[k] {
				errs = append(errs, fmt.Errorf("config file %s: unknown key %q in section %q (not a flag of sundial %s)", c.path, k, s, s))
			}
		}
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sourcesOf returns the value sources of a flag of a type this binary uses.
func sourcesOf(f cli.Flag) *cli.ValueSourceChain {
	switch f := f.(type) {
	case *cli.StringFlag:
		return &f.Sources
	case *cli.StringSliceFlag:
		return &f.Sources
	case *cli.BoolFlag:
		return &f.Sources
	case *cli.IntFlag:
		return &f.Sources
	case *cli.UintFlag:
		return &f.Sources
	case *cli.FloatFlag:
		return &f.Sources
	case *cli.DurationFlag:
		return &f.Sources
	case *cli.TimestampFlag:
		return &f.Sources
	}
	return nil
}

// configSource is one flag's value in the file: its command's section
// first, then the top level.
type configSource struct {
	file          *configFile
	command, flag string
}

func (s *configSource) Lookup() (string, bool) { return s.file.file().Lookup(s.command, s.flag) }

// String says where the value came from, for errors and config print.
func (s *configSource) String() string { return s.file.file().Source(s.command, s.flag) }

func (s *configSource) GoString() string {
	return fmt.Sprintf("&configSource{command:%q, flag:%q}", s.command, s.flag)
}

func configCommand(file *configFile) *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "show the configuration a command would run with",
		Commands: []*cli.Command{{
			Name:      "print",
			Usage:     "print each setting of a command, where it comes from (environment, config file, default), with passwords masked",
			ArgsUsage: "[COMMAND...]",
			Description: `Without a command, prints the connection settings every command shares
(Kafka, Cassandra, Redis). A flag given on a command's own line wins over
everything shown here.

Examples:
  sundial config print --config /etc/sundial/sundial.yaml
  SUNDIAL_CONFIG=/etc/sundial/sundial.yaml sundial config print dag engine`,
			Action: func(_ context.Context, cmd *cli.Command) error {
				if file.path != "" {
					fmt.Fprintf(cmd.Root().Writer, "# config file %s\n", file.path)
				}
				return printConfig(cmd.Root(), file, cmd.Args().Slice(), cmd.Root().Writer)
			},
		}},
	}
}

// printConfig writes the effective settings of the command at path (every
// connection flag when path is empty).
func printConfig(root *cli.Command, file *configFile, path []string, w io.Writer) error {
	target := root
	for _, name := range path {
		next := target.Command(name)
		if next == nil {
			return fmt.Errorf("config print: no command %q in sundial %s", name, strings.Join(path, " "))
		}
		target = next
	}
	var flags []cli.Flag
	if len(path) == 0 {
		// Fresh flags, reading the file's top level only.
		flags = slices.Concat(kafkaFlags(), cassandraStoreFlags(), redisFlags())
		for _, f := range flags {
			if chain := sourcesOf(f); chain != nil {
				chain.Chain = append(chain.Chain, &configSource{file: file, flag: f.Names()[0]})
			}
		}
	} else {
		flags = target.Flags
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
	for _, f := range flags {
		name := f.Names()[0]
		if name == "help" || name == "config" {
			continue
		}
		value, source := "", "default"
		if chain := sourcesOf(f); chain != nil {
			if v, src, ok := chain.LookupWithSource(); ok {
				value, source = v, src.String()
			}
		}
		if source == "default" {
			if d, ok := f.(cli.DocGenerationFlag); ok {
				value = d.GetValue()
				if u, err := strconv.Unquote(value); err == nil {
					value = u
				}
			}
		}
		if secretFlags[name] {
			value = connect.Secret(value).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, value, source)
	}
	return tw.Flush()
}
