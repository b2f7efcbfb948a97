package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	binary := fs.String("binary", "", "statically linked sundial binary for Linux (CGO_ENABLED=0)")
	caBundle := fs.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "PEM file of trusted CA certificates to put in the image")
	out := fs.String("out", "", "tarball to write")
	tag := fs.String("tag", "sundial:dev", "image reference recorded in the tarball (docker load names the image so)")
	created := fs.String("created", "", "time of the image and its files, RFC 3339 (the commit time gives reproducible images)")
	version := fs.String("version", "dev", "org.opencontainers.image.version")
	revision := fs.String("revision", "", "org.opencontainers.image.revision: the commit")
	source := fs.String("source", "https://github.com/sundialhq/sundial", "org.opencontainers.image.source")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var bad []error
	if *out == "" {
		bad = append(bad, errors.New("-out: required"))
	}
	ref, err := name.NewTag(*tag, name.WeakValidation)
	if err != nil {
		bad = append(bad, fmt.Errorf("-tag: %w", err))
	}
	when, err := time.Parse(time.RFC3339, *created)
	if err != nil {
		bad = append(bad, fmt.Errorf("-created: %w", err))
	}
	if err := errors.Join(bad...); err != nil {
		return err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "sundial",
		"org.opencontainers.image.description": "Sundial, a Kafka-partitioned distributed job scheduler: one binary, every component a subcommand",
		"org.opencontainers.image.source":      *source,
		"org.opencontainers.image.version":     *version,
		"org.opencontainers.image.created":     when.UTC().Format(time.RFC3339),
	}
	if *revision != "" {
		labels["org.opencontainers.image.revision"] = *revision
	}
	img, err := Build(Config{Binary: *binary, CABundle: *caBundle, Created: when.UTC(), Labels: labels})
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(*out, ref, img); err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s %s, %.1f MiB\n", *out, ref, digest, float64(st.Size())/(1<<20))
	return nil
}
