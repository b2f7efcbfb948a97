package console_test

import (
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/console"
)

func TestHandlerServesTheFilesWithThePolicy(t *testing.T) {
	t.Parallel()
	h := console.Handler()
	cases := []struct {
		name, method, path string
		status             int
		contentType        string
		location           string
	}{
		{name: "the page at the folder", method: "GET", path: "/console/", status: 200, contentType: "text/html; charset=utf-8"},
		{name: "a module as JavaScript", method: "GET", path: "/console/js/main.js", status: 200, contentType: "text/javascript; charset=utf-8"},
		{name: "the style sheet as CSS", method: "GET", path: "/console/app.css", status: 200, contentType: "text/css; charset=utf-8"},
		{name: "a missing file is not found, never the page", method: "GET", path: "/console/jobs/dev.hello", status: 404},
		{name: "a folder is not listed", method: "GET", path: "/console/js/", status: 404},
		{name: "a write is refused", method: "POST", path: "/console/", status: 405},
		{name: "the API's root redirects relatively", method: "GET", path: "/", status: 302, location: "console/"},
		{name: "the folder without its slash redirects relatively", method: "GET", path: "/console", status: 302, location: "console/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), c.method, c.path, nil))
			assert.Equal(t, c.status, rec.Code)
			assert.Equal(t, console.ContentSecurityPolicy, rec.Header().Get("Content-Security-Policy"))
			assert.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
			if c.contentType != "" {
				assert.Equal(t, c.contentType, rec.Header().Get("Content-Type"))
			}
			if c.location != "" {
				assert.Equal(t, c.location, rec.Header().Get("Location"))
			}
		})
	}
}

// TestFilesKeepThePolicy reads every file for what the content security
// policy would refuse (inline script or style, eval) and for URLs that
// would break under a proxy's sub-path (absolute paths).
func TestFilesKeepThePolicy(t *testing.T) {
	t.Parallel()
	forbidden := map[string]*regexp.Regexp{
		"an inline script":              regexp.MustCompile(`<script(?:\s[^>]*)?>[^<\s]`),
		"a script without src":          regexp.MustCompile(`<script(?:\s(?:[^s>]|s[^r>])*)?>`),
		"a style element":               regexp.MustCompile(`<style[\s>]`),
		"a style attribute":             regexp.MustCompile(`\sstyle=`),
		"an inline event handler":       regexp.MustCompile(`<[^>]+\son[a-z]+=`),
		"eval":                          regexp.MustCompile(`\beval\(|new Function\(|setTimeout\(['"]`),
		"markup set from a string":      regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write`),
		"a style attribute set by code": regexp.MustCompile(`setAttribute\(['"]style`),
		"an absolute path":              regexp.MustCompile(`(?:href|src)="/|fetch\(['"]/|from ['"]/|new URL\(['"]/`),
		"a URL of another origin":       regexp.MustCompile(`(?:href|src)="https?:|from ['"]https?:`),
		"persistent storage of a token": regexp.MustCompile(`localStorage|document\.cookie`),
	}
	files := console.Files()
	var seen int
	require.NoError(t, fs.WalkDir(files, ".", func(name string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		text := strings.HasSuffix(name, ".html") || strings.HasSuffix(name, ".js") || strings.HasSuffix(name, ".css")
		if d.IsDir() || !text {
			return nil
		}
		seen++
		raw, err := fs.ReadFile(files, name)
		require.NoError(t, err)
		for what, re := range forbidden {
			if loc := re.FindIndex(raw); loc != nil {
				t.Errorf("%s has %s: %q", name, what, raw[loc[0]:min(loc[1]+20, len(raw))])
			}
		}
		return nil
	}))
	assert.Greater(t, seen, 5, "the console's files are embedded")
}

// TestAPIServesTheConsoleWithoutAToken: the console's files are open, the
// API beside them is not.
func TestAPIServesTheConsoleWithoutAToken(t *testing.T) {
	t.Parallel()
	tokens, err := apiserver.ParseStaticTokens([]string{"dev:viewer:secret"})
	require.NoError(t, err)
	srv, err := apiserver.New(apiserver.Config{Addr: "127.0.0.1:0", Authenticator: tokens, Public: assemble.APIPublic()})
	require.NoError(t, err)
	get := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader("{}")))
		return rec
	}
	assert.Equal(t, http.StatusOK, get("GET", "/console/").Code)
	assert.Equal(t, http.StatusOK, get("GET", "/console/js/api.js").Code)
	assert.Equal(t, http.StatusOK, get("GET", console.SignInPath).Code, "the sign-in document is as open as the page")
	assert.Equal(t, http.StatusFound, get("GET", "/").Code)
	assert.Equal(t, http.StatusUnauthorized, get("POST", "/sundial.api.v1.JobService/ListJobs").Code)
	assert.Equal(t, http.StatusUnauthorized, get("GET", "/consolex").Code, "a path that merely starts alike stays closed")
	assert.Equal(t, http.StatusUnauthorized, get("POST", "/").Code, "only GET of the root redirects")
}

