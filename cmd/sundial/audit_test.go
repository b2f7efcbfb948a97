package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/internal/stacktest"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/registry"
)

func TestParseSince(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	got, err := parseSince("24h", now)
	require.NoError(t, err)
	assert.Equal(t, now.Add(-24*time.Hour), got)
	got, err = parseSince("2026-11-01T00:00:00Z", now)
	require.NoError(t, err)
	assert.Equal(t, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), got)
	got, err = parseSince("", now)
	require.NoError(t, err)
	assert.True(t, got.IsZero())
	for _, bad := range []string{"-1h", "yesterday", "0s"} {
		_, err := parseSince(bad, now)
		assert.ErrorContains(t, err, "--since", bad)
	}
}

func TestPrintAudit(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	require.NoError(t, printAudit(&b, []audit.Record{{
		At: time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC), Action: audit.ActionJobUpdated, Subject: "j", Team: "a",
		Actor: "kafka:sundial.jobs.a", RevisionBefore: 3, RevisionAfter: 9,
		Changes: []audit.Change{{Field: "paused", After: "true"}},
	}}))
	assert.Equal(t, "2026-11-25T03:00:00Z  job.updated  j  team a  by kafka:sundial.jobs.a  revision 3 -> 9\n    paused: - -> true\n", b.String())
	b.Reset()
	require.NoError(t, printAudit(&b, nil))
	assert.Equal(t, "no audit records\n", b.String())
}

// TestTeamApplyAndAuditList applies and deletes a job through its team's
// topic with --team, sees a definition sent to another team's topic
// rejected, and lists the audit trail of the changes by job and by team.
func TestTeamApplyAndAuditList(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	// A guard against a hang: schema and topics can take minutes here.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	inst := stacktest.Install(ctx, t, k, c, 4)
	names, st, enq := inst.Names, inst.Store, inst.Enqueuer
	_, err := topics.EnsureAt(ctx, k.Brokers, []topics.Spec{names.TeamJobsSpec("billing"), names.TeamJobsSpec("payments")}, -1)
	require.NoError(t, err)
	trail, err := audit.New(audit.Config{Store: st})
	require.NoError(t, err)
	reg, err := registry.New(registry.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Store: st, Waker: enq, Audit: trail,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, reg.Start(ctx))
	defer reg.Stop()

	kafkaArgs := []string{"--kafka-brokers", strings.Join(k.Brokers, ","), "--topic-prefix", k.TopicPrefix, "--timeout", "2m"}
	storeArgs := []string{"--cassandra-hosts", strings.Join(c.Hosts, ","), "--keyspace", c.Keyspace}
	file := "../../proto/sundial/v1/testdata/jobspec/cron-http.json" // owner_team billing

	code, out, errOut := runCLI(t, append([]string{"jobs", "apply", "--team", "payments", "-f", file}, kafkaArgs...)...)
	require.Equal(t, 1, code, "stdout: %s\nstderr: %s", out, errOut)
	assert.Contains(t, out, "REJECTED")
	assert.Contains(t, out, "owner_team")
	code, out, errOut = runCLI(t, append([]string{"jobs", "apply", "--team", "billing", "-f", file}, kafkaArgs...)...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
	assert.Contains(t, out, "billing.nightly-invoices\tCREATED")
	code, out, errOut = runCLI(t, append([]string{"jobs", "delete", "--team", "billing", "billing.nightly-invoices"}, kafkaArgs...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Equal(t, "billing.nightly-invoices\tDELETED\n", out)

	code, out, errOut = runCLI(t, append([]string{"audit", "list", "--job", "billing.nightly-invoices"}, storeArgs...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	actor := "by kafka:" + names.TeamJobs("billing")
	require.Regexp(t, `^\S+  job\.deleted  billing\.nightly-invoices  team billing  `+regexp.QuoteMeta(actor)+`  revision \d+ -> \d+$`, lines[0], out)
	assert.Contains(t, out, "job.created  billing.nightly-invoices  team billing  "+actor+"  revision 0 -> ")
	assert.Contains(t, out, `    owner_team: "billing" -> -`)
	assert.Equal(t, 2, strings.Count(out, actor), out)

	code, out, errOut = runCLI(t, append([]string{"audit", "list", "--team", "billing", "--since", "1h", "-o", "json"}, storeArgs...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	var actions []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r audit.Record
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		actions = append(actions, r.Action)
	}
	assert.Equal(t, []string{audit.ActionJobDeleted, audit.ActionJobCreated}, actions)

	code, _, errOut = runCLI(t, append([]string{"audit", "list"}, storeArgs...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--job or --team: set exactly one")
}
