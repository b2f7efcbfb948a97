package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/auth/oidc/oidctest"
	"github.com/sundialhq/sundial/console"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/store/cassandra"
)

// withAuthenticator parses args as the flags of a server command and
// calls use with the authenticator newAuthenticator builds, or returns its
// error.
func withAuthenticator(t *testing.T, store auth.TokenStore, args []string, use func(auth.Authenticator)) error {
	t.Helper()
	cmd := &cli.Command{
		Name: "server", Flags: authFlags(), Writer: &bytes.Buffer{}, ErrWriter: &bytes.Buffer{},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			a, err := newAuthenticator(ctx, cmd, store, prometheus.NewRegistry())
			if err != nil {
				return err
			}
			use(a)
			return nil
		},
	}
	return cmd.Run(t.Context(), append([]string{"server"}, args...))
}

// TestTeamsAndTokensCommands drives the bootstrap commands against the
// real Cassandra and authenticates with what they print.
func TestTeamsAndTokensCommands(t *testing.T) {
	t.Parallel()
	cass := testenv.NeedCassandra(t)
	cfg := cassandra.Config{Hosts: cass.Hosts, Keyspace: cass.Keyspace}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err := cassandra.Migrate(ctx, cfg)
	require.NoError(t, err)
	st, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	conn := []string{"--cassandra-hosts", strings.Join(cass.Hosts, ","), "--keyspace", cass.Keyspace}
	sundial := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, append(args, conn...)...)
	}

	// A topic prefix of its own: teams create also creates the team's topic.
	prefix := cass.Keyspace + "."
	code, out, errOut := sundial("teams", "create", "payments", "--description", "card payments", "--topic-prefix", prefix)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "created team payments\n", strings.SplitAfter(out, "\n")[0])
	if os.Getenv("SUNDIAL_KAFKA_BROKERS") != "" {
		assert.Contains(t, out, "topic "+prefix+"sundial.jobs.payments created")
	}
	code, _, errOut = sundial("teams", "create", "payments")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "team exists")
	code, out, errOut = sundial("teams", "list")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `payments\s+\S+\s+cli\S*\s+card payments`, out)

	code, out, errOut = sundial("tokens", "create", "--team", "payments", "--role", "operator", "--expires", "720h", "--description", "deploy pipeline")
	require.Equal(t, 0, code, errOut)
	bearer := strings.TrimSpace(out)
	assert.Equal(t, 1, strings.Count(out, "\n"), "standard output holds the bearer alone: %q", out)
	cred, err := auth.ParseBearer(bearer)
	require.NoError(t, err, "tokens create prints a bearer")
	assert.Contains(t, errOut, "created token "+cred.ID+" (team payments, role operator, expires ")
	assert.NotContains(t, errOut, cred.Secret)

	code, out, errOut = sundial("tokens", "create", "--cluster-admin", "--description", "first admin")
	require.Equal(t, 0, code, errOut)
	admin, err := auth.ParseBearer(strings.TrimSpace(out))
	require.NoError(t, err)

	// What the commands stored authenticates, through the flags a server
	// uses; no cache, so the revocation below is seen at once.
	var a auth.Authenticator
	require.NoError(t, withAuthenticator(t, st, []string{"--auth-token-cache-ttl", "-1s"}, func(got auth.Authenticator) { a = got }))
	p, err := a.Authenticate(ctx, bearer)
	require.NoError(t, err)
	assert.Equal(t, auth.Principal{Subject: "token:" + cred.ID, Team: "payments", Role: auth.RoleOperator}, p)
	p, err = a.Authenticate(ctx, admin.Bearer())
	require.NoError(t, err)
	assert.True(t, p.ClusterAdmin)

	// Listing shows neither secrets nor hashes, in any encoding.
	hash := auth.HashSecret(cred.Secret)
	code, out, errOut = sundial("tokens", "list", "--team", "payments")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, cred.ID+`\s+payments\s+operator\s+live\s+`, out)
	assert.Contains(t, out, "deploy pipeline")
	assert.NotContains(t, out, admin.ID, "--team payments leaves out the admin token")
	for _, s := range []string{cred.Secret, hex.EncodeToString(hash), base64.StdEncoding.EncodeToString(hash), base64.RawURLEncoding.EncodeToString(hash)} {
		assert.NotContains(t, out+errOut, s)
	}
	code, out, errOut = sundial("tokens", "list")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, admin.ID+`\s+\*cluster-admin\*\s+admin\s+live`, out)

	code, _, errOut = sundial("teams", "delete", "payments")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "token "+cred.ID+": team has live tokens")

	code, out, errOut = sundial("tokens", "revoke", cred.ID)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "revoked token "+cred.ID+"\n", out)
	_, err = a.Authenticate(ctx, bearer)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	assert.ErrorContains(t, err, "revoked")
	code, out, _ = sundial("tokens", "list", "--team", "payments")
	require.Equal(t, 0, code)
	assert.Regexp(t, cred.ID+`\s+payments\s+operator\s+revoked `, out)

	code, out, errOut = sundial("teams", "delete", "payments")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "deleted team payments\n", out)
	code, _, errOut = sundial("tokens", "revoke", "aaaaaaaaaaaaaaaa")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "token not found")
}

func TestTokensCreateFlagErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--cluster-admin", "--team", "x", "--role", "admin"}, []string{"--cluster-admin: acts for every team"}},
		{[]string{"--role", "viewer"}, []string{"--team: required"}},
		{[]string{"--team", "Pay Ments", "--role", "owner", "--expires", "-1h"}, []string{"--team: team name", `--role: role "owner"`, "--expires -1h0m0s"}},
	} {
		code, out, errOut := runCLI(t, append([]string{"tokens", "create", "--cassandra-hosts", "127.0.0.1:1"}, c.args...)...)
		assert.Equal(t, 1, code, "%v", c.args)
		assert.Empty(t, out, "nothing is created, nothing printed")
		for _, w := range c.want {
			assert.Contains(t, errOut, w, "%v", c.args)
		}
	}
	code, _, errOut := runCLI(t, "teams", "delete", "--cassandra-hosts", "127.0.0.1:1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "want exactly one argument, the team name")
}

func TestAuthFlags(t *testing.T) {
	t.Parallel()
	store := auth.NewMemoryStore()
	noop := func(auth.Authenticator) {}
	err := withAuthenticator(t, store, []string{"--oidc-audience", "sundial", "--oidc-admin-group", "admins", "--oidc-console-client-id", "console"}, noop)
	require.Error(t, err)
	assert.ErrorContains(t, err, "--oidc-audience: set without --oidc-issuer")
	assert.ErrorContains(t, err, "--oidc-admin-group: set without --oidc-issuer")
	assert.ErrorContains(t, err, "--oidc-console-client-id: set without --oidc-issuer")

	err = withAuthenticator(t, store, []string{"--oidc-issuer", "https://idp.example"}, noop)
	assert.ErrorContains(t, err, "--oidc-audience: required with --oidc-issuer")

	err = withAuthenticator(t, store, []string{"--auth-token-cache-ttl", "0s"}, noop)
	assert.ErrorContains(t, err, "--auth-token-cache-ttl 0")

	// The issuer's discovery runs at start: a server with a wrong issuer
	// does not start.
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	err = withAuthenticator(t, store, []string{"--oidc-issuer", srv.URL, "--oidc-audience", "sundial"}, noop)
	assert.ErrorContains(t, err, "--oidc-issuer: oidc issuer "+srv.URL+": discovery")

	// Without OIDC, a JWT is refused with the reason.
	var a auth.Authenticator
	require.NoError(t, withAuthenticator(t, store, nil, func(got auth.Authenticator) { a = got }))
	_, err = a.Authenticate(t.Context(), "eyJhbGciOiJSUzI1NiJ9.e30.sig")
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	assert.ErrorContains(t, err, "no OIDC issuer is configured")
}

// TestConsoleSignInFlag: --oidc-console-client-id gives the console's
// sign-in the endpoints of the issuer's discovery document; without it
// there is none.
func TestConsoleSignInFlag(t *testing.T) {
	t.Parallel()
	idp := oidctest.New(t)
	signInOf := func(args ...string) *console.SignIn {
		t.Helper()
		var got *console.SignIn
		cmd := &cli.Command{
			Name: "server", Flags: authFlags(), Writer: &bytes.Buffer{}, ErrWriter: &bytes.Buffer{},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				_, s, err := newAuthenticatorAndSignIn(ctx, cmd, auth.NewMemoryStore(), prometheus.NewRegistry())
				got = s
				return err
			},
		}
		require.NoError(t, cmd.Run(t.Context(), append([]string{"server", "--oidc-issuer", idp.URL(), "--oidc-audience", "sundial-console"}, args...)))
		return got
	}
	assert.Nil(t, signInOf(), "no client id, no sign-in")
	// The provider lists offline_access: the page asks for a refresh token.
	assert.Equal(t, &console.SignIn{Issuer: idp.URL(), AuthorizationEndpoint: idp.URL() + "/authorize", TokenEndpoint: idp.URL() + "/token", ClientID: "sundial-console",
		OfflineAccess: true},
		signInOf("--oidc-console-client-id", "sundial-console"))
}
