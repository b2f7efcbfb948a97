package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/auth/oidc/oidctest"
	"github.com/sundialhq/sundial/internal/testenv"
)

func TestAPIFlagErrors(t *testing.T) {
	t.Setenv(envName("api-static-token"), "")
	code, _, errOut := runCLI(t, "api", "--kafka-brokers", "127.0.0.1:1", "--cassandra-hosts", "127.0.0.1",
		"--api-static-token", "data:root:hunter2", "--api-static-token", "data:admin")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `static token 1: role "root"`)
	assert.Contains(t, errOut, "static token 2: want TEAM:ROLE:SECRET")
	assert.NotContains(t, errOut, "hunter2")

	t.Setenv(envName("redis-addr"), "")
	t.Setenv(envName("redis-sentinel-master"), "")
	code, _, errOut = runCLI(t, "api", "--kafka-brokers", "127.0.0.1:1", "--cassandra-hosts", "127.0.0.1", "--worker-gateway")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--worker-gateway: needs --redis-addr")

	code, _, errOut = runCLI(t, "api", "--kafka-brokers", "127.0.0.1:1", "--cassandra-hosts", "127.0.0.1",
		"--console=false", "--oidc-console-client-id", "sundial-console")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--oidc-console-client-id: names the web console's client at the provider, but --console=false turns the console off")
}

func TestAPIConfigPrintMasksTokens(t *testing.T) {
	t.Setenv(envName("api-static-token"), "data:admin:hunter2")
	code, out, errOut := runCLI(t, "config", "print", "api")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `api-static-token\s+\*{8}\s+environment variable`, out)
	assert.NotContains(t, out, "hunter2")
}

