package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// Path is where the console is served, a subtree of the API's root.
const Path = "/console/"

// ContentSecurityPolicy is the policy of every answer: the page's own
// files only, no inline script or style, no eval, no plugins, no framing
// and no <base> that could move its relative URLs. connect-src falls back
// to default-src 'self': the API is the page's own origin.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'"

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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
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
	})
}

// redirect answers a relative redirect: Location is resolved against the
// URL the browser asked for, proxy prefix included.
func redirect(w http.ResponseWriter, to string) {
	w.Header().Set("Location", to)
	w.WriteHeader(http.StatusFound)
}
