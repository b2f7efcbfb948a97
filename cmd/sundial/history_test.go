package main

import (
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// `sundial history` stores run events, and `sundial runs list` prints the
// latest state of each attempt: a run that failed within the millisecond it
// started shows failed, and one that succeeded shows succeeded. The process
// stops cleanly on SIGTERM.
func TestHistoryCommandAndRunsList(t *testing.T) {
	t.Parallel()
	cass := testenv.NeedCassandra(t)
	kafka := testenv.NeedKafka(t)
	hosts, brokers := strings.Join(cass.Hosts, ","), strings.Join(kafka.Brokers, ",")
	code, _, errOut := runCLI(t, "migrate", "--cassandra-hosts", hosts, "--keyspace", cass.Keyspace,
		"--kafka-brokers", brokers, "--topic-prefix", kafka.TopicPrefix, "--topic-replication-factor", "1", "--shards", "4", "--timeout", "2m")
	require.Equal(t, 0, code, "migrate: %s", errOut)

	cmd, _, stderr := startSundial(t, nil, "history", "--cassandra-hosts", hosts, "--keyspace", cass.Keyspace,
		"--kafka-brokers", brokers, "--topic-prefix", kafka.TopicPrefix, "--group-id", kafka.TopicPrefix+"history")

	names := topics.Names{Prefix: kafka.TopicPrefix}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka.Brokers...))
	require.NoError(t, err)
	defer cl.Close()
	job := kafka.TopicPrefix + "report"
	due1 := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	due2 := due1.Add(30 * time.Second)
	ev := func(due time.Time, state sundialv1.RunState, at time.Time, mod func(*sundialv1.RunEvent)) *sundialv1.RunEvent {
		e := &sundialv1.RunEvent{RunId: store.RunID(job, due), JobId: job, Attempt: 1, State: state,
			Time: timestamppb.New(at), DueTime: timestamppb.New(due), AttemptDueTime: timestamppb.New(due)}
		if mod != nil {
			mod(e)
		}
		return e
	}
	started := due1.Add(5*time.Millisecond + 100*time.Microsecond)
	// One key, so one partition: the second run's events are stored after
	// the first run's.
	for _, e := range []*sundialv1.RunEvent{
		ev(due1, sundialv1.RunState_RUN_STATE_STARTED, started, nil),
		ev(due1, sundialv1.RunState_RUN_STATE_FAILED, started.Add(300*time.Microsecond), func(e *sundialv1.RunEvent) {
			e.Error = &sundialv1.RunError{Code: "connection_refused"}
		}),
		ev(due2, sundialv1.RunState_RUN_STATE_STARTED, due2.Add(time.Millisecond), nil),
		ev(due2, sundialv1.RunState_RUN_STATE_SUCCEEDED, due2.Add(3*time.Millisecond), func(e *sundialv1.RunEvent) {
			e.Duration = durationpb.New(2 * time.Millisecond)
		}),
	} {
		val, err := proto.Marshal(e)
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Topic: names.Events(), Key: []byte(job), Value: val,
			Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindRunEvent)}}}).FirstErr())
	}

	second := regexp.MustCompile(regexp.QuoteMeta(store.RunID(job, due2)) + `\s+1\s+succeeded`)
	var out string
	require.Eventually(t, func() bool {
		var code int
		code, out, _ = runCLI(t, "runs", "list", "--cassandra-hosts", hosts, "--keyspace", cass.Keyspace, "--job", job)
		return code == 0 && second.MatchString(out)
	}, 2*time.Minute, 200*time.Millisecond, "the second run never showed succeeded; last output:\n%s\nhistory's stderr:\n%s", out, stderr())
	assert.Regexp(t, regexp.QuoteMeta(store.RunID(job, due1))+`\s+1\s+failed\s.*connection_refused`, out)
	assert.Contains(t, out, "2 run(s), 2 attempt(s), 1 failure(s); last "+store.RunID(job, due2)+" succeeded")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err = cmd.Wait()
	require.NoError(t, err, "stderr: %s", stderr())
	assert.Contains(t, stderr(), "stopping")
}
