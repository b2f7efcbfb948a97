package runner

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/breaker"
	"github.com/sundialhq/sundial/runner/egress"
	"github.com/sundialhq/sundial/runner/target"
)

// uniqueTeam is a team name no other test uses.
func uniqueTeam(name string) string {
	return name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// ensureTopics creates topics of one partition; cleanup deletes them.
func ensureTopics(t *testing.T, b backends, names ...string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	var specs []topics.Spec
	for _, n := range names {
		specs = append(specs, topics.Spec{Name: n, Partitions: 1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = topics.Ensure(ctx, adm, specs, 1)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, names...)
	})
	return adm
}

// records returns how many records topic holds.
func records(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// kafkaRun is a run of team's job that produces to topic, attempted once.
func kafkaRun(h *harness, team, job, topic string) *sundialv1.Run {
	return h.run(job, time.Now(), func(r *sundialv1.Run) {
		r.OwnerTeam = team
		r.Payload = []byte(`{"id":"` + job + `"}`)
		r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Kafka{Kafka: &sundialv1.KafkaTarget{Topic: topic}}}
		r.Retry = &sundialv1.RetryPolicy{MaxAttempts: 3}
	})
}

// requireRefusedDead waits for run to die at its first attempt with an
// egress refusal: refused once, never retried.
func requireRefusedDead(t *testing.T, h *harness, run *sundialv1.Run, code string) {
	t.Helper()
	waitStates(t, h, run.GetRunId(), started, failed, dead)
	ev := lastEvent(h, run.GetRunId(), dead)
	assert.Equal(t, code, ev.GetError().GetCode())
	assert.False(t, ev.GetError().GetRetryable(), "a refusal is not retried")
	assert.Contains(t, ev.GetError().GetMessage(), "not allowed for team "+run.GetOwnerTeam())
}

// TestKafkaTargetCannotWriteAnotherTeamsTopic, on the real stack with a
// topic prefix: team A's job aimed at team B's job topic
// <prefix>sundial.jobs.<B> writes nothing there (so B's job cannot be
// replaced) and its run dies at once, not retried; A's own topic is
// written.
func TestKafkaTargetCannotWriteAnotherTeamsTopic(t *testing.T) {
	t.Parallel()
	b := realBackends(t, 1)
	require.NotEmpty(t, b.names.Prefix, "the test runs with a topic prefix")
	teamA, teamB := uniqueTeam("alpha"), uniqueTeam("beta")
	bJobs, aOwn := b.names.TeamJobs(teamB), teamA+".out"
	adm := ensureTopics(t, b, bJobs, aOwn)
	h := newHarness(t, b, steadyTTL)
	h.start(nil)

	forged := kafkaRun(h, teamA, teamA+".forge", bJobs)
	forged.GetTarget().GetKafka().Key = teamB + ".job"
	own := kafkaRun(h, teamA, teamA+".own", aOwn)
	h.produce(forged, own)

	requireRefusedDead(t, h, forged, target.CodeEgressRefused)
	assert.Contains(t, lastEvent(h, forged.GetRunId(), dead).GetError().GetMessage(), "one of Sundial's own topics")
	waitStates(t, h, own.GetRunId(), started, succeeded)
	assert.Zero(t, records(t, adm, bJobs), "nothing reached team B's job topic")
	assert.EqualValues(t, 1, records(t, adm, aOwn), "the team's own topic is written")
}

// TestKafkaTargetCannotWriteInternalTopics: Kafka's internal topics,
// Sundial's own (prefixed or not) and another team's topics are refused,
// non-retryably, and nothing is written to the installation's topics.
func TestKafkaTargetCannotWriteInternalTopics(t *testing.T) {
	t.Parallel()
	b := realBackends(t, 1)
	team, other := uniqueTeam("alpha"), uniqueTeam("beta")
	otherTopic := other + ".in"
	adm := ensureTopics(t, b, otherTopic)
	h := newHarness(t, b, steadyTTL)
	r := h.start(nil)

	runsBefore := records(t, adm, b.names.Runs(topics.PriorityDefault))
	var runs []*sundialv1.Run
	for i, topic := range []string{"__consumer_offsets", "__transaction_state", b.names.Runs(topics.PriorityDefault),
		b.names.Events(), b.names.Triggers(), "sundial.jobs", otherTopic} {
		runs = append(runs, kafkaRun(h, team, team+".internal-"+strconv.Itoa(i), topic))
	}
	h.produce(runs...)
	for _, run := range runs {
		requireRefusedDead(t, h, run, target.CodeEgressRefused)
	}
	assert.Zero(t, records(t, adm, otherTopic), "nothing reached another team's topic")
	assert.InDelta(t, len(runs), testutil.ToFloat64(r.m.egressRefusals.WithLabelValues(team, egress.KindKafka)), 0, "each refusal is counted for the team")
	// The runs topic holds the runs this test produced, and nothing more.
	assert.Equal(t, runsBefore+int64(len(runs)), records(t, adm, b.names.Runs(topics.PriorityDefault)))
}

// TestOneTeamsFailingDownstreamDoesNotOpenAnotherTeamsBreaker, on the real
// stack: team A's calls to a host fail until A's breaker opens; team B's
// call to the same host still goes out and succeeds, while A's next run is
// deferred by its own open breaker.
func TestOneTeamsFailingDownstreamDoesNotOpenAnotherTeamsBreaker(t *testing.T) {
	t.Parallel()
	h := newHarness(t, realBackends(t, 2), steadyTTL)
	h.down.set(func(r *http.Request, _ int) (int, http.Header) {
		if strings.Contains(r.URL.Path, "/team-a") {
			return http.StatusBadGateway, nil
		}
		return http.StatusOK, nil
	})
	h.start(func(c *Config) {
		c.Concurrency = 1 // one at a time, so the breaker sees the failures in order
		c.Breakers = breaker.Config{Failures: 2, OpenTimeout: time.Hour}
	})
	run := func(team, job string) *sundialv1.Run {
		return h.run(job, time.Now(), func(r *sundialv1.Run) {
			r.OwnerTeam = team
			r.Retry.MaxAttempts = 1
		})
	}
	a1, a2 := run("team-a", "team-a.fails-1"), run("team-a", "team-a.fails-2")
	h.produce(a1, a2)
	waitStates(t, h, a1.GetRunId(), started, failed, dead)
	waitStates(t, h, a2.GetRunId(), started, failed, dead)

	a3, b1 := run("team-a", "team-a.fails-3"), run("team-b", "team-b.healthy")
	h.produce(a3, b1)
	waitStates(t, h, b1.GetRunId(), started, succeeded)
	waitStates(t, h, a3.GetRunId(), deferred)
	assert.Equal(t, "circuit_open", lastEvent(h, a3.GetRunId(), deferred).GetReason())
	assert.Zero(t, h.down.requestsOf(a3.GetRunId()), "team A's open breaker holds its call")
}

// TestExecNameAllowedForOneTeamIsRefusedForAnother, on the real stack: a
// command allowed to team ops runs for ops and is refused, not retried, for
// payments; a command allowed on the runner's pool runs for both.
func TestExecNameAllowedForOneTeamIsRefusedForAnother(t *testing.T) {
	t.Parallel()
	h := newHarness(t, realBackends(t, 2), steadyTTL)
	dir := t.TempDir()
	exe, err := target.NewExec(target.ExecConfig{Allowed: map[string]string{
		"greet": script(t, dir, "greet.sh", `echo hello`),
		"batch": script(t, dir, "batch.sh", `echo batch`),
	}})
	require.NoError(t, err)
	h.start(func(c *Config) {
		c.Exec = exe
		c.Pool = "batch"
		c.Egress.Add(egress.Scope{Team: "ops"}, egress.Rules{Exec: []string{"greet"}})
		c.Egress.Add(egress.Scope{Pool: "batch"}, egress.Rules{Exec: []string{"batch"}})
	})
	run := func(team, command string) *sundialv1.Run {
		return h.run(team+"."+command, time.Now(), func(r *sundialv1.Run) {
			r.OwnerTeam = team
			r.Pool = "batch" // the runner executes its own pool's jobs only
			r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Exec{Exec: &sundialv1.ExecTarget{Command: command}}}
		})
	}
	opsGreet, payGreet, opsBatch, payBatch := run("ops", "greet"), run("payments", "greet"), run("ops", "batch"), run("payments", "batch")
	h.produce(opsGreet, payGreet, opsBatch, payBatch)
	waitStates(t, h, opsGreet.GetRunId(), started, succeeded)
	requireRefusedDead(t, h, payGreet, target.CodeExecNotAllowed)
	waitStates(t, h, opsBatch.GetRunId(), started, succeeded)
	waitStates(t, h, payBatch.GetRunId(), started, succeeded)
}