// TestAPIServes runs `sundial api` on the real stack and calls it as the
// owner of a token, as another team and without a token. It runs with the
// web console turned off (--console=false): the console's paths answer
// 404, and the API answers as it does beside the console.
func TestAPIServes(t *testing.T) {
	t.Parallel()
	cass := testenv.NeedCassandra(t)
	kafka := testenv.NeedKafka(t)
	rd := testenv.NeedRedis(t)
	backends := []string{
		"--cassandra-hosts", strings.Join(cass.Hosts, ","), "--keyspace", cass.Keyspace,
		"--kafka-brokers", strings.Join(kafka.Brokers, ","), "--topic-prefix", kafka.TopicPrefix,
	}
	code, _, errOut := runCLI(t, append([]string{"migrate", "--topic-replication-factor", "1", "--shards", "4", "--timeout", "2m"}, backends...)...)
	require.Equal(t, 0, code, "migrate: %s", errOut)
	store := []string{"--cassandra-hosts", strings.Join(cass.Hosts, ","), "--keyspace", cass.Keyspace}
	for _, team := range []string{"data", "ops"} {
		code, _, errOut = runCLI(t, append([]string{"teams", "create", team}, store...)...)
		require.Equal(t, 0, code, "teams create %s: %s", team, errOut)
	}
	code, out, errOut := runCLI(t, append([]string{"tokens", "create", "--team", "data", "--role", "viewer"}, store...)...)
	require.Equal(t, 0, code, "tokens create: %s", errOut)
	teamToken := strings.TrimSpace(out)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	// A local OpenID provider whose JWTs the server accepts beside the
	// tokens.
	idp := oidctest.New(t)
	jwt := func(team string, exp time.Time) string {
		return idp.Sign(t, map[string]any{
			"iss": idp.URL(), "sub": "alice", "aud": "sundial",
			"iat": time.Now().Add(-time.Hour).Unix(), "exp": exp.Unix(),
			"sundial_team": team, "sundial_role": "viewer",
		})
	}

	ctx, stop := context.WithCancel(t.Context())
	var serverOut, errBuf bytes.Buffer
	exited := make(chan int)
	go func() {
		exited <- run(ctx, append([]string{"sundial", "api", "--listen", addr,
			"--api-static-token", "data:viewer:data-secret", "--api-static-token", "ops:viewer:ops-secret",
			"--oidc-issuer", idp.URL(), "--oidc-audience", "sundial", "--console=false",
			"--worker-gateway", "--redis-addr", rd.Addr, "--redis-key-prefix", rd.KeyPrefix}, backends...), &serverOut, &errBuf)
	}()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	httpc := &http.Client{Transport: tr}
	call := func(path, tok, body string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := httpc.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	// Wait for the server to listen (or the command to fail).
	for {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/healthz", nil)
		require.NoError(t, err)
		if res, err := httpc.Do(req); err == nil {
			_ = res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode)
			break
		}
		select {
		case code := <-exited:
			t.Fatalf("sundial api exited with %d before serving: %s", code, errBuf.String())
		case <-time.After(50 * time.Millisecond):
		}
	}

	// The console is off: its paths and the root answer 404, with or
	// without a token, and redirect nowhere.
	for _, path := range []string{"/console/", "/console/js/api.js", "/console/signin.json", "/console", "/"} {
		for _, tok := range []string{"", "data-secret"} {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
			require.NoError(t, err)
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			res, err := tr.RoundTrip(req)
			require.NoError(t, err)
			_ = res.Body.Close()
			assert.Equal(t, http.StatusNotFound, res.StatusCode, "GET %s (token %q) with the console off", path, tok)
		}
	}

	code, body := call("/sundial.api.v1.JobService/ListJobs", "", `{}`)
	assert.Equal(t, http.StatusUnauthorized, code, body)
	code, body = call("/sundial.api.v1.JobService/ListJobs", "data-secret", `{}`)
	assert.Equal(t, http.StatusOK, code, body)
	assert.JSONEq(t, `{}`, body, "an empty store lists nothing")
	code, body = call("/sundial.api.v1.JobService/GetJob", "ops-secret", `{"id": "data.nightly"}`)
	assert.Equal(t, http.StatusNotFound, code, body)
	code, body = call("/sundial.api.v1.JobService/ApplyJob", "data-secret", `{"spec": {"id": "data.x", "ownerTeam": "data"}}`)
	assert.Equal(t, http.StatusForbidden, code, "a viewer applies: %s", body)

	// A team token from the token store works beside the static ones, and
	// every service is mounted.
	code, body = call("/sundial.api.v1.JobService/ListJobs", teamToken, `{}`)
	assert.Equal(t, http.StatusOK, code, body)
	code, body = call("/sundial.api.v1.JobService/ListJobs", teamToken+"x", `{}`)
	assert.Equal(t, http.StatusUnauthorized, code, "a wrong secret: %s", body)
	code, body = call("/sundial.api.v1.RunService/GetRun", teamToken, `{"runId": "data.nightly@1700000000000"}`)
	assert.Equal(t, http.StatusNotFound, code, body)
	code, body = call("/sundial.api.v1.ClusterService/GetCluster", teamToken, `{}`)
	assert.Equal(t, http.StatusForbidden, code, "the cluster view is the cluster admin's: %s", body)
	code, body = call("/sundial.api.v1.DlqService/ListDeadLetters", teamToken, `{}`)
	assert.Equal(t, http.StatusOK, code, body)
	// The worker gateway (--worker-gateway) is mounted: a viewer may not
	// take its team's runs.
	code, body = call("/sundial.api.v1.WorkerService/Poll", teamToken, `{"workerId": "w", "handlers": ["h"]}`)
	assert.Equal(t, http.StatusForbidden, code, "a viewer polls: %s", body)

	// JWTs of the provider: the owner's and another team's answers are
	// those of the static tokens; an expired one is refused, saying why.
	code, body = call("/sundial.api.v1.JobService/ListJobs", jwt("data", time.Now().Add(time.Hour)), `{}`)
	assert.Equal(t, http.StatusOK, code, "a valid JWT: %s", body)
	code, body = call("/sundial.api.v1.JobService/GetJob", jwt("ops", time.Now().Add(time.Hour)), `{"id": "data.nightly"}`)
	assert.Equal(t, http.StatusNotFound, code, "another team's JWT: %s", body)
	code, body = call("/sundial.api.v1.JobService/ListJobs", jwt("data", time.Now().Add(-time.Minute)), `{}`)
	assert.Equal(t, http.StatusUnauthorized, code, "an expired JWT: %s", body)
	assert.Contains(t, body, "expired", "the refusal says why")
	code, body = call("/sundial.api.v1.JobService/ApplyJob", jwt("ghost", time.Now().Add(time.Hour)), `{"spec": {"id": "ghost.x", "ownerTeam": "ghost"}}`)
	assert.Equal(t, http.StatusUnauthorized, code, "a JWT of a team that does not exist (finding 13): %s", body)
	assert.Contains(t, body, `team \"ghost\" does not exist`, "the refusal says why")

	// Bad requests: each is refused as invalid, naming what is wrong.
	for _, c := range []struct{ name, body, want string }{
		{"unknown field", `{"bogus": 1}`, "bogus"},
		{"bad page token", `{"page": {"token": "not-a-token"}}`, "page.token"},
		{"oversized page", `{"page": {"size": 100000}}`, "page.size"},
	} {
		for _, tok := range []string{"data-secret", "ops-secret"} {
			code, body = call("/sundial.api.v1.JobService/ListJobs", tok, c.body)
			assert.Equal(t, http.StatusBadRequest, code, "%s as %s: %s", c.name, tok, body)
			assert.Contains(t, body, c.want, "%s as %s", c.name, tok)
		}
	}

	stop()
	assert.Equal(t, 0, <-exited, errBuf.String())
}
