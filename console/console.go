package console

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
)

// Path is where the console is served, a subtree of the API's root.
const Path = "/console/"

// ContentSecurityPolicy is the policy of every answer: the page's own
// files only, no inline script or style, no eval, no plugins, no framing
// and no <base> that could move its relative URLs. connect-src falls back
// to default-src 'self': the API is the page's own origin. With a SignIn,
// the policy adds connect-src for the token endpoint's origin alone
// (Config.Policy).
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'"

// SignInPath is the document that tells the page how to sign in with the
// API's OpenID provider, under Path: SignInDocument as JSON, or {} when no
// sign-in is configured. It is public and holds no secret.
const SignInPath = Path + "signin.json"

// SignIn is what the page needs to sign in with the OpenID provider whose
// tokens the API accepts: an authorization-code flow with PKCE, as a
// public client (no client secret exists anywhere).
type SignIn struct {
	// Issuer is the provider's issuer URL (the API's --oidc-issuer).
	Issuer string
	// AuthorizationEndpoint and TokenEndpoint come from the issuer's
	// discovery document.
	AuthorizationEndpoint string
	TokenEndpoint         string
	// ClientID is the console's client id at the provider. The ID token
	// it gets is issued for this id, so the API must accept it as its
	// audience.
	ClientID string
	// OfflineAccess asks the provider for a refresh token (the scope
	// offline_access), with which the page renews the ID token before it
	// expires; set it when the provider's discovery lists the scope. The
	// page uses a refresh token the provider gives without it too.
	OfflineAccess bool
}

// SignInDocument is SignInPath's JSON.
type SignInDocument struct {
	Issuer                string   `json:"issuer,omitempty"`
	AuthorizationEndpoint string   `json:"authorizationEndpoint,omitempty"`
	TokenEndpoint         string   `json:"tokenEndpoint,omitempty"`
	ClientID              string   `json:"clientId,omitempty"`
	Scopes                []string `json:"scopes,omitempty"`
}

// SignInScopes are the scopes the page asks for: an ID token, with the
// profile's claims for the team and role.
var signInScopes = []string{"openid", "profile", "email"}

// Validate reports every bad field.
func (s SignIn) Validate() error {
	var bad []error
	for _, f := range []struct{ name, v string }{{"issuer", s.Issuer}, {"authorization endpoint", s.AuthorizationEndpoint}, {"token endpoint", s.TokenEndpoint}} {
		if _, err := originOf(f.v); err != nil {
			bad = append(bad, fmt.Errorf("console sign-in: %s %q: %w", f.name, f.v, err))
		}
	}
	if strings.TrimSpace(s.ClientID) == "" || strings.TrimSpace(s.ClientID) != s.ClientID {
		bad = append(bad, fmt.Errorf("console sign-in: client id %q: required, without surrounding spaces", s.ClientID))
	}
	return errors.Join(bad...)
}

// originOf is the scheme://host[:port] of an absolute http(s) URL.
func originOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("not a URL")
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", errors.New("want an absolute http(s) URL")
	}
	if strings.ContainsAny(u.Host, " ;,'") {
		return "", errors.New("bad host")
	}
	return u.Scheme + "://" + u.Host, nil
}

// Config configures a console's handler.
type Config struct {
	// SignIn, when set, offers "Sign in with" the API's OpenID provider.
	// Nil: the page logs in with a pasted token only.
	SignIn *SignIn
}

// Policy is the content security policy of the console's answers: the
// page's own origin, plus, with a SignIn, connect-src for the token
// endpoint's origin (the page exchanges the code there). The redirect to
// the authorization endpoint is a navigation, which the policy does not
// govern.
func (c Config) Policy() string {
	if c.SignIn == nil {
		return ContentSecurityPolicy
	}
	origin, err := originOf(c.SignIn.TokenEndpoint)
	if err != nil {
		return ContentSecurityPolicy
	}
	return ContentSecurityPolicy + "; connect-src 'self' " + origin
}

//go:embed static
var static embed.FS

// Files are the console's files, rooted at the folder Path serves.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		// fs.Sub fails only for an invalid name; "static" is valid.
		panic(err)
	}
	return sub
}

// Handler serves the console's files under Path. GET of Path's parent (the
// API's root) and of Path without its slash answer a relative redirect to
// Path, which stays right under any sub-path a proxy adds. Anything that is
// not a file answers 404: client routes live in the URL's fragment, so
// nothing falls back to index.html.
func Handler() http.Handler {
	h, err := NewHandler(Config{})
	if err != nil {
		// Config{} has nothing to refuse.
		panic(err)
	}
	return h
}

// NewHandler is Handler with a Config: with a SignIn, SignInPath
// describes it, and the policy lets the page reach the token endpoint.
func NewHandler(cfg Config) (http.Handler, error) {
	doc := SignInDocument{}
	if cfg.SignIn != nil {
		if err := cfg.SignIn.Validate(); err != nil {
			return nil, err
		}
		scopes := signInScopes
		if cfg.SignIn.OfflineAccess {
			scopes = append(slices.Clip(scopes), "offline_access")
		}
		doc = SignInDocument{Issuer: cfg.SignIn.Issuer, AuthorizationEndpoint: cfg.SignIn.AuthorizationEndpoint,
			TokenEndpoint: cfg.SignIn.TokenEndpoint, ClientID: cfg.SignIn.ClientID, Scopes: scopes}
	}
	signIn, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("console sign-in: %w", err)
	}
	policy := cfg.Policy()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", policy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the console's files are read with GET", http.StatusMethodNotAllowed)
			return
		}
		switch r.URL.Path {
		case "/":
			redirect(w, "console/")
			return
		case strings.TrimSuffix(Path, "/"):
			redirect(w, "console/")
			return
		}
		name, ok := strings.CutPrefix(r.URL.Path, Path)
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.URL.Path == SignInPath {
			h.Set("Cache-Control", "no-cache")
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(signIn)
			return
		}
		// The page and its modules change with the binary: a browser
		// revalidates them, so an upgrade never mixes old and new modules.
		h.Set("Cache-Control", "no-cache")
		if name == "" || strings.HasSuffix(name, "/") {
			name += "index.html"
		}
		name = path.Clean(name)
		if info, err := fs.Stat(Files(), name); err != nil || info.IsDir() {
			http.NotFound(w, r)
			return
		}
		// ServeFileFS sets the type from the name, answers ranges and
		// conditional requests, and refuses ".." in the path.
		http.ServeFileFS(w, r, Files(), name)
	}), nil
}

// redirect answers a relative redirect: Location is resolved against the
// URL the browser asked for, proxy prefix included.
func redirect(w http.ResponseWriter, to string) {
	w.Header().Set("Location", to)
	w.WriteHeader(http.StatusFound)
}
