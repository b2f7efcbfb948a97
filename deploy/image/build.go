package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths and the account inside the image.
const (
	BinaryPath   = "/usr/local/bin/sundial"
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	HomeDir      = "/home/sundial"
	UserName     = "sundial"
	// UID and GID of the user, the "nonroot" id of distroless images, so
	// that a pod's securityContext works with either image.
	UID = 65532
	GID = 65532
)

// Config is what one image is built from.
type Config struct {
	// Binary is the path of a statically linked sundial binary for Linux
	// (CGO_ENABLED=0). The image's architecture is the binary's.
	Binary string
	// CABundle is the path of a PEM file of trusted CA certificates, copied
	// to CABundlePath, where Go's crypto/x509 looks on Linux.
	CABundle string
	// Created is the time of the image and of every file in it. Use the
	// commit time to have the same digest from the same sources.
	Created time.Time
	// Labels are the image's OCI annotations (org.opencontainers.image.*).
	Labels map[string]string
}

// Validate reports every missing field.
func (c Config) Validate() error {
	var bad []error
	if c.Binary == "" {
		bad = append(bad, errors.New("binary: required"))
	}
	if c.CABundle == "" {
		bad = append(bad, errors.New("ca-bundle: required"))
	}
	if c.Created.IsZero() {
		bad = append(bad, errors.New("created: required"))
	}
	return errors.Join(bad...)
}

// Build builds the image of cfg.
func Build(cfg Config) (v1.Image, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(cfg.Binary)
	if err != nil {
		return nil, fmt.Errorf("binary: %w", err)
	}
	arch, err := staticArch(bin)
	if err != nil {
		return nil, fmt.Errorf("binary %s: %w", cfg.Binary, err)
	}
	ca, err := os.ReadFile(cfg.CABundle)
	if err != nil {
		return nil, fmt.Errorf("ca-bundle: %w", err)
	}
	if n := countCertificates(ca); n == 0 {
		return nil, fmt.Errorf("ca-bundle %s: no PEM certificate in it", cfg.CABundle)
	}
	layerTar, err := rootFS(bin, ca, cfg.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: cfg.Created}, CreatedBy: "sundial deploy/image", Comment: "sundial binary, CA bundle, user " + UserName},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: cfg.Created}
	cf.Config.User = fmt.Sprintf("%d:%d", UID, GID)
	cf.Config.Entrypoint = []string{BinaryPath}
	cf.Config.Cmd = []string{"--help"}
	cf.Config.WorkingDir = HomeDir
	cf.Config.Env = imageEnv()
	cf.Config.Labels = cfg.Labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return img, nil
}

// staticArch returns the image architecture of a Linux ELF executable, or
// an error when it needs a dynamic loader or shared libraries.
func staticArch(bin []byte) (string, error) {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return "", fmt.Errorf("not an ELF executable: %w", err)
	}
	defer func() { _ = f.Close() }()
	if err := checkStatic(f); err != nil {
		return "", err
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	default:
		return "", fmt.Errorf("machine %s: not one the image is built for (amd64, arm64)", f.Machine)
	}
}

// checkStatic fails for an executable that the kernel cannot start without
// a dynamic loader (PT_INTERP) or that names shared libraries (DT_NEEDED).
func checkStatic(f *elf.File) error {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked (it has an interpreter): build it with CGO_ENABLED=0")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("read its shared libraries: %w", err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("needs shared libraries %v: build it with CGO_ENABLED=0", libs)
	}
	return nil
}

func countCertificates(bundle []byte) int {
	n := 0
	for rest := bundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return n
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err == nil {
			n++
		}
	}
}

// imageEnv is the image's environment. SSL_CERT_FILE names the bundle for
// programs other than Go's crypto/x509, which finds it there by itself.
func imageEnv() []string {
	return []string{"PATH=/usr/local/bin", "HOME=" + HomeDir, "SSL_CERT_FILE=" + CABundlePath}
}

// accountFiles are /etc/passwd and /etc/group: root, and the user the image
// runs as, with no login shell (there is none).
func accountFiles() (passwd, group string) {
	passwd = fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", UserName, UID, GID, UserName, HomeDir)
	group = fmt.Sprintf("root:x:0:\n%s:x:%d:\n", UserName, GID)
	return passwd, group
}

// rootFS is the image's only layer, as an uncompressed tar.
func rootFS(bin, ca []byte, created time.Time) ([]byte, error) {
	passwd, group := accountFiles()
	type entry struct {
		name     string
		mode     int64
		uid, gid int
		body     []byte // nil for a directory
	}
	dir := func(name string, mode int64, owner int) entry {
		return entry{name: name, mode: mode, uid: owner, gid: owner}
	}
	file := func(name string, mode int64, body []byte) entry {
		return entry{name: name, mode: mode, body: body}
	}
	entries := []entry{
		dir("etc/", 0o755, 0),
		file("etc/passwd", 0o644, []byte(passwd)),
		file("etc/group", 0o644, []byte(group)),
		dir("etc/ssl/", 0o755, 0),
		dir("etc/ssl/certs/", 0o755, 0),
		file("etc/ssl/certs/ca-certificates.crt", 0o644, ca),
		dir("home/", 0o755, 0),
		dir("home/sundial/", 0o700, UID),
		// Some libraries write temporary files; the root file system may
		// be read-only, so mount an emptyDir here in that case.
		dir("tmp/", 0o1777, 0),
		dir("usr/", 0o755, 0),
		dir("usr/local/", 0o755, 0),
		dir("usr/local/bin/", 0o755, 0),
		file("usr/local/bin/sundial", 0o755, bin),
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: created, Format: tar.FormatPAX}
		if e.body == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("layer %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}
