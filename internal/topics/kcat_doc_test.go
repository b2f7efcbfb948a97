package topics_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestKcatRecipes runs every command of docs/observability.md's kcat
// recipes, as written but for the broker and the test's topic prefix,
// against the real Kafka: each exits 0, and the JSON records a process with
// --record-encoding json writes read as JSON.
func TestKcatRecipes(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		msg := "kcat is not installed (Debian: apt-get install kcat)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	names := topics.Names{Prefix: k.TopicPrefix}
	_, err = topics.Setup(ctx, k.Brokers, names, 4, 1)
	require.NoError(t, err)
	_, err = topics.EnsureAt(ctx, k.Brokers, []topics.Spec{names.TeamJobsSpec("payments"), {Name: names.Direct("w1"), Partitions: 1}}, 1)
	require.NoError(t, err)

	// What a runner and a registry with --record-encoding json write.
	ev := &sundialv1.RunEvent{RunId: "payments.hello@1000", JobId: "payments.hello", Attempt: 1, State: sundialv1.RunState_RUN_STATE_SUCCEEDED}
	value, headers, err := topics.EncodeEvent(sundialv1.EncodingJSON, ev)
	require.NoError(t, err)
	status, err := sundialv1.EncodingJSON.Marshal(&sundialv1.JobStatus{Subject: &sundialv1.JobStatus_JobId{JobId: "payments.hello"}, Accepted: true})
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx,
		&kgo.Record{Topic: names.Events(), Key: []byte(ev.GetJobId()), Value: value, Headers: headers},
		&kgo.Record{Topic: names.JobsStatus(), Key: []byte("payments.hello"), Value: status,
			Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeJSON)}}},
	).FirstErr())

	cmds := kcatRecipes(t)
	require.NotEmpty(t, cmds)
	topicArg := regexp.MustCompile(`-t (sundial\.[a-z0-9.]+)`)
	out := map[string]string{} // by topic
	for _, c := range cmds {
		require.Contains(t, c, "kcat -b 127.0.0.1:19092 ", "each recipe names the local stack's broker")
		run := strings.ReplaceAll(c, "kcat -b 127.0.0.1:19092 ", kcat+" -b "+strings.Join(k.Brokers, ",")+" ")
		run = topicArg.ReplaceAllString(run, "-t "+k.TopicPrefix+"$1")
		cmdCtx, stop := context.WithTimeout(ctx, 2*time.Minute)
		got, err := exec.CommandContext(cmdCtx, "sh", "-c", run).CombinedOutput()
		stop()
		require.NoError(t, err, "%s\n%s", c, got)
		if m := topicArg.FindStringSubmatch(c); m != nil {
			out[m[1]] += string(got)
		}
	}
	// protojson's spacing varies between builds: match the value.
	assert.Regexp(t, `"runId":\s*"payments.hello@1000"`, out["sundial.events"], "the JSON event reads as JSON")
	assert.Contains(t, out["sundial.events"], "content-type=application/json; messageType=sundial.v1.RunEvent", "its header says so")
	assert.Regexp(t, `"jobId":\s*"payments.hello"`, out["sundial.jobs.status"])
	assert.Contains(t, out["sundial.jobs.payments"], `"id": "payments.hello"`, "the definition produced with kcat reads back")
	assert.Contains(t, out["sundial.triggers"], `"idempotencyKey": "kcat-1"`, "the trigger produced with kcat reads back")
	assert.Contains(t, out["sundial.triggers"], "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
}

// kcatRecipes returns the command lines of the sh blocks of the kcat
// section of docs/observability.md.
func kcatRecipes(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/observability.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "### kcat, topic by topic")
	require.True(t, ok, "the kcat section is there")
	var cmds []string
	for {
		var block string
		_, rest, ok := strings.Cut(section, "```sh\n")
		if !ok {
			return cmds
		}
		block, section, _ = strings.Cut(rest, "```")
		for _, line := range strings.Split(block, "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				cmds = append(cmds, line)
			}
		}
	}
}
