package apiserver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/internal/testenv"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	"github.com/sundialhq/sundial/quota"
)

// recorded keeps the audit records a TeamService writes.
type recorded struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (r *recorded) Record(_ context.Context, rec audit.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

func (r *recorded) all() []audit.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]audit.Record(nil), r.recs...)
}

// teamsEnv is an API server with a TeamService over an in-memory token
// store, authenticating with the tokens of that same store: a token the
// API creates calls the API, and one it revokes stops working.
type teamsEnv struct {
	url    string
	store  *auth.MemoryStore
	jobs   *quota.Memory
	audit  *recorded
	logs   *testenv.SyncBuffer
	topics *fakeTopics
	client func(bearer string) apiv1connect.TeamServiceClient
	quotas func(bearer string) apiv1connect.QuotaServiceClient
	admin  string // the cluster admin's bearer
}

func newTeamsEnv(t *testing.T) *teamsEnv {
	t.Helper()
	e := &teamsEnv{store: auth.NewMemoryStore(), jobs: quota.NewMemory(), audit: &recorded{}, logs: &testenv.SyncBuffer{}, topics: &fakeTopics{made: map[string]bool{}}}
	now := time.Now().UTC()
	cred, err := auth.GenerateCredential(nil)
	require.NoError(t, err)
	require.NoError(t, e.store.CreateToken(t.Context(), auth.Token{ID: cred.ID, SecretHash: auth.HashSecret(cred.Secret), ClusterAdmin: true,
		Role: auth.RoleAdmin, CreatedAt: now, CreatedBy: "test"}))
	e.admin = cred.Bearer()
	tokens, err := auth.NewTokens(auth.TokensConfig{Store: e.store, CacheTTL: -1, Now: time.Now})
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc, err := apiserver.NewTeamService(apiserver.TeamServiceConfig{Tokens: e.store, Jobs: e.jobs, Audit: e.audit, Topics: e.topics, Logger: logger})
	require.NoError(t, err)
	quotas, err := apiserver.NewQuotaService(apiserver.QuotaServiceConfig{Store: e.jobs, Audit: e.audit, Logger: logger})
	require.NoError(t, err)
	srv, err := apiserver.New(apiserver.Config{Addr: "127.0.0.1:0", Authenticator: tokens, Services: []apiserver.Service{svc.Service(), quotas.Service()}, Logger: logger})
	require.NoError(t, err)
	web := httptest.NewServer(srv)
	t.Cleanup(web.Close)
	e.url = web.URL
	e.client = func(bearer string) apiv1connect.TeamServiceClient {
		return apiv1connect.NewTeamServiceClient(web.Client(), web.URL, connect.WithInterceptors(apiserver.BearerToken(bearer)))
	}
	e.quotas = func(bearer string) apiv1connect.QuotaServiceClient {
		return apiv1connect.NewQuotaServiceClient(web.Client(), web.URL, connect.WithInterceptors(apiserver.BearerToken(bearer)))
	}
	return e
}

// fakeTopics makes team topics in memory, or fails while fail is set.
type fakeTopics struct {
	mu   sync.Mutex
	made map[string]bool
	fail error
}

func (f *fakeTopics) EnsureTeamTopic(_ context.Context, team string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return "", false, f.fail
	}
	topic := "sundial.jobs." + team
	created := !f.made[topic]
	f.made[topic] = true
	return topic, created, nil
}

func (f *fakeTopics) failWith(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = err
}

// TestCreateTeamMakesItsTopicFirst: the team's topic is made before the
// team is stored, so a call that cannot make it stores nothing and may be
// repeated; a topic that exists is kept.
func TestCreateTeamMakesItsTopicFirst(t *testing.T) {
	t.Parallel()
	e := newTeamsEnv(t)
	admin := e.client(e.admin)
	e.topics.failWith(errors.New("kafka: not reachable"))
	_, err := admin.CreateTeam(t.Context(), connect.NewRequest(&apiv1.CreateTeamRequest{Name: "payments"}))
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), "its job topic could not be made, so the team was not created")
	teams, err := e.store.ListTeams(t.Context())
	require.NoError(t, err)
	assert.Empty(t, teams, "a team stored without its topic")

	e.topics.failWith(nil)
	resp, err := admin.CreateTeam(t.Context(), connect.NewRequest(&apiv1.CreateTeamRequest{Name: "payments"}))
	require.NoError(t, err)
	assert.Equal(t, "sundial.jobs.payments", resp.Msg.GetTopic())
	assert.True(t, resp.Msg.GetTopicCreated())
	recs := e.audit.all()
	require.Len(t, recs, 1)
	assert.Contains(t, recs[0].Detail, "with its job topic sundial.jobs.payments (made)")

	_, err = admin.CreateTeam(t.Context(), connect.NewRequest(&apiv1.CreateTeamRequest{Name: "payments"}))
	assert.Equal(t, connect.CodeAlreadyExists, connect.CodeOf(err), "%v", err)
}

