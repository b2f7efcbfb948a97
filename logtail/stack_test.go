package logtail_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/logtail"
	"github.com/sundialhq/sundial/logtail/logtailtest"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/runner/egress"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/store"
)

// waitFor bounds the waits of these tests: generous, the machine is shared.
const waitFor = 3 * time.Minute

// tokenAuth authenticates a token "TEAM:ROLE" as a member of TEAM.
type tokenAuth struct{}

func (tokenAuth) Authenticate(_ context.Context, bearer string) (auth.Principal, error) {
	team, roleName, ok := strings.Cut(bearer, ":")
	role, err := auth.ParseRole(roleName)
	if !ok || team == "" || err != nil {
		return auth.Principal{}, auth.Refuse(auth.ReasonUnknown, "unknown token")
	}
	return auth.Principal{Subject: "token:" + bearer, Team: team, Role: role}, nil
}

// noRetries refuses the retries these tests' runs never make.
type noRetries struct{}

func (noRetries) Enqueue(context.Context, ...store.DueEntry) error {
	return errors.New("no retry expected")
}

// lineBytes is a 100-byte line with its newline.
var lineBytes = strings.Repeat("x", 99)

// flood logs 100 MB (a million lines of 100 bytes) and then waits for
// release.
type flood struct{ release chan struct{} }

func (f flood) Handle(ctx context.Context, run *sundialv1.Run) error {
	return f.HandleAttempt(ctx, target.Request{Run: run})
}

func (f flood) HandleAttempt(ctx context.Context, req target.Request) error {
	for range 1_000_000 {
		req.Output.Append(lineBytes)
	}
	select {
	case <-f.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tailStack is a stock runner on the local stack's Kafka and Redis and an
// API serving the run service over the same Redis.
type tailStack struct {
	t      *testing.T
	names  topics.Names
	client *kgo.Client
	redis  *redis.Client
	keys   string // the runners' key prefix
	apiURL string
}

func setupStack(t *testing.T, handlers map[string]target.Handler, exe *target.Exec, specs ...*sundialv1.JobSpec) *tailStack {
	t.Helper()
	kr := testenv.NeedKafkaRedis(t, 2)
	k, rd, names, cl, rdb := kr.Kafka, kr.Redis, kr.Names, kr.Client, kr.RDB
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	cfg := runner.Config{
		ID: "tail-runner", Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Concurrency: 4,
		AnnounceInterval: 300 * time.Millisecond, RouteDelay: 300 * time.Millisecond, CommitInterval: 100 * time.Millisecond,
		Registerer: prometheus.NewRegistry(), Handlers: handlers, Exec: exe,
	}
	cfg.Egress.Add(egress.Scope{Team: egress.EveryTeam}, egress.Rules{Exec: []string{"slow"}})
	r, err := assemble.Runner(ctx, cfg, assemble.RunnerBackends{Redis: rdb, RedisKeyPrefix: rd.KeyPrefix, Enqueuer: noRetries{}})
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx))
	t.Cleanup(r.Stop)

	keys := rd.KeyPrefix + runner.DefaultKeyPrefix
	srv, err := apiserver.New(apiserver.Config{Addr: "127.0.0.1:0", Authenticator: tokenAuth{},
		Services: []apiserver.Service{logtailtest.RunService(t, rdb, keys, specs...)}})
	require.NoError(t, err)
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop)
	return &tailStack{t: t, names: names, client: cl, redis: rdb, keys: keys, apiURL: "http://" + srv.Addr().String()}
}