// TestAPIWithTheConsoleOff: with the console turned off (`sundial api
// --console=false`) its paths and the root answer 404, with a token or
// without, and the API beside them is as closed as with the console.
func TestAPIWithTheConsoleOff(t *testing.T) {
	t.Parallel()
	tokens, err := apiserver.ParseStaticTokens([]string{"dev:viewer:secret"})
	require.NoError(t, err)
	srv, err := apiserver.New(apiserver.Config{Addr: "127.0.0.1:0", Authenticator: tokens, Public: assemble.APIPublicConsoleOff()})
	require.NoError(t, err)
	get := func(method, path, token string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader("{}"))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		srv.ServeHTTP(rec, req)
		return rec
	}
	for _, path := range []string{"/console/", "/console/js/api.js", console.SignInPath, "/console", "/"} {
		for _, token := range []string{"", "secret"} {
			rec := get("GET", path, token)
			assert.Equal(t, http.StatusNotFound, rec.Code, "GET %s (token %q)", path, token)
			assert.Empty(t, rec.Header().Get("Location"), "GET %s redirects", path)
			assert.NotContains(t, rec.Body.String(), "<html", "GET %s serves a page", path)
		}
	}
	assert.Equal(t, http.StatusUnauthorized, get("POST", "/sundial.api.v1.JobService/ListJobs", "").Code)
	assert.Equal(t, http.StatusUnauthorized, get("GET", "/consolex", "").Code, "a path that merely starts alike stays closed")
	assert.Equal(t, http.StatusUnauthorized, get("POST", "/", "").Code, "only GET of the root is the console's")
}

// TestEveryModuleIsPreloaded: index.html preloads every module, so that
// the browser fetches them at once instead of one level of imports at a
// time; a module added without its link would be fetched late.
func TestEveryModuleIsPreloaded(t *testing.T) {
	t.Parallel()
	files := console.Files()
	index, err := fs.ReadFile(files, "index.html")
	require.NoError(t, err)
	require.NoError(t, fs.WalkDir(files, "js", func(name string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.IsDir() || !strings.HasSuffix(name, ".js") || name == "js/main.js" {
			return nil
		}
		assert.Contains(t, string(index), `<link rel="modulepreload" href="`+name+`">`, "index.html does not preload %s", name)
		return nil
	}))
}

