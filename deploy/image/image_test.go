package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// staticSundial builds cmd/sundial the way `make image` does and returns
// its path.
func staticSundial(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sundial")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "github.com/sundialhq/sundial/cmd/sundial")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", b)
	return out
}

// imageFiles reads every entry of the image's layers, by path without the
// leading slash.
func imageFiles(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	headers, bodies := map[string]*tar.Header{}, map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		require.NoError(t, err)
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
			headers[name] = h
			body, err := io.ReadAll(tr)
			require.NoError(t, err)
			bodies[name] = body
		}
		require.NoError(t, rc.Close())
	}
	return headers, bodies
}

func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image holds a Linux binary built on this host")
	}
	bin := staticSundial(t)
	out := filepath.Join(t.TempDir(), "sundial-image.tar")
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"-binary", bin, "-out", out, "-tag", "sundial:test", "-created", "2026-01-02T03:04:05Z", "-revision", "abc"}, &stdout))
	t.Log(strings.TrimSpace(stdout.String()))

	img, err := tarball.ImageFromPath(out, nil)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	headers, bodies := imageFiles(t, img)

	t.Run("runs as a non-root user that /etc/passwd names", func(t *testing.T) {
		assert.Equal(t, "65532:65532", cf.Config.User)
		var found bool
		sc := bufio.NewScanner(bytes.NewReader(bodies["etc/passwd"]))
		for sc.Scan() {
			f := strings.Split(sc.Text(), ":")
			require.Len(t, f, 7, "passwd line %q", sc.Text())
			if f[2] == "65532" {
				found = true
				assert.Equal(t, "sundial", f[0])
				assert.Equal(t, "/home/sundial", f[5])
			}
		}
		assert.True(t, found, "uid 65532 missing from /etc/passwd:\n%s", bodies["etc/passwd"])
		require.Contains(t, headers, "home/sundial")
		assert.Equal(t, UID, headers["home/sundial"].Uid, "the user's home belongs to the user")
	})

	t.Run("has no shell and no executable but the entrypoint", func(t *testing.T) {
		for _, p := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/sh", "bin", "sbin", "usr/bin"} {
			assert.NotContains(t, headers, p)
		}
		var executables []string
		for name, h := range headers {
			if h.Typeflag != tar.TypeDir && h.Mode&0o111 != 0 {
				executables = append(executables, "/"+name)
			}
		}
		assert.Equal(t, []string{BinaryPath}, executables)
	})

	t.Run("the entrypoint exists and is static", func(t *testing.T) {
		require.Equal(t, []string{BinaryPath}, cf.Config.Entrypoint)
		name := strings.TrimPrefix(BinaryPath, "/")
		require.Contains(t, bodies, name)
		f, err := elf.NewFile(bytes.NewReader(bodies[name]))
		require.NoError(t, err)
		require.NoError(t, checkStatic(f))
		assert.Equal(t, runtime.GOARCH, cf.Architecture)
		assert.Equal(t, "linux", cf.OS)

		// And it starts: it needs nothing from the host.
		extracted := filepath.Join(t.TempDir(), "sundial")
		require.NoError(t, os.WriteFile(extracted, bodies[name], 0o755))
		b, err := exec.Command(extracted, "version").CombinedOutput()
		require.NoError(t, err, "%s", b)
		assert.Contains(t, string(b), "sundial ")
	})

	t.Run("carries the CA bundle and the labels", func(t *testing.T) {
		assert.Positive(t, countCertificates(bodies["etc/ssl/certs/ca-certificates.crt"]))
		assert.Equal(t, "abc", cf.Config.Labels["org.opencontainers.image.revision"])
		assert.Equal(t, "2026-01-02T03:04:05Z", cf.Config.Labels["org.opencontainers.image.created"])
		assert.Equal(t, "2026-01-02T03:04:05Z", cf.Created.UTC().Format(time.RFC3339))
	})

	t.Run("the same inputs give the same digest", func(t *testing.T) {
		cfg := Config{Binary: bin, CABundle: "/etc/ssl/certs/ca-certificates.crt", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Labels: cf.Config.Labels}
		a, err := Build(cfg)
		require.NoError(t, err)
		b, err := Build(cfg)
		require.NoError(t, err)
		da, err := a.Digest()
		require.NoError(t, err)
		db, err := b.Digest()
		require.NoError(t, err)
		assert.Equal(t, da, db)
		// A docker-load tarball keeps the config and the layers, not the
		// manifest: compare the config, which names the layers' digests.
		written, err := img.ConfigName()
		require.NoError(t, err)
		built, err := a.ConfigName()
		require.NoError(t, err)
		assert.Equal(t, built, written, "the tarball holds the image Build makes")
	})
}

func TestBuildRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	noCerts := filepath.Join(dir, "empty.pem")
	require.NoError(t, os.WriteFile(noCerts, []byte("not a certificate\n"), 0o644))
	// The host's shell is a dynamically linked executable.
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	sh, err = filepath.EvalSymlinks(sh)
	require.NoError(t, err)
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"every missing field", Config{}, []string{"binary: required", "ca-bundle: required", "created: required"}},
		{"a dynamically linked binary", Config{Binary: sh, CABundle: "/etc/ssl/certs/ca-certificates.crt", Created: created}, []string{"binary " + sh + ": dynamically linked"}},
		{"a file that is not an executable", Config{Binary: noCerts, CABundle: "/etc/ssl/certs/ca-certificates.crt", Created: created}, []string{"not an ELF executable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Build(tt.cfg)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
