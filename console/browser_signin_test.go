package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/auth/oidc"
	"github.com/sundialhq/sundial/auth/oidc/oidctest"
	"github.com/sundialhq/sundial/console"
)

// pendingSignIn is where the page keeps its verifier, state and nonce
// between the redirect to the provider and the way back (signin.js).
const pendingSignIn = "sundial.console.signin"

// TestConsoleSignsInWithTheOIDCProvider: with --oidc-console-client-id,
// the login page offers "Sign in with" the API's provider. The page runs
// an authorization-code flow with PKCE against a local provider, behind a
// proxy that mounts the API under a sub-path, with the console's policy:
// the ID token it gets is the bearer, and WhoAmI names the team and role
// of its claims. A state that is not the tab's, and a verifier that is not
// the one the challenge was made of, are refused with the reason shown.
func TestConsoleSignsInWithTheOIDCProvider(t *testing.T) {
	exe := chromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	const clientID = "sundial-console"
	idp := oidctest.New(t)
	verifier, err := oidc.New(ctx, oidc.Config{Issuer: idp.URL(), Audience: clientID, HTTPClient: idp.Client(), Now: time.Now})
	require.NoError(t, err)
	ep := verifier.Endpoints()
	public, err := assemble.APIPublicWithSignIn(&console.SignIn{Issuer: ep.Issuer, AuthorizationEndpoint: ep.Authorization, TokenEndpoint: ep.Token, ClientID: clientID})
	require.NoError(t, err)
	srv, err := apiserver.New(apiserver.Config{Addr: "127.0.0.1:0", Authenticator: verifier,
		Services: []apiserver.Service{apiserver.IdentityService{}.Service()}, Public: public})
	require.NoError(t, err)
	api := httptest.NewServer(srv)
	defer api.Close()
	upstream, err := url.Parse(api.URL)
	require.NoError(t, err)
	proxy := httptest.NewServer(http.StripPrefix("/sundial", httputil.NewSingleHostReverseProxy(upstream)))
	defer proxy.Close()
	b := newBrowser(t, ctx, exe, proxy.URL+"/sundial/console/")
	idpHost := strings.TrimPrefix(idp.URL(), "http://")
	operator := map[string]any{"sub": "alice", oidc.DefaultTeamClaim: "blue", oidc.DefaultRoleClaim: "operator"}

	// tab opens a tab on the console's login page, whose problems (a
	// throw, an error logged, a policy refusal) fail the test.
	tab := func(t *testing.T, fragment string) context.Context {
		t.Helper()
		tab, seen := b.newTab(t)
		t.Cleanup(func() {
			for _, p := range seen.get() {
				t.Errorf("the page reported a problem: %s", p)
			}
		})
		require.NoError(t, chromedp.Do(tab, chromedp.Navigate(b.base+fragment), chromedp.WaitVisible(chromedp.ID("signin"))))
		return tab
	}
	// toProvider clicks the button and, the provider holding, returns
	// the URL it would send the browser back to.
	toProvider := func(t *testing.T, tab context.Context) *url.URL {
		t.Helper()
		require.NoError(t, chromedp.Do(tab, chromedp.Click(chromedp.ID("signin")), chromedp.WaitVisible(chromedp.ID("continue"))))
		u, err := url.Parse(eval[string](t, tab, `document.getElementById('continue').href`))
		require.NoError(t, err)
		assert.Equal(t, b.base, u.Scheme+"://"+u.Host+u.Path, "the provider sends the browser back to the console's folder, under the proxy's sub-path")
		return u
	}

	t.Run("sign in: the ID token is the bearer, and WhoAmI gives the role", func(t *testing.T) {
		idp.SetSignIn(&oidctest.SignIn{ClientID: clientID, Claims: operator})
		tab := tab(t, "#/teams")
		button, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("signin")))
		require.NoError(t, err)
		assert.Equal(t, "Sign in with "+idpHost, button)

		axe, err := os.ReadFile(filepath.Join("testdata", "axe.min.js"))
		require.NoError(t, err)
		for _, v := range scanAccessibility(t, tab, string(axe)) {
			for _, n := range v.Nodes {
				t.Errorf("login with sign-in: %s (%s, %s) at %v: %s", v.ID, v.Impact, v.Help, n.Target, n.HTML)
			}
		}

		require.NoError(t, chromedp.Do(tab, chromedp.Click(chromedp.ID("signin"))))
		require.Equal(t, "in", waitLoginOutcome(t, tab), "the sign-in's outcome")
		who, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("whoami")))
		require.NoError(t, err)
		assert.Equal(t, "operator of team blue", who)
		// Back on the page it was started from, with the code gone from
		// the address, the verifier forgotten, and the ID token kept.
		assert.Equal(t, b.base+"#/teams", eval[string](t, tab, `window.location.href`))
		assert.True(t, eval[bool](t, tab, `window.sessionStorage.getItem('`+pendingSignIn+`') === null`), "the verifier is forgotten")
		assert.Equal(t, 2, strings.Count(eval[string](t, tab, `window.sessionStorage.getItem('sundial.console.token')`), "."), "the ID token is the tab's token")
		assert.Empty(t, idp.Refused())
	})

	t.Run("a state that is not the tab's is refused", func(t *testing.T) {
		idp.SetSignIn(&oidctest.SignIn{ClientID: clientID, Claims: operator, Hold: true})
		tab := tab(t, "")
		back := toProvider(t, tab)
		q := back.Query()
		q.Set("state", "forged-"+q.Get("state"))
		back.RawQuery = q.Encode()
		require.NoError(t, chromedp.Do(tab, chromedp.Navigate(back.String())))
		outcome := waitLoginOutcome(t, tab)
		assert.Contains(t, outcome, "the state the provider sent back is not the one this tab sent: the sign-in is refused")
		assert.True(t, eval[bool](t, tab, `document.getElementById('nav').hidden`), "not logged in")
		assert.Equal(t, b.base, eval[string](t, tab, `window.location.href`), "the code is gone from the address")
		assert.True(t, eval[bool](t, tab, `window.sessionStorage.getItem('`+pendingSignIn+`') === null`), "the verifier is forgotten")
		assert.Empty(t, idp.Refused(), "the code was never sent to the provider")
	})

	t.Run("a wrong verifier is refused by the provider", func(t *testing.T) {
		idp.SetSignIn(&oidctest.SignIn{ClientID: clientID, Claims: operator, Hold: true})
		tab := tab(t, "")
		back := toProvider(t, tab)
		// Back on the console in the same tab, the kept verifier is
		// replaced before the code comes back.
		require.NoError(t, chromedp.Do(tab, chromedp.Navigate(b.base), chromedp.WaitVisible(chromedp.ID("signin"))))
		require.True(t, eval[bool](t, tab, `(() => {
			const p = JSON.parse(window.sessionStorage.getItem('`+pendingSignIn+`'));
			p.verifier = 'not-the-verifier-the-challenge-was-made-of-0123456789';
			window.sessionStorage.setItem('`+pendingSignIn+`', JSON.stringify(p));
			return true; })()`))
		require.NoError(t, chromedp.Do(tab, chromedp.Navigate(back.String())))
		outcome := waitLoginOutcome(t, tab)
		assert.Contains(t, outcome, "the provider refused to exchange the code: invalid_grant: code_verifier: does not match the code_challenge")
		assert.True(t, eval[bool](t, tab, `document.getElementById('nav').hidden`), "not logged in")
		assert.Equal(t, []string{"code_verifier: does not match the code_challenge"}, idp.Refused())
		assert.True(t, eval[bool](t, tab, `window.sessionStorage.getItem('sundial.console.token') === null`), "no token kept")
	})
}
