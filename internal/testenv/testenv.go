package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Environment variables that name the backends.
const (
	EnvKafka     = "SUNDIAL_KAFKA_BROKERS"
	EnvCassandra = "SUNDIAL_CASSANDRA_HOSTS"
	EnvRedis     = "SUNDIAL_REDIS_ADDR"
)

// connectTimeout bounds every probe and cleanup call, so a dead backend fails
// a test quickly instead of hanging it until the go test deadline.
const connectTimeout = 20 * time.Second

const howToStart = "start the local stack with `make stack-up`, then `source <(deploy/local/stack.sh env)` " +
	"(or run `make test`, which does both)"

// unavailable fails the test under CI and skips it otherwise.
func unavailable(t testing.TB, backend, env string, why string) {
	t.Helper()
	msg := fmt.Sprintf("%s is not available: %s; %s is unset and no Docker engine answers; %s", backend, why, env, howToStart)
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set, so a missing backend fails the run: %s", msg)
		return
	}
	t.Skip(msg)
}

func skipShort(t testing.TB, backend string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s; skipped under -short", backend)
	}
}

// addresses returns the comma-separated list in env, or nil.
func addresses(env string) []string {
	var out []string
	for _, a := range strings.Split(os.Getenv(env), ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func randomSuffix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// slug turns a test name into something every backend accepts in a name:
// lower-case letters, digits and underscores, at most n characters.
func slug(name string, n int) string {
	s := nonWord.ReplaceAllString(strings.ToLower(name), "_")
	s = strings.Trim(s, "_")
	if len(s) > n {
		s = s[:n]
	}
	return strings.Trim(s, "_")
}

func timeoutCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), connectTimeout)
}
