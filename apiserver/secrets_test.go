package apiserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/jobspec"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// The downstream credentials of the secret definitions below. None may be
// in any answer, audit record or feed record.
const (
	headerSecret = "Bearer HDR-SECRET-4b1f0e"
	tenantSecret = "TENANT-SECRET-9c2d71"
	querySecret  = "QRY-SECRET-77ae03"
)

var allSecrets = []string{headerSecret, tenantSecret, querySecret, "HDR-SECRET", "SECRET-9c2d71", "QRY-SECRET"}

// secretTarget is an HTTP target with a secret in a header secret by
// name, one in a header marked secret, one in the URL's query, and a
// secret reference, which is no secret.
func secretTarget() *sundialv1.HttpTarget {
	return &sundialv1.HttpTarget{
		Url: "https://downstream.example/v1/sync?apikey=" + querySecret + "&page=1",
		Headers: map[string]string{
			"Authorization": headerSecret,
			"X-Tenant":      tenantSecret,
			"X-Upstream":    "Bearer ${secret:upstream-token}",
			"Content-Type":  "application/json",
		},
		SecretHeaders: []string{"x-tenant"},
	}
}

func secretJob(id, team string) *sundialv1.JobSpec {
	spec := cronJob(id, team)
	spec.Description = "syncs with the downstream"
	spec.Target = &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: secretTarget()}}
	return spec
}

// requireNoSecret fails when m, as JSON, holds any secret.
func requireNoSecret(t *testing.T, what string, m proto.Message) {
	t.Helper()
	b, err := protojson.Marshal(m)
	require.NoError(t, err)
	requireNoSecretText(t, what, string(b))
}

func requireNoSecretText(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range allSecrets {
		require.NotContains(t, text, s, "%s holds a secret: %s", what, text)
	}
}

// requireRedacted checks that h is secretTarget as every caller must see
// it: secret values redacted, the reference and the rest as written.
func requireRedacted(t *testing.T, what string, h *sundialv1.HttpTarget) {
	t.Helper()
	assert.Equal(t, "https://downstream.example/v1/sync?apikey=<redacted>&page=1", h.GetUrl(), what)
	assert.Equal(t, map[string]string{
		"Authorization": jobspec.Redacted,
		"X-Tenant":      jobspec.Redacted,
		"X-Upstream":    "Bearer ${secret:upstream-token}",
		"Content-Type":  "application/json",
	}, h.GetHeaders(), what)
}

// TestViewerCannotReadDownstreamCredentials reads a job and a DAG whose
// HTTP targets carry downstream credentials, through every answer that
// returns a definition (GetJob, GetJobView, ListJobs, SearchJobs, GetDag,
// ListDags) as the team's viewer, operator and admin and as the cluster
// admin: every one shows the secret values as "<redacted>" and the secret
// reference as written, and no answer holds a secret anywhere.
func TestViewerCannotReadDownstreamCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const team = "sec-views"
	id := team + ".sync"
	apply(t, e, token(team, auth.RoleAdmin), secretJob(id, team))
	dagID := team + ".flow"
	dagSpec := twoNodeDag(dagID, team)
	dagSpec.Nodes[0].GetInline().Target = &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: secretTarget()}}
	res, err := e.dags(token(team, auth.RoleAdmin)).ApplyDag(ctx, connect.NewRequest(&apiv1.ApplyDagRequest{Spec: dagSpec}))
	require.NoError(t, err)
	require.True(t, res.Msg.GetAccepted(), "%v", res.Msg.GetStatus())

	for _, tok := range []string{token(team, auth.RoleViewer), token(team, auth.RoleOperator), token(team, auth.RoleAdmin), clusterAdminToken} {
		jobs := e.jobs(tok)
		got, err := jobs.GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: id}))
		require.NoError(t, err, tok)
		requireNoSecret(t, "GetJob as "+tok, got.Msg)
		requireRedacted(t, "GetJob as "+tok, got.Msg.GetJob().GetSpec().GetTarget().GetHttp())

		view, err := jobs.GetJobView(ctx, connect.NewRequest(&apiv1.GetJobViewRequest{Id: id}))
		require.NoError(t, err, tok)
		requireNoSecret(t, "GetJobView as "+tok, view.Msg)
		requireRedacted(t, "GetJobView as "+tok, view.Msg.GetJob().GetSpec().GetTarget().GetHttp())

		list, err := jobs.ListJobs(ctx, connect.NewRequest(&apiv1.ListJobsRequest{Filter: &apiv1.DefinitionFilter{Team: team}}))
		require.NoError(t, err, tok)
		require.Len(t, list.Msg.GetJobs(), 1, tok)
		requireNoSecret(t, "ListJobs as "+tok, list.Msg)
		requireRedacted(t, "ListJobs as "+tok, list.Msg.GetJobs()[0].GetSpec().GetTarget().GetHttp())

		found, err := jobs.SearchJobs(ctx, connect.NewRequest(&apiv1.SearchJobsRequest{Text: "downstream", Filter: &apiv1.DefinitionFilter{Team: team}}))
		require.NoError(t, err, tok)
		require.Len(t, found.Msg.GetJobs(), 1, tok)
		requireNoSecret(t, "SearchJobs as "+tok, found.Msg)

		dag, err := e.dags(tok).GetDag(ctx, connect.NewRequest(&apiv1.GetDagRequest{Id: dagID}))
		require.NoError(t, err, tok)
		requireNoSecret(t, "GetDag as "+tok, dag.Msg)
		requireRedacted(t, "GetDag as "+tok, dag.Msg.GetDag().GetSpec().GetNodes()[0].GetInline().GetTarget().GetHttp())

		dags, err := e.dags(tok).ListDags(ctx, connect.NewRequest(&apiv1.ListDagsRequest{Filter: &apiv1.DefinitionFilter{Team: team}}))
		require.NoError(t, err, tok)
		require.Len(t, dags.Msg.GetDags(), 1, tok)
		requireNoSecret(t, "ListDags as "+tok, dags.Msg)
	}

	// The store, which the runner's runs are made from, keeps the values.
	stored, err := e.store.GetJob(ctx, id)
	require.NoError(t, err)
	spec := &sundialv1.JobSpec{}
	require.NoError(t, proto.Unmarshal(stored.Spec, spec))
	assert.Equal(t, headerSecret, spec.GetTarget().GetHttp().GetHeaders()["Authorization"])
}