// token makes a token of team with role through the API, as the cluster
// admin, and returns its bearer and id.
func (e *teamsEnv) token(t *testing.T, team string, role auth.Role) (bearer, id string) {
	t.Helper()
	resp, err := e.client(e.admin).CreateToken(t.Context(), connect.NewRequest(&apiv1.CreateTokenRequest{Team: team, Role: role.String(), Description: "test " + role.String()}))
	require.NoError(t, err)
	return resp.Msg.GetBearer(), resp.Msg.GetToken().GetId()
}

func (e *teamsEnv) team(t *testing.T, name string) {
	t.Helper()
	_, err := e.client(e.admin).CreateTeam(t.Context(), connect.NewRequest(&apiv1.CreateTeamRequest{Name: name, Description: "team " + name}))
	require.NoError(t, err)
}

func TestTeamServiceManagesTeamsForTheClusterAdminOnly(t *testing.T) {
	t.Parallel()
	e := newTeamsEnv(t)
	ctx := t.Context()
	admin := e.client(e.admin)
	e.team(t, "payments")
	e.team(t, "search")

	list, err := admin.ListTeams(ctx, connect.NewRequest(&apiv1.ListTeamsRequest{}))
	require.NoError(t, err)
	var names []string
	for _, tm := range list.Msg.GetTeams() {
		names = append(names, tm.GetName())
		assert.True(t, strings.HasPrefix(tm.GetCreatedBy(), "token:"), "created_by %q names the caller", tm.GetCreatedBy())
	}
	assert.Equal(t, []string{"payments", "search"}, names)

	_, err = admin.CreateTeam(ctx, connect.NewRequest(&apiv1.CreateTeamRequest{Name: "payments"}))
	assert.Equal(t, connect.CodeAlreadyExists, connect.CodeOf(err), "%v", err)
	_, err = admin.CreateTeam(ctx, connect.NewRequest(&apiv1.CreateTeamRequest{Name: "no/slash"}))
	assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	assert.ErrorContains(t, err, "name")

	teamAdmin, _ := e.token(t, "payments", auth.RoleAdmin)
	for name, call := range map[string]func() error{
		"list": func() error {
			_, err := e.client(teamAdmin).ListTeams(ctx, connect.NewRequest(&apiv1.ListTeamsRequest{}))
			return err
		},
		"create": func() error {
			_, err := e.client(teamAdmin).CreateTeam(ctx, connect.NewRequest(&apiv1.CreateTeamRequest{Name: "x"}))
			return err
		},
		"delete its own": func() error {
			_, err := e.client(teamAdmin).DeleteTeam(ctx, connect.NewRequest(&apiv1.DeleteTeamRequest{Name: "payments"}))
			return err
		},
	} {
		assert.Equal(t, connect.CodePermissionDenied, connect.CodeOf(call()), "a team's admin may not %s teams", name)
	}
	// Another team is not found to a team's admin, as another team's
	// object always is; whether it exists or not, the answer is the same.
	for _, other := range []string{"search", "no-such-team"} {
		_, err := e.client(teamAdmin).DeleteTeam(ctx, connect.NewRequest(&apiv1.DeleteTeamRequest{Name: other}))
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "a team's admin deletes team %s: %v", other, err)
		assert.Equal(t, fmt.Sprintf("not_found: team %q: not found", other), err.Error())
	}

	t.Run("a team with a live token or a job is not deleted", func(t *testing.T) {
		_, err := admin.DeleteTeam(ctx, connect.NewRequest(&apiv1.DeleteTeamRequest{Name: "payments"}))
		assert.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
		assert.ErrorContains(t, err, "live tokens")

		require.NoError(t, e.jobs.TrackTeamJob(ctx, "search", "search-reindex", 1))
		_, err = admin.DeleteTeam(ctx, connect.NewRequest(&apiv1.DeleteTeamRequest{Name: "search"}))
		assert.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
		assert.ErrorContains(t, err, "owns 1 jobs")

		require.NoError(t, e.jobs.UntrackTeamJob(ctx, "search-reindex", 2))
		_, err = admin.DeleteTeam(ctx, connect.NewRequest(&apiv1.DeleteTeamRequest{Name: "search"}))
		require.NoError(t, err)
		_, err = admin.DeleteTeam(ctx, connect.NewRequest(&apiv1.DeleteTeamRequest{Name: "search"}))
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
	})

	var actions []string
	for _, r := range e.audit.all() {
		actions = append(actions, r.Action+" "+r.Subject)
		assert.True(t, strings.HasPrefix(r.Actor, "token:"), "actor %q", r.Actor)
	}
	assert.Equal(t, []string{"team.created payments", "team.created search", "token.created " + idOf(t, teamAdmin), "team.deleted search"}, actions)
}