// TestSignInDocument: with a sign-in, signin.json tells the page the
// provider's endpoints and the console's client id (no secret: a public
// client), and the policy lets the page reach the token endpoint's origin
// alone; without one, the document is empty and the policy unchanged.
func TestSignInDocument(t *testing.T) {
	t.Parallel()
	signIn := &console.SignIn{Issuer: "https://idp.example/realms/ops", AuthorizationEndpoint: "https://idp.example/realms/ops/auth",
		TokenEndpoint: "https://tokens.idp.example:8443/realms/ops/token", ClientID: "sundial-console"}
	cases := []struct {
		name   string
		signIn *console.SignIn
		doc    string
		policy string
	}{
		{"none", nil, `{}`, console.ContentSecurityPolicy},
		{"configured", signIn,
			`{"issuer":"https://idp.example/realms/ops","authorizationEndpoint":"https://idp.example/realms/ops/auth",` +
				`"tokenEndpoint":"https://tokens.idp.example:8443/realms/ops/token","clientId":"sundial-console","scopes":["openid","profile","email"]}`,
			console.ContentSecurityPolicy + "; connect-src 'self' https://tokens.idp.example:8443"},
		{"with a refresh token", &console.SignIn{Issuer: signIn.Issuer, AuthorizationEndpoint: signIn.AuthorizationEndpoint,
			TokenEndpoint: signIn.TokenEndpoint, ClientID: signIn.ClientID, OfflineAccess: true},
			`{"issuer":"https://idp.example/realms/ops","authorizationEndpoint":"https://idp.example/realms/ops/auth",` +
				`"tokenEndpoint":"https://tokens.idp.example:8443/realms/ops/token","clientId":"sundial-console","scopes":["openid","profile","email","offline_access"]}`,
			console.ContentSecurityPolicy + "; connect-src 'self' https://tokens.idp.example:8443"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h, err := console.NewHandler(console.Config{SignIn: c.signIn})
			require.NoError(t, err)
			for _, path := range []string{console.SignInPath, "/console/"} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "GET", path, nil))
				assert.Equal(t, http.StatusOK, rec.Code, path)
				assert.Equal(t, c.policy, rec.Header().Get("Content-Security-Policy"), path)
				if path == console.SignInPath {
					assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
					assert.JSONEq(t, c.doc, rec.Body.String())
					assert.NotContains(t, strings.ToLower(rec.Body.String()), "secret")
				}
			}
		})
	}
}

