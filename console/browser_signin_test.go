package console_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/auth/oidc"
	"github.com/sundialhq/sundial/auth/oidc/oidctest"
	"github.com/sundialhq/sundial/console"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
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

// expiryOf is a JWT's exp.
func expiryOf(t *testing.T, jwt string) time.Time {
	t.Helper()
	parts := strings.Split(jwt, ".")
	require.Len(t, parts, 3, "not a JWT")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims struct {
		Exp int64 `json:"exp"`
	}
	require.NoError(t, json.Unmarshal(payload, &claims))
	return time.Unix(claims.Exp, 0)
}

// TestConsoleRenewsTheOIDCSignIn: the provider's ID tokens live 20 s, and
// the console keeps working across their expiry without leaving the page.
// With a refresh token it renews the ID token before it expires, and
// keeps the refresh token in memory only. Without one it asks, before the
// expiry, to sign in again in a popup that hands the new token back.
func TestConsoleRenewsTheOIDCSignIn(t *testing.T) {
	exe := chromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	const (
		clientID = "sundial-console"
		lifetime = 20 * time.Second
	)
	idp := oidctest.New(t)
	verifier, err := oidc.New(ctx, oidc.Config{Issuer: idp.URL(), Audience: clientID, HTTPClient: idp.Client(), Now: time.Now})
	require.NoError(t, err)
	ep := verifier.Endpoints()
	require.Contains(t, ep.Scopes, "offline_access")
	public, err := assemble.APIPublicWithSignIn(&console.SignIn{Issuer: ep.Issuer, AuthorizationEndpoint: ep.Authorization, TokenEndpoint: ep.Token,
		ClientID: clientID, OfflineAccess: true})
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
	operator := map[string]any{"sub": "alice", oidc.DefaultTeamClaim: "blue", oidc.DefaultRoleClaim: "operator"}
	identity := func(bearer string) apiv1connect.IdentityServiceClient {
		return apiv1connect.NewIdentityServiceClient(http.DefaultClient, api.URL, as(bearer)...)
	}

	// signIn signs in on a new tab and returns it, with its ID token, and
	// marks the page's state (a reload would lose the mark).
	signIn := func(t *testing.T) (context.Context, string) {
		t.Helper()
		tab, seen := b.newTab(t)
		t.Cleanup(func() {
			for _, p := range seen.get() {
				t.Errorf("the page reported a problem: %s", p)
			}
		})
		require.NoError(t, chromedp.Do(tab, chromedp.Navigate(b.base+"#/teams"), chromedp.WaitVisible(chromedp.ID("signin")),
			chromedp.Click(chromedp.ID("signin"))))
		require.Equal(t, "in", waitLoginOutcome(t, tab), "the sign-in's outcome")
		token := eval[string](t, tab, `window.sessionStorage.getItem('sundial.console.token')`)
		require.Equal(t, 2, strings.Count(token, "."), "the ID token is the tab's token")
		eval[bool](t, tab, `(() => { window.pageState = 'kept'; return true; })()`)
		return tab, token
	}
	// worksAfter waits until first has expired, checks that the API
	// refuses it, and that the page, not reloaded, still calls the API.
	worksAfter := func(t *testing.T, tab context.Context, first string) {
		t.Helper()
		exp := expiryOf(t, first)
		require.Eventually(t, func() bool { return time.Now().After(exp.Add(time.Second)) }, 3*time.Minute, 100*time.Millisecond)
		_, err := identity(first).WhoAmI(ctx, connect.NewRequest(&apiv1.WhoAmIRequest{}))
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "the first ID token has expired: %v", err)
		now := eval[string](t, tab, `window.sessionStorage.getItem('sundial.console.token')`)
		assert.NotEqual(t, first, now, "the tab's token was renewed")
		assert.True(t, expiryOf(t, now).After(time.Now()), "the tab's token is valid")
		// The page's token is taken: WhoAmI with it names the user.
		subject := eval[string](t, tab, `import(new URL('js/api.js', location.href)).then((m) =>
			m.call(window.sessionStorage.getItem('sundial.console.token'), 'IdentityService', 'WhoAmI', {})).then((w) => w.subject)`)
		assert.Contains(t, subject, "alice")
		// The team page again, without a reload: its calls are not refused
		// for the token.
		eval[bool](t, tab, `(() => { const m = document.getElementById('main'); m.replaceChildren(); delete m.dataset.loaded;
			window.location.hash = '#/teams?again=' + Date.now(); return true; })()`)
		eventually(t, tab, `document.getElementById('main').dataset.loaded === 'true'`, "the team page did not load again")
		assert.NotContains(t, eval[string](t, tab, `document.getElementById('main').textContent`), "unauthenticated")
		assert.Equal(t, "kept", eval[string](t, tab, `String(window.pageState)`), "the page was reloaded")
		assert.Zero(t, eval[int](t, tab, `window.localStorage.length`), "something in localStorage")
		assert.Empty(t, eval[[]string](t, tab, `Object.keys(window.sessionStorage).filter((k) => /refresh/i.test(k) || /refresh/i.test(window.sessionStorage.getItem(k)))`),
			"a refresh token in sessionStorage")
	}

	t.Run("a refresh token renews the ID token before it expires", func(t *testing.T) {
		idp.SetSignIn(&oidctest.SignIn{ClientID: clientID, Claims: operator, Lifetime: lifetime, Refresh: true})
		tab, first := signIn(t)
		require.Eventually(t, func() bool { return idp.Refreshes() >= 2 }, 3*time.Minute, 100*time.Millisecond,
			"the console did not renew its sign-in twice")
		worksAfter(t, tab, first)
		assert.True(t, eval[bool](t, tab, `document.getElementById('renew').hidden`), "a renewed sign-in asks nothing")
		assert.Empty(t, idp.Refused())
	})

	t.Run("without a refresh token, the page asks to sign in again in a popup and keeps its state", func(t *testing.T) {
		idp.SetSignIn(&oidctest.SignIn{ClientID: clientID, Claims: operator, Lifetime: lifetime})
		before := idp.Refreshes()
		tab, first := signIn(t)
		waitFor(t, tab, `#renew:not([hidden]) #renew-signin`)
		assert.Contains(t, eval[string](t, tab, `document.getElementById('renew').textContent`), "Sign in again")
		require.NoError(t, chromedp.Do(tab, chromedp.Click(chromedp.ID("renew-signin"))))
		eventually(t, tab, `window.sessionStorage.getItem('sundial.console.token') !== `+strconv.Quote(first)+` && document.getElementById('renew').hidden`,
			"the popup's sign-in did not come back to the page")
		worksAfter(t, tab, first)
		assert.Equal(t, before, idp.Refreshes(), "no refresh token was used")
	})
}
