package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/internal/connect/testpki"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

// bearerCallers stands in for the API server's authentication in these
// tests: a known bearer token puts its principal in the context.
func bearerCallers(h http.Handler, tokens map[string]auth.Principal) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := tokens[r.Header.Get("Authorization")]; ok {
			r = r.WithContext(auth.NewContext(r.Context(), p))
		}
		h.ServeHTTP(w, r)
	})
}

var testTokens = map[string]auth.Principal{
	"Bearer tok-billing": {Subject: "token:billing", Team: "billing", Role: auth.RoleViewer},
	"Bearer tok-search":  {Subject: "token:search", Team: "search", Role: auth.RoleViewer},
}

// noEvents is a run event reader over an empty topic: these tests compare
// the attempts the two paths print, which come from the history.
type noEvents struct{}

func (noEvents) RunEvents(context.Context, string, string) ([]*sundialv1.RunEvent, error) {
	return nil, nil
}

// cliOutput runs the command line and returns its output, failing on a
// non-zero exit.
func cliOutput(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runCLI(t, args...)
	require.Equal(t, 0, code, "sundial %v: %s", args, errOut)
	return out
}

// TestRunsThroughAPI prints a job's runs and one run from the store
// directly and through the API, and compares: the output must not depend
// on the path. Another team's token sees nothing, and no token is refused.
func TestRunsThroughAPI(t *testing.T) {
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	ctx := t.Context()
	_, err = st.InitCluster(ctx, 4)
	require.NoError(t, err)
	spec, err := proto.Marshal(&sundialv1.JobSpec{Id: "billing.invoice", OwnerTeam: "billing"})
	require.NoError(t, err)
	_, err = st.UpsertJob(ctx, store.Job{ID: "billing.invoice", Spec: spec, Revision: 1, UpdatedAt: time.Now()})
	require.NoError(t, err)
	due := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	runID := store.RunID("billing.invoice", due)
	for _, r := range []store.RunRecord{
		{JobID: "billing.invoice", RunID: runID, Attempt: 1, Due: due, State: store.StateFailed, Started: due, Finished: due.Add(40 * time.Millisecond),
			Duration: 40 * time.Millisecond, Error: "handler_error: ledger unavailable", Log: []string{"invoicing 3 lines"}, UpdatedAt: due.Add(time.Second)},
		{JobID: "billing.invoice", RunID: runID, Attempt: 2, Due: due, AttemptDue: due.Add(2 * time.Second), State: store.StateSucceeded,
			Started: due.Add(2 * time.Second), Finished: due.Add(2*time.Second + 15*time.Millisecond), Duration: 15 * time.Millisecond, UpdatedAt: due.Add(3 * time.Second)},
		{JobID: "billing.invoice", RunID: store.RunID("billing.invoice", due.Add(time.Hour)), Attempt: 1, Due: due.Add(time.Hour), State: store.StateScheduled, UpdatedAt: due},
	} {
		require.NoError(t, st.RecordRun(ctx, r))
	}
	svc, err := apiserver.NewRunService(apiserver.RunServiceConfig{History: st, Jobs: st, DagRuns: st, Events: noEvents{},
		Logger: testLogger(t)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(apiv1connect.NewRunServiceHandler(svc))
	srv := httptest.NewServer(bearerCallers(mux, testTokens))
	t.Cleanup(srv.Close)

	var direct bytes.Buffer
	cmd := &cli.Command{Writer: &direct}
	require.NoError(t, printRuns(ctx, emitter{w: cmd.Root().Writer, form: outputTable}, storeRuns{st}, "billing.invoice", 20, runFilter{}))
	require.NoError(t, printRun(ctx, emitter{w: cmd.Root().Writer, form: outputTable}, storeRuns{st}, "billing.invoice", runID, 1000))

	// The token comes from the environment, as it should in practice.
	t.Setenv("SUNDIAL_API_TOKEN", "tok-billing")
	viaAPI := cliOutput(t, "runs", "list", "--job", "billing.invoice", "--api-url", srv.URL) +
		cliOutput(t, "runs", "get", runID, "--api-url", srv.URL)
	assert.Equal(t, direct.String(), viaAPI)
	assert.Contains(t, viaAPI, "job billing.invoice: 1 run(s), 2 attempt(s), 1 failure(s)")

	t.Setenv("SUNDIAL_API_TOKEN", "tok-search")
	other := cliOutput(t, "runs", "list", "--job", "billing.invoice", "--api-url", srv.URL)
	assert.NotContains(t, other, runID, "another team's token lists none of the runs")
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"sundial", "runs", "get", runID, "--api-url", srv.URL}, &out, &errOut)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut.String(), "not_found")

	require.NoError(t, os.Unsetenv("SUNDIAL_API_TOKEN"))
	out.Reset()
	errOut.Reset()
	code = run(ctx, []string{"sundial", "runs", "list", "--job", "billing.invoice", "--api-url", srv.URL}, &out, &errOut)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut.String(), "unauthenticated")

	errOut.Reset()
	code = run(ctx, []string{"sundial", "runs", "list", "--job", "x", "--api-url", "ftp://nowhere"}, &out, &errOut)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut.String(), "--api-url")
}

