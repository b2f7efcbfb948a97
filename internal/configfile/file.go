package configfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// WorkerSection is the section of the file that only programs built with
// package worker read.
const WorkerSection = "worker"

// EnvName is the environment variable of the setting flag: "foo-bar" is
// SUNDIAL_FOO_BAR.
func EnvName(flag string) string {
	return "SUNDIAL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Path returns the file --config (or -config, --config=) names in args,
// whose first element is the program's name, else getenv's
// SUNDIAL_CONFIG. Scanning stops at "--".
func Path(args []string, getenv func(string) string) string {
	path := ""
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			continue
		}
		if hasValue {
			path = value
		} else if i+1 < len(args) {
			path = args[i+1]
			i++
		}
	}
	if path == "" {
		path = getenv(EnvName("config"))
	}
	return path
}

// File is a parsed settings file.
type File struct {
	// Path is the file's path; empty for no file.
	Path string
	// Values are the top level's settings, by key.
	Values map[string]string
	// Sections are the sections' settings, by section and key.
	Sections map[string]map[string]string
}

// Lookup returns key's value for the program of section: the section's,
// else the top level's.
func (f *File) Lookup(section, key string) (string, bool) {
	if v, ok := f.Sections[section][key]; ok {
		return v, true
	}
	v, ok := f.Values[key]
	return v, ok
}

// Source says where Lookup found key's value for section: the file, and
// the section when it was there.
func (f *File) Source(section, key string) string {
	if _, ok := f.Sections[section][key]; ok {
		return fmt.Sprintf("config file %s, section %q", f.Path, section)
	}
	return "config file " + f.Path
}

// Load reads and parses path; an empty path is an empty file. With errors
// in some keys it returns the file read from the others and every error.
func Load(path string) (*File, error) {
	f := &File{Path: path, Values: map[string]string{}, Sections: map[string]map[string]string{}}
	if path == "" {
		return f, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var doc map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	var errs []error
	for key, v := range doc {
		if m, ok := v.(map[string]any); ok {
			sec := map[string]string{}
			for k, sv := range m {
				s, err := value(sv)
				if err != nil {
					errs = append(errs, fmt.Errorf("config file %s: %s.%s: %w", path, key, k, err))
				}
				sec[k] = s
			}
			f.Sections[key] = sec
			continue
		}
		s, err := value(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("config file %s: %s: %w", path, key, err))
		}
		f.Values[key] = s
	}
	return f, errors.Join(errs...)
}

// value renders a YAML value as the flag would read it on the command
// line: a list is comma-separated.
func value(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", errors.New("no value (remove the key for the default)")
	case map[string]any:
		return "", errors.New("a mapping where a value is expected (sections hold flags, one level deep)")
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			if _, nested := e.([]any); nested {
				return "", errors.New("a list of lists")
			}
			s, err := value(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	default:
		return fmt.Sprint(v), nil
	}
}
