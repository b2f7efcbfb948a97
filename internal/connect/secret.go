package connect

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// Secret is a password or token. It prints, formats and logs as a mask, so
// that a configuration dumped by mistake does not leak it.
type Secret string

const mask = "********"

// String masks the secret: empty stays empty, so that "not set" shows.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return mask
}

// GoString masks the secret in %#v.
func (s Secret) GoString() string { return fmt.Sprintf("connect.Secret(%q)", s.String()) }

// LogValue masks the secret in slog records.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText masks the secret in JSON, YAML and every text encoding, so a
// configuration struct logged whole does not leak it.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Reveal returns the secret itself, for the driver that sends it.
func (s Secret) Reveal() string { return string(s) }

// ReadSecret returns value, or the content of file (one trailing newline
// removed) when value is empty. Setting both is an error: which one would
// win is not obvious to the operator. name is the setting in errors.
func ReadSecret(name string, value Secret, file string) (Secret, error) {
	if file == "" {
		return value, nil
	}
	if value != "" {
		return "", fmt.Errorf("%s and %s-file: set one, not both", name, name)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		// The error names the file, never its content.
		return "", fmt.Errorf("%s-file: %w", name, err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%s-file %s: empty", name, file)
	}
	return Secret(s), nil
}
