package apiserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
)

// post sends body as JSON to a procedure, the way curl would, and returns
// the status code and the decoded JSON answer.
func post(t *testing.T, e *env, procedure, tok, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+procedure, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := e.http.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), "answer %q", raw)
	return res.StatusCode, out
}

func testHTTPJSON(t *testing.T, e *env, owner, other string) {
	const svc = "/sundial.api.v1.JobService/"
	id := owner + ".json"
	spec := `{"spec": {"id": "` + id + `", "ownerTeam": "` + owner + `", "labels": {"via": "json"},
		"schedule": {"cron": {"expression": "0 * * * *"}},
		"target": {"http": {"url": "http://127.0.0.1:1/json"}}}}`

	code, body := post(t, e, svc+"ApplyJob", "", spec)
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Equal(t, "unauthenticated", body["code"])
	code, body = post(t, e, svc+"ApplyJob", token(other, auth.RoleAdmin), spec)
	assert.Equal(t, http.StatusForbidden, code, "%v", body)

	code, body = post(t, e, svc+"ApplyJob", token(owner, auth.RoleAdmin), spec)
	require.Equal(t, http.StatusOK, code, "%v", body)
	assert.Equal(t, true, body["accepted"], "%v", body)
	status, _ := body["status"].(map[string]any)
	assert.Equal(t, "DEFINITION_OUTCOME_CREATED", status["outcome"], "%v", body)

	get := `{"id": "` + id + `"}`
	code, body = post(t, e, svc+"GetJob", token(owner, auth.RoleViewer), get)
	require.Equal(t, http.StatusOK, code, "%v", body)
	job, _ := body["job"].(map[string]any)
	jobSpec, _ := job["spec"].(map[string]any)
	assert.Equal(t, id, jobSpec["id"], "%v", body)
	assert.Equal(t, "SCHEDULE_KIND_CRON", job["scheduleKind"], "%v", body)

	code, body = post(t, e, svc+"GetJob", token(other, auth.RoleViewer), get)
	assert.Equal(t, http.StatusNotFound, code, "%v", body)
	assert.Equal(t, "not_found", body["code"])

	code, body = post(t, e, svc+"ListJobs", token(other, auth.RoleViewer), `{"filter": {"labels": {"via": "json"}}}`)
	require.Equal(t, http.StatusOK, code, "%v", body)
	assert.Empty(t, body["jobs"], "other team lists nothing of the owner's")
	code, body = post(t, e, svc+"ListJobs", token(owner, auth.RoleViewer), `{"filter": {"labels": {"via": "json"}}}`)
	require.Equal(t, http.StatusOK, code, "%v", body)
	assert.Len(t, body["jobs"], 1)

	// Bad requests get a clear error with the right status.
	code, body = post(t, e, svc+"GetJob", token(owner, auth.RoleViewer), `{"id": "x", "colour": "blue"}`)
	assert.Equal(t, http.StatusBadRequest, code, "unknown field: %v", body)
	assert.Contains(t, body["message"], "colour")
	code, body = post(t, e, svc+"ListJobs", token(owner, auth.RoleViewer), `{"page": {"size": 10000}}`)
	assert.Equal(t, http.StatusBadRequest, code, "%v", body)
	assert.Contains(t, body["message"], "page.size")
	code, body = post(t, e, svc+"ListJobs", token(owner, auth.RoleViewer), `{"page": {"token": "%%%"}}`)
	assert.Equal(t, http.StatusBadRequest, code, "%v", body)
	assert.Contains(t, body["message"], "page.token")

	code, body = post(t, e, svc+"DeleteJob", token(other, auth.RoleAdmin), get)
	assert.Equal(t, http.StatusNotFound, code, "%v", body)
	code, body = post(t, e, svc+"DeleteJob", token(owner, auth.RoleAdmin), get)
	require.Equal(t, http.StatusOK, code, "%v", body)
	status, _ = body["status"].(map[string]any)
	assert.Equal(t, "DEFINITION_OUTCOME_DELETED", status["outcome"], "%v", body)
}

func testHealthAndMetrics(t *testing.T, e *env, owner, _ string) {
	for _, path := range []string{apiserver.HealthPath, apiserver.MetricsPath} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.url+path, nil)
		require.NoError(t, err)
		res, err := e.http.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode, path)
	}
	// A refused call and a call of another team are counted by code.
	code, _ := post(t, e, "/sundial.api.v1.JobService/GetJob", "", `{"id": "x"}`)
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = post(t, e, "/sundial.api.v1.JobService/GetJob", token(owner, auth.RoleViewer), `{"id": "`+owner+`.missing"}`)
	require.Equal(t, http.StatusNotFound, code)
	families, err := e.metrics.Gather()
	require.NoError(t, err)
	seen := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "sundial_api_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var procedure, c string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "procedure":
					procedure = l.GetValue()
				case "code":
					c = l.GetValue()
				}
			}
			seen[procedure+" "+c] = m.GetCounter().GetValue()
		}
	}
	assert.GreaterOrEqual(t, seen["/sundial.api.v1.JobService/GetJob unauthenticated"], 1.0, "%v", seen)
	assert.GreaterOrEqual(t, seen["/sundial.api.v1.JobService/GetJob not_found"], 1.0, "%v", seen)
}
