package main

import (
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/runner/egress"
)

func TestExecAllowFlag(t *testing.T) {
	t.Parallel()
	var cfg egress.Config
	exe, err := execTarget(&cfg, nil, 0)
	require.NoError(t, err)
	assert.Nil(t, exe, "no --exec-allow: exec targets are refused")

	exe, err = execTarget(&cfg, []string{"report=/usr/local/bin/report", " cleanup=/opt/cleanup.sh", "team=ops:rsync=/usr/bin/rsync", "tar=/bin/tar", "pool=batch:report=/usr/local/bin/report"}, 1024)
	require.NoError(t, err)
	assert.NotNil(t, exe)
	p, err := egress.New(cfg)
	require.NoError(t, err)
	assert.NoError(t, p.CheckExec("payments", "report"), "an entry before any scope is for every team")
	assert.NoError(t, p.CheckExec("ops", "tar"), "an entry without a scope continues the one before it")
	assert.Error(t, p.CheckExec("payments", "tar"))
	assert.Error(t, p.CheckExec("payments", "rsync"), "allowed to ops only")

	_, err = execTarget(&egress.Config{}, []string{"report", "a=relative/path", "b=/x", "b=/y", "bad name=/z"}, -1)
	require.Error(t, err)
	for _, want := range []string{
		`--exec-allow "report": want name=/absolute/path`,
		`--exec-allow "b=/y": b is allowed as /x and as /y`,
	} {
		assert.ErrorContains(t, err, want)
	}
	_, err = execTarget(&egress.Config{}, []string{"a=relative/path", "bad name=/z"}, -1)
	for _, want := range []string{`Allowed["a"]: "relative/path" is not an absolute path`, `Allowed["bad name"]: name has characters`, "MaxOutput: -1 is negative"} {
		assert.ErrorContains(t, err, want)
	}
}

// TestEgressFlagsFromTheConfigFile: the egress allows are read from a
// runner's section of the config file like every flag, a list's entries
// keeping the scope of the entry before them.
func TestEgressFlagsFromTheConfigFile(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, `
runner:
  egress-allow:
    - team=payments:10.1.0.0/16
    - api.internal:443
    - pool=batch:192.168.7.0/24
  kafka-target-allow: ["team=payments:ledger.*"]
  exec-allow: ["team=ops:rsync=/usr/bin/rsync"]
`)
	cfg, exe, err := runnerEgress(captured(t, file, []string{"runner"}))
	require.NoError(t, err)
	require.NotNil(t, exe)
	cfg.Pool = "batch"
	p, err := egress.New(cfg)
	require.NoError(t, err)
	addr := netip.MustParseAddr
	assert.NoError(t, p.CheckAddr("payments", "", addr("10.1.2.3"), 80))
	assert.NoError(t, p.CheckAddr("payments", "api.internal", addr("10.9.9.9"), 443))
	assert.Error(t, p.CheckAddr("ops", "", addr("10.1.2.3"), 80), "payments' range is payments' own")
	assert.NoError(t, p.CheckAddr("ops", "", addr("192.168.7.1"), 80), "the pool's range is every team's on it")
	assert.Error(t, p.CheckAddr("ops", "", addr("127.0.0.1"), 80))
	assert.NoError(t, p.CheckTopic("payments", "ledger.in"))
	assert.Error(t, p.CheckTopic("ops", "ledger.in"))
	assert.NoError(t, p.CheckExec("ops", "rsync"))
	assert.Error(t, p.CheckExec("payments", "rsync"))
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

// TestOwnAddressesAreTheBackendsAndTheMetricsListener: the installation's
// own addresses, which the egress policy refuses whatever is allowed, are
// the runner's backends and its metrics listener (every interface for a
// listener without a host).
func TestOwnAddressesAreTheBackendsAndTheMetricsListener(t *testing.T) {
	t.Parallel()
	cmd := captured(t, "", []string{"runner"}, "--kafka-brokers", "10.0.0.5:9093,10.0.0.6", "--cassandra-hosts", "10.0.0.7",
		"--redis-addr", "10.0.0.8:6380", "--metrics-addr", ":9465")
	own := ownAddresses(t.Context(), cmd, slog.New(slog.DiscardHandler))
	for _, want := range []string{"10.0.0.5:9093", "10.0.0.6:9092", "10.0.0.7:9042", "10.0.0.8:6380", "127.0.0.1:9465", "[::1]:9465"} {
		assert.Contains(t, own, netip.MustParseAddrPort(want))
	}
}
