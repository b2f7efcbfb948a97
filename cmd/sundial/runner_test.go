package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExecAllowFlag(t *testing.T) {
	t.Parallel()
	exe, err := execTarget(nil, 0)
	require.NoError(t, err)
	assert.Nil(t, exe, "no --exec-allow: exec targets are refused")

	exe, err = execTarget([]string{"report=/usr/local/bin/report", " cleanup=/opt/cleanup.sh"}, 1024)
	require.NoError(t, err)
	assert.NotNil(t, exe)

	_, err = execTarget([]string{"report", "a=relative/path", "b=/x", "b=/y", "bad name=/z"}, -1)
	require.Error(t, err)
	for _, want := range []string{
		`--exec-allow "report": want name=/absolute/path`,
		`--exec-allow "b=/y": b is allowed twice`,
	} {
		assert.ErrorContains(t, err, want)
	}
	_, err = execTarget([]string{"a=relative/path", "bad name=/z"}, -1)
	for _, want := range []string{`Allowed["a"]: "relative/path" is not an absolute path`, `Allowed["bad name"]: name has characters`, "MaxOutput: -1 is negative"} {
		assert.ErrorContains(t, err, want)
	}
}

func TestSecretsDirFlag(t *testing.T) {
	t.Parallel()
	s, err := secretsDir("")
	require.NoError(t, err)
	assert.Nil(t, s, "no --secrets-dir: secret references do not resolve")

	s, err = secretsDir(t.TempDir())
	require.NoError(t, err)
	assert.NotNil(t, s)

	_, err = secretsDir(filepath.Join(t.TempDir(), "missing"))
	assert.ErrorContains(t, err, "--secrets-dir: ")
}
