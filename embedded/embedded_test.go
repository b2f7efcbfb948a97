package embedded

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"connectrpc.com/connect"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/internal/testenv"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startWithAPI starts a pipeline with the sample handlers and the API on a
// loopback port, as `sundial dev` does, accepting tokens (TEAM:ROLE:SECRET);
// it is stopped at cleanup. ctx bounds the test.
func startWithAPI(t *testing.T, tokens ...string) (p *Pipeline, ctx context.Context) {
	t.Helper()
	p, err := New(Config{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler), Handlers: SampleHandlers(),
		APIAddr: "127.0.0.1:0", APITokens: tokens})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	require.NoError(t, p.Start(ctx))
	t.Cleanup(p.Stop)
	return p, ctx
}

// as are the client options that call the API with the token secret.
func as(secret string) []connect.ClientOption {
	return []connect.ClientOption{connect.WithInterceptors(apiserver.BearerToken(secret))}
}

// dagRunSucceeded matches the watch line of a sample DAG run that
// succeeded, and takes its id.
var dagRunSucceeded = regexp.MustCompile(`(?m)dev\.hello-dag\s+SUCCEEDED\s+dag_run=(\S+)$`)

// TestStartStopTwice stops a pipeline before it starts and twice in a row,
// and starts it again after a Stop, with one registry for the metrics of
// both runs: each run registers a job, and goleak (TestMain) finds no
// goroutine left behind.
func TestStartStopTwice(t *testing.T) {
	t.Parallel()
	p, err := New(Config{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	p.Stop() // before Start: nothing to stop
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for i := range 2 {
		require.NoError(t, p.Start(ctx), "start %d", i+1)
		require.Error(t, p.Start(ctx), "a second Start while running")
		spec := SampleJobs(p.EchoURL())[0]
		receipts, err := p.Client().ApplyAll(ctx, sundialv1.EncodingProtobuf, spec)
		require.NoError(t, err)
		statuses, err := p.Client().WaitStatus(ctx, receipts...)
		require.NoError(t, err)
		require.Len(t, statuses, 1)
		// Each run has new, empty backends: the job is new again.
		require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, statuses[0].GetOutcome(),
			"run %d: %v", i+1, statuses[0])
		p.Stop()
		p.Stop()
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	assert.NoError(t, Config{}.Validate())
	assert.ErrorContains(t, Config{Shards: -1}.Validate(), "shards -1")
	assert.ErrorContains(t, Config{Shards: 5000}.Validate(), "shards 5000")
}

// TestSamplesRunEndToEnd runs the pipeline as `sundial dev` does, with the
// sample jobs and DAG sped up: the cron and HTTP jobs succeed, the flaky job
// is retried and lands in the dead-letter topic, a run of the DAG succeeds
// with each of its nodes, and a trigger naming the DAG starts a run of it.
func TestSamplesRunEndToEnd(t *testing.T) {
	t.Parallel()
	p, err := New(Config{Handlers: SampleHandlers()})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	defer p.Stop()

	specs := SampleJobs(p.EchoURL())
	second := durationpb.New(time.Second)
	for _, s := range specs {
		if s.GetId() != "dev.hello-cron" {
			// Every second instead of every 10 or 30.
			s.Schedule.Kind = &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: second}}
		}
		if s.GetRetry() != nil {
			s.Retry.InitialBackoff, s.Retry.MaxBackoff = durationpb.New(100*time.Millisecond), durationpb.New(200*time.Millisecond)
		}
	}
	receipts, err := p.Client().ApplyAll(ctx, sundialv1.EncodingProtobuf, specs...)
	require.NoError(t, err)
	statuses, err := p.Client().WaitStatus(ctx, receipts...)
	require.NoError(t, err)
	for _, st := range statuses {
		require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, st.GetOutcome(), "%s: %v", st.GetJobId(), st.GetErrors())
	}
	dag := SampleDag()
	dag.Schedule.Kind = &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: second}}
	require.NoError(t, p.ApplyDag(ctx, dag))

	out := &testenv.SyncBuffer{}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() { watched <- p.Watch(watchCtx, out) }()
	defer func() {
		stopWatch()
		require.NoError(t, <-watched)
	}()

	require.Eventually(t, func() bool {
		s := out.String()
		return strings.Contains(s, "dev.hello-cron   SUCCEEDED") &&
			strings.Contains(s, "dev.echo-http    SUCCEEDED") &&
			strings.Contains(s, "dev.flaky        RETRYING") &&
			strings.Contains(s, "dev.flaky        DLQ") &&
			dagRunSucceeded.MatchString(s)
	}, 90*time.Second, 100*time.Millisecond, "watch output so far:\n%s", out)
	assert.NotContains(t, out.String(), "undecodable")

	// The first DAG run that succeeded ran each of its nodes.
	run := dagRunSucceeded.FindStringSubmatch(out.String())[1]
	for _, node := range []string{"extract-a", "extract-b", "join", "publish"} {
		assert.Regexp(t, `dev\.hello-dag\s+SUCCEEDED\s+dag_run=`+regexp.QuoteMeta(run)+` node=`+node+` `, out.String())
	}

	// A trigger naming the DAG starts a run of it, due at the requested
	// time (half past a second: no scheduled run has that id).
	at := time.Now().UTC().Truncate(time.Second).Add(500 * time.Millisecond)
	_, err = p.Client().SendTrigger(ctx, &sundialv1.Trigger{JobId: dag.GetId(), IdempotencyKey: "test", RequestedAt: timestamppb.New(at)})
	require.NoError(t, err)
	triggered := dagrun.RunID(dag.GetId(), at)
	require.Eventually(t, func() bool {
		row, err := p.Store().GetDagRun(ctx, triggered)
		return err == nil && row.Status == "succeeded"
	}, 30*time.Second, 50*time.Millisecond, "DAG run %s", triggered)
	row, err := p.Store().GetDagRun(ctx, triggered)
	require.NoError(t, err)
	assert.Equal(t, dagengine.OriginTrigger, row.Origin)

	// The history writer keeps the runs: the flaky job's run is dead after
	// its attempts.
	require.Eventually(t, func() bool {
		sum, err := p.Store().JobSummary(ctx, "dev.flaky")
		return err == nil && sum.Failures > 0
	}, 30*time.Second, 50*time.Millisecond)
	runs, err := p.Store().ListRuns(ctx, "dev.hello-cron", 10)
	require.NoError(t, err)
	assert.NotEmpty(t, runs)
}