func TestTokensThroughTheAPIKeepToTheirTeam(t *testing.T) {
	t.Parallel()
	e := newTeamsEnv(t)
	ctx := t.Context()
	e.team(t, "payments")
	e.team(t, "search")
	payAdmin, _ := e.token(t, "payments", auth.RoleAdmin)
	payViewer, payViewerID := e.token(t, "payments", auth.RoleViewer)
	payOperator, _ := e.token(t, "payments", auth.RoleOperator)
	searchAdmin, searchAdminID := e.token(t, "search", auth.RoleAdmin)

	t.Run("a team's admin creates a token of its team that then calls the API, and revokes it", func(t *testing.T) {
		resp, err := e.client(payAdmin).CreateToken(ctx, connect.NewRequest(&apiv1.CreateTokenRequest{Role: "admin", Description: "deploy",
			ExpiresIn: durationpb.New(time.Hour)}))
		require.NoError(t, err)
		tok := resp.Msg.GetToken()
		assert.Equal(t, "payments", tok.GetTeam())
		assert.Equal(t, "admin", tok.GetRole())
		assert.True(t, tok.GetLive())
		assert.NotNil(t, tok.GetExpiresAt())
		assert.Equal(t, "token:"+idOf(t, payAdmin), tok.GetCreatedBy())
		bearer := resp.Msg.GetBearer()
		assert.True(t, strings.HasPrefix(bearer, auth.TokenPrefix+tok.GetId()+"_"), "bearer of the token")

		_, err = e.client(bearer).ListTokens(ctx, connect.NewRequest(&apiv1.ListTokensRequest{}))
		require.NoError(t, err, "the new token calls the API")

		rev, err := e.client(payAdmin).RevokeToken(ctx, connect.NewRequest(&apiv1.RevokeTokenRequest{Id: tok.GetId()}))
		require.NoError(t, err)
		assert.False(t, rev.Msg.GetToken().GetLive())
		assert.NotNil(t, rev.Msg.GetToken().GetRevokedAt())
		_, err = e.client(bearer).ListTokens(ctx, connect.NewRequest(&apiv1.ListTokensRequest{}))
		assert.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "a revoked token is refused")
	})

	t.Run("a team's admin lists its own team's tokens only", func(t *testing.T) {
		resp, err := e.client(payAdmin).ListTokens(ctx, connect.NewRequest(&apiv1.ListTokensRequest{}))
		require.NoError(t, err)
		for _, tok := range resp.Msg.GetTokens() {
			assert.Equal(t, "payments", tok.GetTeam())
			assert.NotEqual(t, searchAdminID, tok.GetId())
		}
		_, err = e.client(payAdmin).ListTokens(ctx, connect.NewRequest(&apiv1.ListTokensRequest{Team: "search"}))
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "another team's tokens: %v", err)
	})

	t.Run("the cluster admin lists every token", func(t *testing.T) {
		resp, err := e.client(e.admin).ListTokens(ctx, connect.NewRequest(&apiv1.ListTokensRequest{}))
		require.NoError(t, err)
		teams := map[string]bool{}
		for _, tok := range resp.Msg.GetTokens() {
			teams[tok.GetTeam()] = true
		}
		assert.Equal(t, map[string]bool{"": true, "payments": true, "search": true}, teams)
	})

	t.Run("another team's token is not found, not revoked", func(t *testing.T) {
		_, err := e.client(payAdmin).RevokeToken(ctx, connect.NewRequest(&apiv1.RevokeTokenRequest{Id: searchAdminID}))
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
		_, err = e.client(payAdmin).RevokeToken(ctx, connect.NewRequest(&apiv1.RevokeTokenRequest{Id: idOf(t, e.admin)}))
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "the cluster admin's token: %v", err)
		_, err = e.client(searchAdmin).ListTokens(ctx, connect.NewRequest(&apiv1.ListTokensRequest{}))
		require.NoError(t, err, "the search admin's token still works")
		_, err = e.client(payAdmin).CreateToken(ctx, connect.NewRequest(&apiv1.CreateTokenRequest{Team: "search", Role: "admin"}))
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "a token of another team: %v", err)
		_, err = e.client(payAdmin).CreateToken(ctx, connect.NewRequest(&apiv1.CreateTokenRequest{ClusterAdmin: true}))
		assert.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "a cluster-admin token: %v", err)
	})

	t.Run("a viewer or an operator cannot create, list or revoke", func(t *testing.T) {
		for _, bearer := range []string{payViewer, payOperator} {
			_, err := e.client(bearer).CreateToken(ctx, connect.NewRequest(&apiv1.CreateTokenRequest{Role: "viewer"}))
			assert.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "create: %v", err)
			_, err = e.client(bearer).ListTokens(ctx, connect.NewRequest(&apiv1.ListTokensRequest{}))
			assert.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "list: %v", err)
			_, err = e.client(bearer).RevokeToken(ctx, connect.NewRequest(&apiv1.RevokeTokenRequest{Id: payViewerID}))
			assert.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "revoke: %v", err)
		}
	})

	t.Run("bad requests name the field", func(t *testing.T) {
		_, err := e.client(payAdmin).CreateToken(ctx, connect.NewRequest(&apiv1.CreateTokenRequest{Role: "root", ExpiresIn: durationpb.New(-time.Hour)}))
		assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
		assert.ErrorContains(t, err, "role")
		assert.ErrorContains(t, err, "expires_in")
		_, err = e.client(e.admin).CreateToken(ctx, connect.NewRequest(&apiv1.CreateTokenRequest{Role: "viewer"}))
		assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
		assert.ErrorContains(t, err, "team: required")
		_, err = e.client(e.admin).CreateToken(ctx, connect.NewRequest(&apiv1.CreateTokenRequest{Team: "nosuchteam", Role: "viewer"}))
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
	})
}

