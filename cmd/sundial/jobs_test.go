package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/internal/stacktest"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/registry"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/trigger"
)

// TestJobsApplyReportsInvalidDefinitions: an invalid definition is
// reported with every field at fault and not produced; the valid one is
// tried, and with no broker to take it the command gives up after
// --timeout without progress.
func TestJobsApplyReportsInvalidDefinitions(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "jobs.json")
	require.NoError(t, os.WriteFile(file, []byte(`[
		{"id": "ok.job", "ownerTeam": "ok", "target": {"handler": {"name": "noop"}}},
		{"id": "bad job", "ownerTeam": "t", "schedule": {"cron": {"expression": "61 * * * *"}, "timeZone": "UTC"}}
	]`), 0o600))
	code, out, errOut := runCLI(t, "jobs", "apply", "-f", file, "--kafka-brokers", "127.0.0.1:1", "--timeout", "2s")
	assert.Equal(t, 1, code)
	for _, want := range []string{"bad job\tREJECTED\n", "  id:", "  schedule.cron.expression:", "  target.kind: required", "2 definitions in ", "1 rejected"} {
		assert.Contains(t, out, want)
	}
	assert.Regexp(t, `ok\.job\tNOT PRODUCED`, out)
	// The valid one was never produced: the check beside the work names
	// the unreachable Kafka.
	assert.Contains(t, errOut, "sundial: kafka: unable to dial")

	code, _, errOut = runCLI(t, "jobs", "apply", "--kafka-brokers", "127.0.0.1:1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--file: required")
}

// TestTriggerWithoutKey: "sundial trigger JOB" without --key is valid, as
// docs/workers.md shows; it gets as far as Kafka rather than being refused
// for a missing idempotency key.
func TestTriggerWithoutKey(t *testing.T) {
	t.Parallel()
	code, _, errOut := runCLI(t, "trigger", "some.job", "--kafka-brokers", "127.0.0.1:1", "--timeout", "2s")
	assert.Equal(t, 1, code)
	assert.NotContains(t, errOut, "idempotency_key")
	assert.Contains(t, errOut, "kafka")
}

// TestPrintJobNextDue: "jobs get" prints the next due time after now in the
// job's zone, as its help says, not the definition's first occurrence.
func TestPrintJobNextDue(t *testing.T) {
	t.Parallel()
	spec := &sundialv1.JobSpec{
		Id: "billing.nightly", OwnerTeam: "billing",
		Schedule: &sundialv1.Schedule{Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "30 2 * * *"}}, TimeZone: "Europe/Berlin"},
		Target:   &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}},
	}
	value, err := proto.Marshal(spec)
	require.NoError(t, err)
	accepted := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	job := store.Job{ID: spec.GetId(), Spec: value, Revision: 7, UpdatedAt: accepted, NextDue: time.Date(2026, 11, 21, 1, 30, 0, 0, time.UTC)}
	now := time.Date(2026, 11, 28, 21, 40, 0, 0, time.UTC)
	var out strings.Builder
	require.NoError(t, printJob(&out, job, store.Summary{JobID: job.ID}, now))
	assert.Contains(t, out.String(), "next due:    2026-11-29T02:30:00+01:00 (Europe/Berlin)\n")
	assert.NotContains(t, out.String(), "2026-11-21")

	spec.Paused = true
	value, err = proto.Marshal(spec)
	require.NoError(t, err)
	job.Spec = value
	out.Reset()
	require.NoError(t, printJob(&out, job, store.Summary{JobID: job.ID}, now))
	assert.Contains(t, out.String(), "next due:    none (paused)\n")
}