// TestAuditDiffNeverStoresSecrets creates a job with downstream
// credentials, changes them, changes nothing secret, and deletes it, all
// through the API (whose records sit beside the registry's), then reads
// every audit record of the job from the store and from sundial.audit:
// none holds a secret, a changed secret reads "<redacted changed>" and an
// unchanged one makes no change at all.
func TestAuditDiffNeverStoresSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const team = "sec-audit"
	id := team + ".sync"
	admin := token(team, auth.RoleAdmin)
	apply(t, e, admin, secretJob(id, team))
	rotated := secretJob(id, team)
	rotated.GetTarget().GetHttp().Headers["Authorization"] = "Bearer HDR-SECRET-rotated"
	rotated.GetTarget().GetHttp().Url = "https://downstream.example/v1/sync?apikey=QRY-SECRET-rotated&page=1"
	allSecrets := append(allSecrets, "HDR-SECRET-rotated", "QRY-SECRET-rotated")
	apply(t, e, admin, rotated)
	described := proto.CloneOf(rotated)
	described.Description = "now described"
	apply(t, e, admin, described)
	_, err := e.jobs(admin).DeleteJob(ctx, connect.NewRequest(&apiv1.DeleteJobRequest{Id: id}))
	require.NoError(t, err)

	recs, err := e.store.ListAudit(ctx, audit.Query{Subject: id, Limit: 100})
	require.NoError(t, err)
	byAction := map[string]int{}
	for _, r := range recs {
		byAction[r.Action]++
		b, err := json.Marshal(r)
		require.NoError(t, err)
		for _, s := range allSecrets {
			require.NotContains(t, string(b), s, "stored audit record %s", b)
		}
		if r.Action != audit.ActionJobUpdated {
			continue
		}
		fields := map[string]audit.Change{}
		for _, c := range r.Changes {
			fields[c.Field] = c
		}
		if _, ok := fields["description"]; ok {
			assert.NotContains(t, fields, "target.http.headers", "an unchanged secret makes no change: %+v", r.Changes)
			assert.NotContains(t, fields, "target.http.url", "%+v", r.Changes)
			continue
		}
		require.Contains(t, fields, "target.http.headers", "%+v", r.Changes)
		assert.Contains(t, fields["target.http.headers"].Before, `Authorization: "<redacted>"`)
		assert.Contains(t, fields["target.http.headers"].After, `Authorization: "<redacted changed>"`)
		assert.Contains(t, fields["target.http.headers"].After, `X-Upstream: "Bearer ${secret:upstream-token}"`)
		assert.Equal(t, `"https://downstream.example/v1/sync?apikey=<redacted changed>&page=1"`, fields["target.http.url"].After)
	}
	// The API's record of each change (the registry's records, made by
	// the same Diff, are left out of this env).
	require.Equal(t, map[string]int{audit.ActionJobCreated: 1, audit.ActionJobUpdated: 2, audit.ActionJobDeleted: 1}, byAction, "%+v", recs)

	// The feed has every record the store has, and no secret either.
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumeTopics(e.names.Audit()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	seen := 0
	for seen < len(recs) {
		fs := cl.PollFetches(pctx)
		require.NoError(t, pctx.Err(), "feed records of %s: %d of %d", id, seen, len(recs))
		fs.EachRecord(func(r *kgo.Record) {
			var rec audit.Record
			if json.Unmarshal(r.Value, &rec) != nil || rec.Subject != id {
				return
			}
			seen++
			requireNoSecretText(t, "feed record", string(r.Value))
			for _, s := range allSecrets {
				require.NotContains(t, string(r.Value), s, "feed record %s", r.Value)
			}
		})
	}
}