// TestDlqListThroughAPI lists the dead letters of a real Kafka directly and
// through the API, and compares.
func TestDlqListThroughAPI(t *testing.T) {
	k := testenv.NeedKafka(t)
	ctx := t.Context()
	names := topics.Names{Prefix: k.TopicPrefix}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopic(ctx, 2, -1, nil, names.DLQ())
	require.NoError(t, err)
	require.NoError(t, created.Err)
	require.Eventually(t, func() bool {
		ends, err := adm.ListEndOffsets(ctx, names.DLQ())
		return err == nil && ends.Error() == nil && len(ends[names.DLQ()]) == 2
	}, time.Minute, 50*time.Millisecond, "topic %s visible", names.DLQ())
	deadAt := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, team := range []string{"billing", "billing", "search"} {
		deadAt = deadAt.Add(time.Minute)
		dl := &sundialv1.DeadLetter{Run: &sundialv1.Run{RunId: store.RunID(team+".job", deadAt), JobId: team + ".job", OwnerTeam: team},
			Attempts: 3, DeadAt: timestamppb.New(deadAt), LastError: &sundialv1.RunError{Code: "http_500", Message: "boom"}}
		val, err := proto.Marshal(dl)
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: names.DLQ(), Key: []byte(dl.GetRun().GetJobId()), Value: val}).FirstErr())
	}
	svc, err := apiserver.NewDlqService(apiserver.DlqServiceConfig{
		DeadLetters: apiserver.KafkaDeadLetters{Opts: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topic: names.DLQ()},
		Jobs:        mustMemoryStore(t), Enqueuer: refuseEnqueue{t}, Now: time.Now, Logger: testLogger(t)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(apiv1connect.NewDlqServiceHandler(svc))
	srv := httptest.NewServer(bearerCallers(mux, testTokens))
	t.Cleanup(srv.Close)

	brokers := "--kafka-brokers=" + k.Brokers[0]
	direct := cliOutput(t, "dlq", "list", brokers, "--topic-prefix", k.TopicPrefix, "--job", "billing.job")
	viaAPI := cliOutput(t, "dlq", "list", "--api-url", srv.URL, "--api-token", "tok-billing", "--job", "billing.job")
	assert.Equal(t, direct, viaAPI)
	assert.Contains(t, viaAPI, "2 dead run(s)")
	other := cliOutput(t, "dlq", "list", "--api-url", srv.URL, "--api-token", "tok-search", "--job", "billing.job")
	assert.Contains(t, other, "0 dead run(s)", "another team's token sees none of billing's dead runs")
}

// refuseEnqueue fails the test if a list ever enqueues.
type refuseEnqueue struct{ t *testing.T }

func (r refuseEnqueue) Enqueue(context.Context, ...store.DueEntry) error {
	r.t.Error("dlq list enqueued")
	return nil
}

// testLogger writes to the test's log (testenv.Logger).
func testLogger(t *testing.T) *slog.Logger { return testenv.Logger(t, slog.LevelInfo) }

func mustMemoryStore(t *testing.T) *memory.Store {
	t.Helper()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	return st
}

// TestAPICommandsOverMutualTLS: the commands that go through the API trust
// --api-tls-ca-file and present --api-tls-cert-file, the keys a team's
// worker reads too; an API that requires a client certificate refuses a
// command without one.
func TestAPICommandsOverMutualTLS(t *testing.T) {
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	_, err = st.InitCluster(t.Context(), 4)
	require.NoError(t, err)
	svc, err := apiserver.NewRunService(apiserver.RunServiceConfig{History: st, Jobs: st, DagRuns: st, Events: noEvents{}, Logger: testLogger(t)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(apiv1connect.NewRunServiceHandler(svc))
	pki := testpki.New(t)
	srv := httptest.NewUnstartedServer(bearerCallers(mux, testTokens))
	srv.TLS = pki.ServerTLS(true)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	t.Setenv("SUNDIAL_API_TOKEN", "tok-billing")

	out := cliOutput(t, "runs", "list", "--job", "billing.invoice", "--api-url", srv.URL,
		"--api-tls-ca-file", pki.CA, "--api-tls-cert-file", pki.ClientCert, "--api-tls-key-file", pki.ClientKey)
	assert.Contains(t, out, "billing.invoice")

	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"sundial", "runs", "list", "--job", "billing.invoice", "--api-url", srv.URL, "--api-tls-ca-file", pki.CA}, &stdout, &stderr)
	assert.Equal(t, 1, code, "an API requiring a client certificate answered a command without one")
	code = run(t.Context(), []string{"sundial", "runs", "list", "--job", "billing.invoice", "--api-url", srv.URL, "--api-tls-cert-file", pki.ClientCert}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "--api-tls-key-file: required with a cert file")
}