// TestJobsCommands drives apply, get, trigger and delete against a
// registry and a trigger consumer on the real stack.
func TestJobsCommands(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	// A guard against a hang, not a claim about speed: on a busy machine
	// Cassandra's schema and the topics alone can take minutes.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	inst := stacktest.Install(ctx, t, k, c, 4)
	names, st, enq := inst.Names, inst.Store, inst.Enqueuer
	// The registry reads the team topics only, which the CLI writes: each
	// definition to its owner team's.
	_, err := topics.EnsureAt(ctx, k.Brokers, []topics.Spec{names.TeamJobsSpec("billing"), names.TeamJobsSpec("t"), names.TeamJobsSpec("bulk")}, -1)
	require.NoError(t, err)
	quiet := slog.New(slog.DiscardHandler)
	reg, err := registry.New(registry.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Store: st, Waker: enq, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, reg.Start(ctx))
	defer reg.Stop()
	trig, err := trigger.New(trigger.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Store: st, Enqueuer: enq, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, trig.Start(ctx))
	defer trig.Stop()

	// The commands wait for the registry's answers. On a loaded CI machine
	// (every package's real-stack tests at once) an answer once took longer
	// than the commands' default 30 s; the test is about the answers, not
	// their speed.
	kafkaArgs := []string{"--kafka-brokers", strings.Join(k.Brokers, ","), "--topic-prefix", k.TopicPrefix, "--timeout", "2m"}
	storeArgs := []string{"--cassandra-hosts", strings.Join(c.Hosts, ","), "--keyspace", c.Keyspace}

	code, out, errOut := runCLI(t, append([]string{"jobs", "apply", "-f", "../../proto/sundial/v1/testdata/jobspec/cron-http.json"}, kafkaArgs...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Regexp(t, `billing\.nightly-invoices\tCREATED\tnext due \d{4}-`, out)

	// From standard input, an array; applying the same file again is
	// UNCHANGED.
	var in strings.Builder
	in.WriteString("[")
	for i, f := range []string{"cron-http.json", "trigger-only.json"} {
		data, err := os.ReadFile("../../proto/sundial/v1/testdata/jobspec/" + f)
		require.NoError(t, err)
		if i > 0 {
			in.WriteString(",")
		}
		in.Write(data)
	}
	in.WriteString("]")
	app := newApp(&strings.Builder{}, &strings.Builder{})
	var stdout, stderr strings.Builder
	app.Writer, app.ErrWriter, app.Reader = &stdout, &stderr, strings.NewReader(in.String())
	if err := app.Run(ctx, append([]string{"sundial", "jobs", "apply", "-f", "-"}, kafkaArgs...)); err != nil {
		// Say which answer is missing and what the status topic holds.
		logStatuses(t, k.Brokers, names)
		require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	assert.Contains(t, stdout.String(), "billing.nightly-invoices\tUNCHANGED")
	assert.Contains(t, stdout.String(), "billing.rebuild-ledger\tCREATED\n")

	testJobsApplyDirectory(t, kafkaArgs)

	code, out, errOut = runCLI(t, append([]string{"jobs", "get", "billing.nightly-invoices"}, storeArgs...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Contains(t, out, "id:          billing.nightly-invoices")
	assert.Regexp(t, `"expression":\s+"30 2 \* \* \*"`, out) // protojson varies its spaces
	assert.Regexp(t, `next due:    \d{4}-\d\d-\d\dT02:30:00\+0[12]:00 \(Europe/Berlin\)`, out)

	code, out, errOut = runCLI(t, append([]string{"trigger", "billing.rebuild-ledger", "--key", "ticket-1"}, kafkaArgs...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Regexp(t, `billing\.rebuild-ledger\ttriggered\trun billing\.rebuild-ledger@\d+ unless key "ticket-1" was used before`, out)
	// Without --key a unique key is made up and printed, for a retry.
	code, out, errOut = runCLI(t, append([]string{"trigger", "billing.rebuild-ledger"}, kafkaArgs...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Regexp(t, `billing\.rebuild-ledger\ttriggered\trun billing\.rebuild-ledger@\d+, key "cli-[A-Z2-7]{26}" \(generated: pass it as --key to retry this request\)`, out)

	code, out, errOut = runCLI(t, append([]string{"jobs", "delete", "billing.rebuild-ledger", "billing.nightly-invoices"}, kafkaArgs...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Equal(t, "billing.rebuild-ledger\tDELETED\nbilling.nightly-invoices\tDELETED\n", out)
	code, out, _ = runCLI(t, append([]string{"jobs", "get", "billing.nightly-invoices"}, storeArgs...)...)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "deleted:     yes")
	code, _, errOut = runCLI(t, append([]string{"jobs", "get", "nope"}, storeArgs...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `job "nope": not found`)
}

// testJobsApplyDirectory applies a directory of JSON, JSON lines and YAML
// files, some definitions invalid, then the same again.
func testJobsApplyDirectory(t *testing.T, kafkaArgs []string) {
	dir := t.TempDir()
	job := func(i int) string {
		return fmt.Sprintf(`{"id": "bulk.cli-%04d", "ownerTeam": "bulk", "schedule": {"interval": {"every": "3600s"}, "timeZone": "UTC"}, "target": {"handler": {"name": "noop"}}}`, i)
	}
	var array, lines, docs []string
	for i := range 200 {
		array = append(array, job(i))
		lines = append(lines, job(200+i))
	}
	for _, i := range []int{1, 2, 3} {
		array = append(array, fmt.Sprintf(`{"id": "bulk.cli-bad-%d", "target": {"handler": {"name": "noop"}}}`, i))
	}
	for i := range 100 {
		docs = append(docs, fmt.Sprintf("id: bulk.cli-%04d\nowner_team: bulk\nschedule:\n  interval:\n    every: 3600s\n  time_zone: UTC\ntarget:\n  handler:\n    name: noop\n", 400+i))
	}
	docs = append(docs, "id: bulk.cli-typo\nownerTeem: t\n")
	sub := filepath.Join(dir, "more")
	require.NoError(t, os.Mkdir(sub, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.json"), []byte("["+strings.Join(array, ",\n")+"]"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "b.jsonl"), []byte(strings.Join(lines, "\n")), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "c.yaml"), []byte(strings.Join(docs, "---\n")), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a definition"), 0o600))

	args := append([]string{"jobs", "apply", "-f", dir, "--each=false", "--progress-every", "20ms"}, kafkaArgs...)
	code, out, errOut := runCLI(t, args...)
	assert.Equal(t, 1, code, "stderr: %s", errOut)
	assert.Contains(t, out, "504 definitions in ")
	assert.Contains(t, out, "500 created, 0 updated, 0 unchanged, 0 stale, 4 rejected\n")
	for i := 1; i <= 3; i++ {
		assert.Contains(t, out, fmt.Sprintf("bulk.cli-bad-%d\tREJECTED\n  owner_team: required", i))
	}
	assert.Regexp(t, `c\.yaml: definition 101: .*ownerTeem`, out)
	assert.NotContains(t, out, "CREATED", "--each=false prints the rejections only")
	assert.Contains(t, errOut, "4 of 504 definitions rejected")
	assert.Regexp(t, `read \d+  produced \d+  answered \d+`, errOut, "progress lines")

	code, out, errOut = runCLI(t, args...)
	assert.Equal(t, 1, code, "stderr: %s", errOut)
	assert.Contains(t, out, "0 created, 0 updated, 500 unchanged, 0 stale, 4 rejected\n")
}

// logStatuses logs every record of sundial.jobs.status: the answers a
// failed wait could have read, with the source record each one names.
func logStatuses(t *testing.T, brokers []string, names topics.Names) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Logf("status dump: %v", err)
		return
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, names.JobsStatus())
	if err != nil {
		t.Logf("status dump: list end offsets: %v", err)
		return
	}
	start := map[string]map[int32]kgo.Offset{names.JobsStatus(): {}}
	left := 0
	ends.Each(func(o kadm.ListedOffset) {
		t.Logf("status dump: %s[%d] ends at %d", o.Topic, o.Partition, o.Offset)
		if o.Offset > 0 {
			start[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
			left += int(o.Offset)
		}
	})
	cl.AddConsumePartitions(start)
	for left > 0 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			left--
			st := &sundialv1.JobStatus{}
			err := sundialv1.Unmarshal(statusContentType(r), r.Value, st)
			t.Logf("status dump: %s[%d]@%d ts=%s key=%s outcome=%s source=%s[%d]@%d err=%v", r.Topic, r.Partition, r.Offset,
				r.Timestamp.UTC().Format(time.RFC3339Nano), r.Key, st.GetOutcome(),
				st.GetSource().GetTopic(), st.GetSource().GetPartition(), st.GetSource().GetOffset(), err)
		})
	}
}

func statusContentType(r *kgo.Record) string {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, sundialv1.HeaderContentType) {
			return string(h.Value)
		}
	}
	return ""
}