// produce writes a run of spec, due now, for the runner.
func (s *tailStack) produce(spec *sundialv1.JobSpec) *sundialv1.Run {
	s.t.Helper()
	due := store.Truncate(time.Now())
	run := &sundialv1.Run{
		RunId: store.RunID(spec.GetId(), due), JobId: spec.GetId(), OwnerTeam: spec.GetOwnerTeam(),
		DueTime: timestamppb.New(due), AttemptDueTime: timestamppb.New(due), Attempt: 1,
		Priority: sundialv1.Priority_PRIORITY_DEFAULT, Origin: sundialv1.RunOrigin_RUN_ORIGIN_SCHEDULE,
		Target: spec.GetTarget(), Timeout: durationpb.New(10 * time.Minute), Retry: &sundialv1.RetryPolicy{MaxAttempts: 1},
	}
	val, err := proto.Marshal(run)
	require.NoError(s.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(s.t, s.client.ProduceSync(ctx, &kgo.Record{Topic: s.names.Runs(topics.PriorityDefault), Key: []byte(run.GetJobId()), Value: val}).FirstErr())
	return run
}

func (s *tailStack) runs(token string) apiv1connect.RunServiceClient {
	return apiv1connect.NewRunServiceClient(http.DefaultClient, s.apiURL, connect.WithInterceptors(apiserver.BearerToken(token)))
}

// TestLiveLogOnTheStack runs an exec target on a stock runner on the real
// Kafka and Redis and tails its log through the API: its lines arrive
// while it runs, another team's caller gets not_found, and the tail ends
// with the run.
func TestLiveLogOnTheStack(t *testing.T) {
	t.Parallel()
	gateFile := filepath.Join(t.TempDir(), "gate")
	script := filepath.Join(t.TempDir(), "slow.sh")
	require.NoError(t, os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\ni=0\nwhile [ ! -e %q ]; do i=$((i+1)); echo \"exec line $i\"; sleep 0.2; done\necho \"exec done\"\n", gateFile)), 0o755))
	exe, err := target.NewExec(target.ExecConfig{Allowed: map[string]string{"slow": script}})
	require.NoError(t, err)
	spec := &sundialv1.JobSpec{Id: "alpha.slow", OwnerTeam: "alpha",
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Exec{Exec: &sundialv1.ExecTarget{Command: "slow"}}}}
	s := setupStack(t, nil, exe, spec)
	run := s.produce(spec)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()

	// A viewer of the run's team reads its lines while it runs: the gate
	// that ends it is not there yet.
	got := logtailtest.Follow(t, ctx, s.runs("alpha:viewer"), run.GetRunId(), func(tl logtailtest.Tailed) bool { return len(tl.Lines) >= 3 })
	require.GreaterOrEqual(t, len(got.Lines), 3, "no line arrived while the run ran")
	assert.Equal(t, []string{"exec line 1", "exec line 2", "exec line 3"}, got.Lines[:3])
	assert.False(t, got.Ended)
	_, err = os.Stat(gateFile)
	require.ErrorIs(t, err, os.ErrNotExist, "the lines came before the run could end")

	// Another team, whatever its role, does not learn the run exists.
	logtailtest.NotFound(t, ctx, map[string]apiv1connect.RunServiceClient{"beta:admin": s.runs("beta:admin"), "beta:viewer": s.runs("beta:viewer")}, run.GetRunId())

	// Open the gate: the tail ends with the run, its last line the one
	// the command wrote on its way out.
	require.NoError(t, os.WriteFile(gateFile, nil, 0o644))
	got = logtailtest.Follow(t, ctx, s.runs("alpha:viewer"), run.GetRunId(), logtailtest.Forever)
	assert.True(t, got.Ended, "the tail did not end with the run")
	require.NotEmpty(t, got.Lines)
	assert.Equal(t, "exec done", got.Lines[len(got.Lines)-1])
	assert.Equal(t, "exec line 1", got.Lines[0], "a tail opened later starts at the attempt's first line")
}

// TestLiveLogBounds runs a handler that logs 100 MB: what the runner
// ships, what Redis holds and what a tail receives stay within the
// bounds, and the lines left out are counted.
func TestLiveLogBounds(t *testing.T) {
	t.Parallel()
	f := flood{release: make(chan struct{})}
	spec := &sundialv1.JobSpec{Id: "alpha.flood", OwnerTeam: "alpha",
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "flood"}}}}
	s := setupStack(t, map[string]target.Handler{"flood": f}, nil, spec)
	run := s.produce(spec)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()

	// The handler has logged its 100 MB once lines were left out; what
	// Redis holds of the attempt is then bounded.
	got := logtailtest.Follow(t, ctx, s.runs("alpha:viewer"), run.GetRunId(), func(tl logtailtest.Tailed) bool { return tl.Dropped > 0 })
	require.Positive(t, got.Dropped)
	key := logtail.Key(s.keys, run.GetJobId(), run.GetRunId(), 1)
	mem, err := s.redis.MemoryUsage(ctx, key).Result()
	require.NoError(t, err)
	assert.Less(t, mem, int64(2*logtail.DefaultAttemptBytes), "Redis holds %d bytes of a 100 MB log", mem)
	ttl, err := s.redis.TTL(ctx, key).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl, "the attempt's log expires")

	close(f.release)
	got = logtailtest.Follow(t, ctx, s.runs("alpha:viewer"), run.GetRunId(), logtailtest.Forever)
	assert.True(t, got.Ended)
	assert.LessOrEqual(t, got.Bytes, logtail.DefaultAttemptBytes, "the tail ships at most AttemptBytes of an attempt")
	assert.Equal(t, int64(1_000_000), int64(len(got.Lines))+got.Dropped, "every line is either shipped or counted as left out")
}
