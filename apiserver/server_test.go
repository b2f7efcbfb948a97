package apiserver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// whoAmI is a server-streaming procedure of the tests: it sends the
// caller's team, twice, as the owner_team of a Job.
const whoAmI = "/test.v1.Test/WhoAmI"

func whoAmIService(opts ...connect.HandlerOption) apiserver.Handler {
	h := connect.NewServerStreamHandler(whoAmI, func(ctx context.Context, _ *connect.Request[apiv1.GetJobRequest], s *connect.ServerStream[apiv1.Job]) error {
		p, ok := auth.FromContext(ctx)
		if !ok {
			return connect.NewError(connect.CodeInternal, errors.New("no principal in the context"))
		}
		for range 2 {
			if err := s.Send(&apiv1.Job{Spec: &sundialv1.JobSpec{OwnerTeam: p.Team}}); err != nil {
				return err
			}
		}
		return nil
	}, opts...)
	return apiserver.Handler{Path: whoAmI, Handler: h}
}

// plainWhoAmI is a plain handler that writes the caller's team.
var plainWhoAmI = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	p, _ := auth.FromContext(r.Context())
	_, _ = io.WriteString(w, p.Team)
})

func newTestServer(t *testing.T) (*apiserver.Server, *http.Client) {
	t.Helper()
	srv, err := apiserver.New(apiserver.Config{
		Addr: "127.0.0.1:0", Authenticator: tokenAuth{},
		Services: []apiserver.Service{whoAmIService},
		Handlers: []apiserver.Handler{{Path: "/plain/", Handler: plainWhoAmI}},
	})
	require.NoError(t, err)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return srv, &http.Client{Transport: tr}
}

func TestStreamsAreAuthenticated(t *testing.T) {
	t.Parallel()
	srv, httpc := newTestServer(t)
	ts := httptest.NewServer(srv)
	defer ts.Close()

	stream := func(tok string) ([]string, error) {
		opts := []connect.ClientOption{}
		if tok != "" {
			opts = append(opts, connect.WithInterceptors(apiserver.BearerToken(tok)))
		}
		c := connect.NewClient[apiv1.GetJobRequest, apiv1.Job](httpc, ts.URL+whoAmI, opts...)
		s, err := c.CallServerStream(t.Context(), connect.NewRequest(&apiv1.GetJobRequest{}))
		if err != nil {
			return nil, err
		}
		defer s.Close()
		var teams []string
		for s.Receive() {
			teams = append(teams, s.Msg().GetSpec().GetOwnerTeam())
		}
		return teams, s.Err()
	}
	teams, err := stream(token("data", auth.RoleViewer))
	require.NoError(t, err)
	assert.Equal(t, []string{"data", "data"}, teams)
	for _, tok := range []string{"", "nobody"} {
		teams, err = stream(tok)
		requireCode(t, connect.CodeUnauthenticated, err, "token "+tok)
		assert.Empty(t, teams)
	}
	// The gRPC protocol goes through the same interceptor.
	c := connect.NewClient[apiv1.GetJobRequest, apiv1.Job](httpc, ts.URL+whoAmI, connect.WithGRPCWeb())
	s, err := c.CallServerStream(t.Context(), connect.NewRequest(&apiv1.GetJobRequest{}))
	require.NoError(t, err)
	assert.False(t, s.Receive())
	requireCode(t, connect.CodeUnauthenticated, s.Err(), "gRPC-Web without a token")
	require.NoError(t, s.Close())
}

func TestPlainHandlersAreAuthenticated(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t)
	get := func(tok string) (int, string, string) {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/plain/x", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		return w.Code, w.Body.String(), w.Header().Get("WWW-Authenticate")
	}
	code, body, _ := get(token("ops", auth.RoleAdmin))
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ops", body)
	code, body, challenge := get("")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body, "bearer token is required")
	assert.Contains(t, challenge, "Bearer")
	code, body, _ = get("nobody")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body, "not valid")
}

// downAuth is an Authenticator whose token store is unreachable.
type downAuth struct{}

func (downAuth) Authenticate(context.Context, string) (auth.Principal, error) {
	return auth.Principal{}, errors.New("read token: no hosts available in the pool")
}

func TestCredentialThatCannotBeCheckedIsTheServersFault(t *testing.T) {
	t.Parallel()
	srv, err := apiserver.New(apiserver.Config{
		Addr: "127.0.0.1:0", Authenticator: downAuth{},
		Services: []apiserver.Service{whoAmIService},
		Handlers: []apiserver.Handler{{Path: "/plain/", Handler: plainWhoAmI}},
	})
	require.NoError(t, err)
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/plain/x", nil)
	req.Header.Set("Authorization", "Bearer sdl_x_y")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	assert.Equal(t, http.StatusServiceUnavailable, w.Code, "a store outage is not a bad credential: %s", w.Body.String())
	assert.Contains(t, w.Body.String(), "could not be checked")
	assert.Empty(t, w.Header().Get("WWW-Authenticate"))
}

func TestServerLifecycle(t *testing.T) {
	t.Parallel()
	srv, httpc := newTestServer(t)
	srv.Stop() // before Start: nothing to do
	for range 2 {
		require.NoError(t, srv.Start(t.Context()))
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+srv.Addr().String()+apiserver.HealthPath, nil)
		require.NoError(t, err)
		res, err := httpc.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode)
		assert.Equal(t, "ok\n", string(body))
		srv.Stop()
		srv.Stop()
		httpc.CloseIdleConnections()
		res, err = httpc.Do(req)
		if err == nil {
			_ = res.Body.Close()
		}
		require.Error(t, err, "nothing listens after Stop")
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := apiserver.New(apiserver.Config{ShutdownGrace: -1, Handlers: []apiserver.Handler{{}}})
	require.Error(t, err)
	for _, want := range []string{"addr: required", "authenticator: required", "shutdown grace -1ns: must not be negative", "handlers[0]: path and handler are required"} {
		assert.Contains(t, err.Error(), want)
	}
	_, err = apiserver.NewJobService(apiserver.JobServiceConfig{MaxScan: -1})
	require.Error(t, err)
	for _, want := range []string{"store: required", "writer: required", "max scan -1"} {
		assert.Contains(t, err.Error(), want)
	}
	_, err = apiserver.NewDagService(apiserver.DagServiceConfig{})
	require.ErrorContains(t, err, "dag service config: store: required")
}
