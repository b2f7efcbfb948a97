package main

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/testenv"
)

var devExports = regexp.MustCompile(`export SUNDIAL_API_URL=(\S+) SUNDIAL_KAFKA_BROKERS=(\S+) SUNDIAL_API_TOKEN=(\S+)`)

// TestDevServesTheReadmePath follows the README with no backend installed:
// `sundial dev` prints the API's address, the Kafka seed and a token;
// docs/examples/hello.json applied with `sundial jobs apply` runs on the
// built-in noop handler, and `sundial runs list` through the API lists
// its succeeded run.
func TestDevServesTheReadmePath(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var out, errOut testenv.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"sundial", "dev", "--no-samples", "--listen", "127.0.0.1:0"}, &out, &errOut)
	}()
	var m []string
	require.Eventually(t, func() bool {
		m = devExports.FindStringSubmatch(out.String())
		return m != nil
	}, 3*time.Minute, 50*time.Millisecond, "sundial dev printed no access line\nstdout: %s\nstderr: %s", &out, &errOut)
	url, brokers, token := m[1], m[2], m[3]

	code, stdout, stderr := runCLI(t, "jobs", "apply", "-f", "../../docs/examples/hello.json", "--kafka-brokers", brokers, "--topic-prefix", "", "--timeout", "2m")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	assert.Contains(t, stdout, "hello\tCREATED")

	require.Eventually(t, func() bool {
		_, stdout, _ = runCLI(t, "runs", "list", "--job", "hello", "--api-url", url, "--api-token", token)
		return regexp.MustCompile(`(?m)^hello@\d+\s+1\s+succeeded`).MatchString(stdout)
	}, 3*time.Minute, 500*time.Millisecond, "no succeeded run of hello listed; last: %s", stdout)

	// The operator actions take the API's path when --api-url is set: no
	// Kafka or Cassandra flag is given.
	api := []string{"--api-url", url, "--api-token", token}
	code, stdout, stderr = runCLI(t, append([]string{"trigger", "hello", "--wait", "--timeout", "2m"}, api...)...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	assert.Regexp(t, `hello\ttriggered\trun hello@\d+, key "cli-`, stdout)
	assert.Contains(t, stdout, "SUCCEEDED")
	code, stdout, stderr = runCLI(t, append([]string{"jobs", "pause", "hello"}, api...)...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	assert.Regexp(t, `^hello\t\S+\tpaused\n$`, stdout)
	code, stdout, stderr = runCLI(t, append([]string{"jobs", "pause", "hello"}, api...)...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	assert.Equal(t, "hello\talready paused; nothing produced\n", stdout)
	code, _, stderr = runCLI(t, append([]string{"runs", "cancel", "hello@1"}, api...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "is not running")
	code, _, stderr = runCLI(t, append([]string{"runs", "retry", "hello@1"}, api...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "cannot retry")
	// Applying the file again through the API unpauses the job; then it
	// is deleted through the API.
	code, stdout, stderr = runCLI(t, append([]string{"jobs", "apply", "-f", "../../docs/examples/hello.json"}, api...)...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	assert.Contains(t, stdout, "hello\tUPDATED")
	assert.Contains(t, stdout, "1 updated")
	code, stdout, stderr = runCLI(t, append([]string{"jobs", "delete", "hello"}, api...)...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	assert.Equal(t, "hello\tDELETED\n", stdout)

	cancel()
	<-done
}