// TestAPIServesTheDocsExampleToItsTeam serves the API on the embedded
// pipeline, as `sundial dev` does: docs/examples/hello.json, applied through
// the API with its team's token, runs on the built-in noop handler, and its
// runs are listed to its team and to nobody else's.
func TestAPIServesTheDocsExampleToItsTeam(t *testing.T) {
	t.Parallel()
	p, ctx := startWithAPI(t, "examples:admin:examples-secret", "dev:admin:dev-secret")
	require.NotEmpty(t, p.APIURL())

	raw, err := os.ReadFile("../docs/examples/hello.json")
	require.NoError(t, err)
	var specs []*sundialv1.JobSpec
	for spec, err := range client.DecodeSpecs(bytes.NewReader(raw)) {
		require.NoError(t, err)
		specs = append(specs, spec)
	}
	require.Len(t, specs, 1)

	jobs := apiv1connect.NewJobServiceClient(http.DefaultClient, p.APIURL(), as("examples-secret")...)
	applied, err := jobs.ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: specs[0]}))
	require.NoError(t, err)
	require.True(t, applied.Msg.GetAccepted(), "%v", applied.Msg.GetStatus())

	runs := apiv1connect.NewRunServiceClient(http.DefaultClient, p.APIURL(), as("examples-secret")...)
	var got *apiv1.ListRunsResponse
	require.Eventually(t, func() bool {
		resp, err := runs.ListRuns(ctx, connect.NewRequest(&apiv1.ListRunsRequest{JobId: "hello"}))
		if err != nil {
			return false
		}
		got = resp.Msg
		return slices.ContainsFunc(got.GetAttempts(), func(a *apiv1.AttemptDetail) bool {
			return a.GetState() == apiv1.RunAttemptState_RUN_ATTEMPT_STATE_SUCCEEDED
		})
	}, 3*time.Minute, 200*time.Millisecond, "no succeeded run of hello listed")

	// Another team's admin sees neither the job nor its runs.
	other := apiv1connect.NewRunServiceClient(http.DefaultClient, p.APIURL(), as("dev-secret")...)
	resp, err := other.ListRuns(ctx, connect.NewRequest(&apiv1.ListRunsRequest{JobId: "hello"}))
	if err == nil {
		assert.Empty(t, resp.Msg.GetAttempts(), "team dev listed team examples' runs")
	} else {
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
	}
	_, err = apiv1connect.NewJobServiceClient(http.DefaultClient, p.APIURL(), as("dev-secret")...).
		GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: "hello"}))
	assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
}

// TestAPITeamServiceIssuesTokensThatCallIt: on `sundial dev`, a team's
// admin (a static token) creates a token of its team through the team
// service; that token calls the API as its role, and once revoked is
// refused.
func TestAPITeamServiceIssuesTokensThatCallIt(t *testing.T) {
	t.Parallel()
	p, ctx := startWithAPI(t, "dev:admin:dev-secret", "*:admin:root-secret")

	teams, err := apiv1connect.NewTeamServiceClient(http.DefaultClient, p.APIURL(), as("root-secret")...).
		ListTeams(ctx, connect.NewRequest(&apiv1.ListTeamsRequest{}))
	require.NoError(t, err)
	var names []string
	for _, tm := range teams.Msg.GetTeams() {
		names = append(names, tm.GetName())
	}
	assert.Equal(t, DefaultTeams, names, "the pipeline's teams exist")

	admin := apiv1connect.NewTeamServiceClient(http.DefaultClient, p.APIURL(), as("dev-secret")...)
	created, err := admin.CreateToken(ctx, connect.NewRequest(&apiv1.CreateTokenRequest{Role: "viewer", Description: "dashboard"}))
	require.NoError(t, err)
	bearer := created.Msg.GetBearer()
	who, err := apiv1connect.NewIdentityServiceClient(http.DefaultClient, p.APIURL(), as(bearer)...).
		WhoAmI(ctx, connect.NewRequest(&apiv1.WhoAmIRequest{}))
	require.NoError(t, err)
	assert.Equal(t, "dev", who.Msg.GetTeam())
	assert.Equal(t, "viewer", who.Msg.GetRole())

	_, err = admin.RevokeToken(ctx, connect.NewRequest(&apiv1.RevokeTokenRequest{Id: created.Msg.GetToken().GetId()}))
	require.NoError(t, err)
	_, err = apiv1connect.NewIdentityServiceClient(http.DefaultClient, p.APIURL(), as(bearer)...).
		WhoAmI(ctx, connect.NewRequest(&apiv1.WhoAmIRequest{}))
	assert.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "%v", err)
}
