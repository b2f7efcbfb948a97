// Package console is Sundial's web console: static HTML, CSS and
// JavaScript modules, embedded in the binary and served by the API server
// under Path (`sundial api`, and `sundial dev` through the embedded
// pipeline).
//
// # Invariants
//
//   - Public API only: the console is files, and nothing else. The page
//     calls the control-plane API's Connect HTTP/JSON endpoints
//     (POST /sundial.api.v1.<Service>/<Method>) with the bearer token the
//     user pasted, exactly as any client does. This package has no
//     endpoint of its own, so the console can do nothing a token's holder
//     cannot do with curl, and the server alone decides what a role may do.
//     The one document it serves beside the files, SignInPath, is fixed at
//     start (Config.SignIn): where a browser signs in with the API's OpenID
//     provider, the same for everyone and with no secret (a public client
//     with PKCE). The ID token the page gets is a bearer like any other.
//   - The files are the same for everyone and hold no secret, so they are
//     served without a token (apiserver.Config.Public); every API call they
//     make still needs one.
//   - The sources are the assets: plain ES modules, HTML and CSS written by
//     hand, with no framework, no build step and no package manager, so
//     `go build` embeds what is committed and nothing can drift between a
//     source and a built file.
//   - Every answer carries ContentSecurityPolicy (with a SignIn, plus
//     connect-src for the token endpoint's origin alone: Config.Policy) and
//     X-Content-Type-Options: nosniff. The files hold no inline script or
//     style and call no eval, so the policy allows only the page's own
//     files; TestFilesKeepThePolicy checks them.
//   - The page names its files under the version of the whole set (a hash
//     of the embedded files, computed at start: versionDir), and those are
//     answered immutable; the page is revalidated. A version is the files
//     of one binary: a browser never mixes modules of two.
//   - Relative URLs everywhere: the page derives the API's base from its
//     own location (the parent of Path), so a proxy may mount the whole API
//     under any sub-path. The page routes with the URL's fragment, so the
//     server never has to answer a client route.
package console