// TestRedactedValueRoundTripKeepsSecret reads a job with secrets back
// through the API, changes its description and applies what it read: the
// stored secrets stay as they were (not "<redacted>"), and the audit shows
// no change of target. A "<redacted>" value with no stored value behind it
// (a new job, a header the job lacks) or sent to another host is refused,
// naming the field; PlanApply reads "<redacted>" as ApplyJob does.
func TestRedactedValueRoundTripKeepsSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const team = "sec-roundtrip"
	id := team + ".sync"
	admin := token(team, auth.RoleAdmin)
	apply(t, e, admin, secretJob(id, team))

	got, err := e.jobs(admin).GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: id}))
	require.NoError(t, err)
	edited := got.Msg.GetJob().GetSpec()
	requireRedacted(t, "as read", edited.GetTarget().GetHttp())
	edited.Description = "edited after a read"

	plan, err := e.operator(admin).PlanApply(ctx, connect.NewRequest(&apiv1.PlanApplyRequest{Jobs: []*sundialv1.JobSpec{proto.CloneOf(edited)}}))
	require.NoError(t, err)
	require.Len(t, plan.Msg.GetPlans(), 1)
	var planned []string
	for _, c := range plan.Msg.GetPlans()[0].GetChanges() {
		planned = append(planned, c.GetField())
	}
	assert.Equal(t, []string{"description"}, planned, "the plan of the read-back definition changes the description only")

	apply(t, e, admin, proto.CloneOf(edited))
	stored, err := e.store.GetJob(ctx, id)
	require.NoError(t, err)
	spec := &sundialv1.JobSpec{}
	require.NoError(t, proto.Unmarshal(stored.Spec, spec))
	assert.Equal(t, "edited after a read", spec.GetDescription())
	assert.True(t, proto.Equal(secretTarget(), spec.GetTarget().GetHttp()), "the stored target keeps its secrets: %v", spec.GetTarget().GetHttp())
	recs, err := e.store.ListAudit(ctx, audit.Query{Subject: id, Limit: 100})
	require.NoError(t, err)
	for _, r := range recs {
		for _, c := range r.Changes {
			if r.Action == audit.ActionJobUpdated {
				assert.False(t, strings.HasPrefix(c.Field, "target."), "the round trip changed %s: %+v", c.Field, c)
			}
		}
	}

	refused := func(spec *sundialv1.JobSpec, field string) {
		t.Helper()
		res, err := e.jobs(admin).ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: spec}))
		require.NoError(t, err)
		require.False(t, res.Msg.GetAccepted(), "%v", res.Msg.GetStatus())
		require.NotEmpty(t, res.Msg.GetStatus().GetErrors())
		assert.Equal(t, field, res.Msg.GetStatus().GetErrors()[0].GetField(), "%v", res.Msg.GetStatus())
	}
	elsewhere := proto.CloneOf(edited)
	elsewhere.GetTarget().GetHttp().Url = "https://collector.example/v1/sync?apikey=<redacted>"
	refused(elsewhere, `target.http.headers["Authorization"]`)
	newJob := proto.CloneOf(edited)
	newJob.Id = team + ".copy"
	refused(newJob, `target.http.headers["Authorization"]`)
	lacking := proto.CloneOf(edited)
	lacking.GetTarget().GetHttp().Headers["Cookie"] = jobspec.Redacted
	refused(lacking, `target.http.headers["Cookie"]`)

	require.NoError(t, proto.Unmarshal(mustGet(t, e, id).Spec, spec))
	assert.True(t, proto.Equal(secretTarget(), spec.GetTarget().GetHttp()), "a refused apply changes nothing")
}

func mustGet(t *testing.T, e *env, id string) struct{ Spec []byte } {
	t.Helper()
	j, err := e.store.GetJob(t.Context(), id)
	require.NoError(t, err)
	return struct{ Spec []byte }{j.Spec}
}
