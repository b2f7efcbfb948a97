package runner

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/testenv"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// waitDead waits for run's DEAD event and returns it.
func waitDead(t *testing.T, h *harness, runID string) *sundialv1.RunEvent {
	t.Helper()
	if !assert.Eventually(t, func() bool { return lastEvent(h, runID, dead) != nil }, wait, 10*time.Millisecond) {
		require.FailNow(t, "run did not die", "run %s: events %s", runID, h.events.describe(runID))
	}
	return lastEvent(h, runID, dead)
}

// httpRun is a run of team's job calling url with headers, attempted twice
// at most, so that both the retry and the dead end are logged.
func httpRun(h *harness, job, team, url string, headers map[string]string) *sundialv1.Run {
	return h.run(job, time.Now(), func(r *sundialv1.Run) {
		r.OwnerTeam = team
		r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{Url: url, Headers: headers}}}
		r.Retry.MaxAttempts = 2
	})
}

// TestRunErrorsAndLogsRedactURLSecrets runs HTTP targets whose URL carries
// an API key in its query and whose Authorization header carries a token,
// against an address that refuses connections (the client's error quotes
// the URL) and against a downstream that echoes the request in its 500
// answer (the answer's body goes into the run's error). Neither secret may
// be in any event's error or in anything the runner logged, at any level;
// the URL's harmless parts stay, so the error still says where it failed.
func TestRunErrorsAndLogsRedactURLSecrets(t *testing.T) {
	t.Parallel()
	const (
		apiKey = "LEAKY-APIKEY-7f3a9c"
		token  = "LEAKY-BEARER-51d2e8"
	)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprintf(w, "cannot serve %s with %s", r.URL.String(), r.Header.Get("Authorization"))
	}))
	t.Cleanup(echo.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close() // its port now refuses connections

	h := newHarness(t, realBackends(t, 2), steadyTTL)
	logs := &testenv.SyncBuffer{}
	h.start(func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	headers := map[string]string{"Authorization": "Bearer " + token}
	refused := httpRun(h, "secrets-refused", "team-a", closedURL+"/v1/report?apikey="+apiKey+"&page=2", headers)
	echoed := httpRun(h, "secrets-echoed", "team-a", echo.URL+"/v1/report?apikey="+apiKey+"&page=2", headers)
	h.produce(refused, echoed)

	for _, run := range []*sundialv1.Run{refused, echoed} {
		deadEv := waitDead(t, h, run.GetRunId())
		assert.Contains(t, deadEv.GetError().GetMessage(), "/v1/report?apikey=<redacted>&page=2", "the URL stays, without its key")
		for _, ev := range h.events.all() {
			if ev.GetRunId() != run.GetRunId() {
				continue
			}
			msg := ev.GetError().GetMessage()
			assert.NotContains(t, msg, apiKey, "event %s of %s", ev.GetState(), run.GetJobId())
			assert.NotContains(t, msg, token, "event %s of %s", ev.GetState(), run.GetJobId())
		}
	}
	assert.Contains(t, lastEvent(h, echoed.GetRunId(), dead).GetError().GetMessage(), "with <redacted>", "the echoed header is taken out of the answer's body")
	out := logs.String()
	require.Contains(t, out, "run failed", "the runner logged the failures")
	assert.NotContains(t, out, apiKey, "runner log:\n%s", out)
	assert.NotContains(t, out, token, "runner log:\n%s", out)
}

// TestSecretReferenceReachesDownstream runs HTTP targets whose header and
// URL name the secret "api-token" by reference, for two teams that each
// have a secret of that name and a third that has none: each team's call
// carries its own team's value (never another team's), the secret in the
// URL is escaped, the team without the secret fails at once without a
// retry, naming the secret and the team, and a reference to a name that
// escapes the team's directory resolves to nothing.
func TestSecretReferenceReachesDownstream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for team, value := range map[string]string{"team-a": "A-TOKEN+/=\n", "team-b": "B-TOKEN"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, team), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, team, "api-token"), []byte(value), 0o600))
	}
	// A file beside the teams' directories, which no reference may reach.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "api-token"), []byte("ROOT-TOKEN"), 0o600))
	secrets, err := target.NewSecretsDir(dir)
	require.NoError(t, err)

	type call struct{ auth, key string }
	var (
		mu    sync.Mutex
		calls = map[string]call{}
	)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		calls[r.Header.Get(target.HeaderJobID)] = call{auth: r.Header.Get("Authorization"), key: r.URL.Query().Get("key")}
		mu.Unlock()
	}))
	t.Cleanup(down.Close)
	callOf := func(job string) (call, bool) {
		mu.Lock()
		defer mu.Unlock()
		c, ok := calls[job]
		return c, ok
	}

	h := newHarness(t, realBackends(t, 2), steadyTTL)
	h.start(func(c *Config) { c.Secrets = secrets })
	ref := map[string]string{"Authorization": "Bearer ${secret:api-token}"}
	url := down.URL + "/hook?key=${secret:api-token}"
	a := httpRun(h, "ref-a", "team-a", url, ref)
	b := httpRun(h, "ref-b", "team-b", url, ref)
	c := httpRun(h, "ref-c", "team-c", url, ref)
	missing := httpRun(h, "ref-missing", "team-a", down.URL+"/hook", map[string]string{"Authorization": "Bearer ${secret:nope}"})
	h.produce(a, b, c, missing)

	waitStates(t, h, a.GetRunId(), started, succeeded)
	waitStates(t, h, b.GetRunId(), started, succeeded)
	got, ok := callOf("ref-a")
	require.True(t, ok)
	assert.Equal(t, call{auth: "Bearer A-TOKEN+/=", key: "A-TOKEN+/="}, got, "team-a's own secret, trailing line break dropped, escaped in the URL")
	got, ok = callOf("ref-b")
	require.True(t, ok)
	assert.Equal(t, call{auth: "Bearer B-TOKEN", key: "B-TOKEN"}, got, "team-b's own secret for the same name")

	for run, team := range map[*sundialv1.Run]string{c: "team-c", missing: "team-a"} {
		waitStates(t, h, run.GetRunId(), started, failed, dead)
		e := lastEvent(h, run.GetRunId(), dead).GetError()
		assert.Equal(t, target.CodeSecretNotFound, e.GetCode())
		assert.False(t, e.GetRetryable())
		name := "api-token"
		if run == missing {
			name = "nope"
		}
		assert.Equal(t, fmt.Sprintf("secret %q not found for team %s", name, team), e.GetMessage())
		_, called := callOf(run.GetJobId())
		assert.False(t, called, "%s never reached the downstream", run.GetJobId())
	}

	// The directory lookup itself refuses every way out of a team's
	// directory.
	for _, tc := range []struct{ team, name string }{
		{"team-a", "../team-b/api-token"}, {"..", "api-token"}, {"team-a/../team-b", "api-token"}, {"", "api-token"}, {"team-a", "..data"},
	} {
		_, err := secrets.Secret(t.Context(), tc.team, tc.name)
		assert.ErrorIs(t, err, target.ErrSecretNotFound, "team %q name %q", tc.team, tc.name)
	}
}