// TestRunnerRefusesLoopbackAndMetadataTargetsByDefault, on the real stack:
// with the default policy, a run aimed at the runner's own loopback (any
// spelling) or at the metadata address dies at its first attempt, not
// retried, and the downstream is never called; with loopback allowed to the
// team only, the team's run gets through and another team's does not.
func TestRunnerRefusesLoopbackAndMetadataTargetsByDefault(t *testing.T) {
	t.Parallel()
	b := realBackends(t, 2)
	h := newHarness(t, b, steadyTTL)
	h.start(func(c *Config) {
		c.Egress = egress.Config{}
		c.Egress.Add(egress.Scope{Team: "allowed"}, egress.LoopbackForEveryTeam().Teams[egress.EveryTeam])
	})
	port := h.down.srv.URL[strings.LastIndex(h.down.srv.URL, ":")+1:]
	var refused []*sundialv1.Run
	for i, u := range []string{h.down.srv.URL, "http://2130706433:" + port, "http://localhost:" + port, "http://169.254.169.254"} {
		refused = append(refused, h.run("payments.http-"+strconv.Itoa(i), time.Now(), func(r *sundialv1.Run) {
			r.OwnerTeam = "payments"
			r.GetTarget().GetHttp().Url = u + "/x"
		}))
	}
	ok := h.run("allowed.http", time.Now(), func(r *sundialv1.Run) { r.OwnerTeam = "allowed" })
	h.produce(append(refused, ok)...)
	waitStates(t, h, ok.GetRunId(), started, succeeded)
	for _, run := range refused {
		requireRefusedDead(t, h, run, target.CodeEgressRefused)
		assert.Zero(t, h.down.requestsOf(run.GetRunId()))
	}
}