func TestTokenSecretsNeverLeaveTheCreateAnswer(t *testing.T) {
	t.Parallel()
	e := newTeamsEnv(t)
	ctx := t.Context()
	e.team(t, "payments")
	payAdmin, _ := e.token(t, "payments", auth.RoleAdmin)
	resp, err := e.client(payAdmin).CreateToken(ctx, connect.NewRequest(&apiv1.CreateTokenRequest{Role: "operator", Description: "ci"}))
	require.NoError(t, err)
	cred, err := auth.ParseBearer(resp.Msg.GetBearer())
	require.NoError(t, err)
	_, err = e.client(payAdmin).RevokeToken(ctx, connect.NewRequest(&apiv1.RevokeTokenRequest{Id: cred.ID}))
	require.NoError(t, err)
	// Errors: a revoked, then a wrong secret.
	_, err = e.client(resp.Msg.GetBearer()).ListTokens(ctx, connect.NewRequest(&apiv1.ListTokensRequest{}))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), cred.Secret)

	list, err := e.client(e.admin).ListTokens(ctx, connect.NewRequest(&apiv1.ListTokensRequest{}))
	require.NoError(t, err)
	secrets := []string{cred.Secret}
	for _, bearer := range []string{e.admin, payAdmin} {
		c, err := auth.ParseBearer(bearer)
		require.NoError(t, err)
		secrets = append(secrets, c.Secret)
	}
	hash := string(auth.HashSecret(cred.Secret))
	for _, secret := range secrets {
		assert.NotContains(t, list.Msg.String(), secret, "a listed token")
		assert.NotContains(t, e.logs.String(), secret, "the logs")
		for _, r := range e.audit.all() {
			assert.NotContains(t, r.Detail+r.Subject+r.Actor, secret, "audit record %s", r.ID)
		}
	}
	assert.NotContains(t, list.Msg.String(), hash)
	var actions []string
	for _, r := range e.audit.all() {
		actions = append(actions, r.Action)
	}
	assert.Equal(t, []string{"team.created", "token.created", "token.created", "token.revoked"}, actions)
}

// idOf is the id of a bearer.
func idOf(t *testing.T, bearer string) string {
	t.Helper()
	c, err := auth.ParseBearer(bearer)
	require.NoError(t, err)
	return c.ID
}