func TestSignInValidate(t *testing.T) {
	t.Parallel()
	good := console.SignIn{Issuer: "https://idp.example", AuthorizationEndpoint: "https://idp.example/auth", TokenEndpoint: "https://idp.example/token", ClientID: "console"}
	cases := []struct {
		name   string
		mutate func(*console.SignIn)
		want   string
	}{
		{"valid", func(*console.SignIn) {}, ""},
		{"no client id", func(s *console.SignIn) { s.ClientID = "" }, `client id "": required`},
		{"spaces around the client id", func(s *console.SignIn) { s.ClientID = " console" }, `client id " console"`},
		{"relative token endpoint", func(s *console.SignIn) { s.TokenEndpoint = "/token" }, `token endpoint "/token": want an absolute http(s) URL`},
		{"no authorization endpoint", func(s *console.SignIn) { s.AuthorizationEndpoint = "" }, `authorization endpoint ""`},
		{"a host that would break the policy", func(s *console.SignIn) { s.TokenEndpoint = "https://idp.example;script-src/" }, `token endpoint`},
		{"an issuer of another scheme", func(s *console.SignIn) { s.Issuer = "ftp://idp.example" }, `issuer "ftp://idp.example"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := good
			c.mutate(&s)
			err := s.Validate()
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, c.want)
			_, err = console.NewHandler(console.Config{SignIn: &s})
			require.ErrorContains(t, err, c.want, "NewHandler refuses it too")
		})
	}
}

// TestFilesAreKeptUnderTheirVersion: the page names its files under the
// version of the set, which a browser keeps for good; the page itself is
// revalidated, and its ETag answers 304 when nothing changed. A file asked
// under another version (another replica's page during a rollout) is the
// current one, never kept.
func TestFilesAreKeptUnderTheirVersion(t *testing.T) {
	t.Parallel()
	h := console.Handler()
	get := func(path string, header ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(t.Context(), "GET", path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	page := get("/console/")
	require.Equal(t, http.StatusOK, page.Code)
	assert.Equal(t, "no-cache", page.Header().Get("Cache-Control"), "the page is revalidated")
	main := regexp.MustCompile(`<script type="module" src="(v/[0-9a-f]{16}/)js/main\.js"></script>`).FindStringSubmatch(page.Body.String())
	require.NotNil(t, main, "the page's main module under its version: %s", page.Body.String())
	dir := main[1]
	for _, link := range regexp.MustCompile(`(?:href|src)="([^"]*)"`).FindAllStringSubmatch(page.Body.String(), -1) {
		if !strings.HasPrefix(link[1], "#") {
			assert.True(t, strings.HasPrefix(link[1], dir), "%s: every file under the version %s", link[1], dir)
		}
	}

	kept := get("/console/" + dir + "js/main.js")
	require.Equal(t, http.StatusOK, kept.Code)
	assert.Equal(t, "public, max-age=31536000, immutable", kept.Header().Get("Cache-Control"))
	assert.Equal(t, "text/javascript; charset=utf-8", kept.Header().Get("Content-Type"))
	assert.Equal(t, console.ContentSecurityPolicy, kept.Header().Get("Content-Security-Policy"))
	plain := get("/console/js/main.js")
	assert.Equal(t, kept.Body.String(), plain.Body.String(), "the same file under its version")
	assert.Equal(t, "no-cache", plain.Header().Get("Cache-Control"))

	other := get("/console/v/0123456789abcdef/js/main.js")
	require.Equal(t, http.StatusOK, other.Code, "another version's file is the current one")
	assert.Equal(t, "no-cache", other.Header().Get("Cache-Control"), "and it is not kept")

	for _, path := range []string{"/console/" + dir + "js/missing.js", "/console/" + dir, "/console/" + dir + "index.html", "/console/v/", "/console/" + dir + "js/"} {
		rec := get(path)
		assert.Equal(t, http.StatusNotFound, rec.Code, path)
		assert.NotContains(t, rec.Header().Get("Cache-Control"), "max-age", "%s: a 404 is not kept", path)
	}

	etag := page.Header().Get("ETag")
	require.NotEmpty(t, etag)
	assert.Equal(t, http.StatusNotModified, get("/console/", "If-None-Match", etag).Code, "an unchanged page is not sent again")
}

// TestFilesAreGzippedForABrowserThatAcceptsIt: a text file is sent
// gzipped to a browser that accepts gzip, as the same bytes once
// decompressed, with an ETag of its own; never to one that refuses it.
func TestFilesAreGzippedForABrowserThatAcceptsIt(t *testing.T) {
	t.Parallel()
	h := console.Handler()
	get := func(accept string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(t.Context(), "GET", "/console/js/pages/jobs.js", nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, accept)
		assert.Equal(t, "Accept-Encoding", rec.Header().Get("Vary"), accept)
		return rec
	}
	plain := get("")
	assert.Empty(t, plain.Header().Get("Content-Encoding"))
	cases := []struct {
		accept string
		gzip   bool
	}{
		{"gzip, deflate, br, zstd", true},
		{"br;q=1.0, GZIP;q=0.5", true},
		{"identity", false},
		{"gzip;q=0", false},
		{"gzip; q=0.000", false},
	}
	for _, c := range cases {
		rec := get(c.accept)
		if !c.gzip {
			assert.Empty(t, rec.Header().Get("Content-Encoding"), c.accept)
			assert.Equal(t, plain.Body.String(), rec.Body.String(), c.accept)
			continue
		}
		require.Equal(t, "gzip", rec.Header().Get("Content-Encoding"), c.accept)
		assert.Less(t, rec.Body.Len(), plain.Body.Len(), c.accept)
		assert.NotEqual(t, plain.Header().Get("ETag"), rec.Header().Get("ETag"), "%s: an ETag per encoding", c.accept)
		zr, err := gzip.NewReader(rec.Body)
		require.NoError(t, err, c.accept)
		got, err := io.ReadAll(zr)
		require.NoError(t, err, c.accept)
		assert.Equal(t, plain.Body.String(), string(got), c.accept)
	}
}
