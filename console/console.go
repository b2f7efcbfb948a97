package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
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
	files, err := loadFiles(Files())
	if err != nil {
		return nil, fmt.Errorf("console files: %w", err)
	}
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
		// The page changes with the binary: a browser revalidates it (its
		// ETag answers 304 when nothing changed). Its files are named
		// under the version of the whole set (versionDir), so a browser
		// keeps them for good, fetches none again on the next load, and
		// an upgrade, which changes the version, never mixes old and new
		// modules. A file asked under another version (a page of another
		// replica during a rollout) is the current one, revalidated.
		h.Set("Cache-Control", "no-cache")
		rest, versioned := strings.CutPrefix(name, versionDir)
		current := false
		if versioned {
			version, file, _ := strings.Cut(rest, "/")
			current, name = version == files.version, file
		}
		if name == "" || strings.HasSuffix(name, "/") {
			name += "index.html"
		}
		f, ok := files.byName[name]
		// The page is at Path alone: under a version, its relative
		// URLs (the API at ../) would miss.
		if !ok || path.Clean(name) != name || (versioned && name == "index.html") {
			http.NotFound(w, r)
			return
		}
		if current {
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		}
		h.Set("Content-Type", f.contentType)
		body, etag := f.body, f.etag
		if f.gzipped != nil {
			h.Add("Vary", "Accept-Encoding")
			if acceptsGzip(r.Header.Values("Accept-Encoding")) {
				body, etag = f.gzipped, f.gzipETag
				h.Set("Content-Encoding", "gzip")
			}
		}
		h.Set("ETag", etag)
		// ServeContent answers ranges and conditional requests.
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(body))
	}), nil
}

// versionDir is the folder, under Path, of the files of a version:
// v/<version>/js/main.js is js/main.js.
const versionDir = "v/"

// served is the console's files as the handler answers them.
type served struct {
	// version names the whole set of files: a hash of their names and
	// contents.
	version string
	byName  map[string]servedFile
}

type servedFile struct {
	body        []byte
	etag        string
	contentType string
	// gzipped is body compressed, for a browser that accepts gzip; nil
	// when that saves little (an image, a small file).
	gzipped  []byte
	gzipETag string
}

// compress returns body gzipped, or nil when that saves less than a
// quarter.
func compress(body []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // a valid level never fails
	_, _ = zw.Write(body)                                    // a bytes.Buffer never fails
	_ = zw.Close()
	if buf.Len() > len(body)*3/4 {
		return nil
	}
	return buf.Bytes()
}

// acceptsGzip reads Accept-Encoding: gzip, not refused with q=0.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
				continue
			}
			q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
			return !ok || strings.Trim(q, "0.") != ""
		}
	}
	return false
}

// pageURL is a relative URL of index.html's links and scripts, but for a
// fragment's link (#/jobs).
var pageURL = regexp.MustCompile(`((?:href|src)=")([^"#:/][^"]*")`)

// loadFiles reads the files once, and names the page's links and scripts
// under the version of the set.
func loadFiles(fsys fs.FS) (served, error) {
	out := served{byName: map[string]servedFile{}}
	sum := sha256.New()
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		_, _ = fmt.Fprintf(sum, "%s\x00%d\x00", name, len(body))
		_, _ = sum.Write(body)
		out.byName[name] = servedFile{body: body}
		return nil
	})
	if err != nil {
		return served{}, err
	}
	out.version = hex.EncodeToString(sum.Sum(nil))[:16]
	index, ok := out.byName["index.html"]
	if !ok {
		return served{}, errors.New("index.html: missing")
	}
	index.body = pageURL.ReplaceAll(index.body, []byte("${1}"+versionDir+out.version+"/${2}"))
	out.byName["index.html"] = index
	for name, f := range out.byName {
		etag := sha256.Sum256(f.body)
		f.etag = `"` + hex.EncodeToString(etag[:])[:24] + `"`
		f.contentType = mime.TypeByExtension(path.Ext(name))
		if f.contentType == "" {
			f.contentType = http.DetectContentType(f.body)
		}
		if f.gzipped = compress(f.body); f.gzipped != nil {
			f.gzipETag = strings.TrimSuffix(f.etag, `"`) + `-gzip"`
		}
		out.byName[name] = f
	}
	return out, nil
}

// redirect answers a relative redirect: Location is resolved against the
// URL the browser asked for, proxy prefix included.
func redirect(w http.ResponseWriter, to string) {
	w.Header().Set("Location", to)
	w.WriteHeader(http.StatusFound)
}
