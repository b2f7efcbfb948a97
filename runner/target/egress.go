package target

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/sundialhq/sundial/runner/egress"
)

// CodeEgressRefused is the code of an attempt the runner's egress policy
// refused: an HTTP address, a Kafka topic or a command the job's team may
// not reach. Not retried.
const CodeEgressRefused = "egress_refused"

// CodeRedirect is the code of an HTTP redirect the runner does not follow:
// too many of them, or to a scheme other than http and https. Not retried.
const CodeRedirect = "http_redirect"

// MaxRedirects is how many redirects one HTTP attempt follows.
const MaxRedirects = 5

// TransportFunc builds the transport of one team's HTTP calls around dial,
// the dialer that checks every address against the team's egress policy.
// The transport must dial every connection with dial and use no proxy: a
// connection dialled otherwise escapes the policy.
type TransportFunc func(dial egress.DialFunc) http.RoundTripper

// PooledTransport returns a TransportFunc of clones of
// http.DefaultTransport that keep up to idlePerHost idle connections per
// downstream host (and at least as many in all), dial through the egress
// dialer and use no proxy: a proxy from the environment would connect to
// addresses the policy never sees.
func PooledTransport(idlePerHost int) TransportFunc {
	return func(dial egress.DialFunc) http.RoundTripper {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		t.DialContext = dial
		t.MaxIdleConns = max(idlePerHost, t.MaxIdleConns)
		t.MaxIdleConnsPerHost = max(idlePerHost, 1)
		return t
	}
}

// client returns the HTTP client of team's calls. Each team has its own
// transport, so a connection dialled (and checked) for one team is never
// reused by another team's call.
func (h *HTTP) client(team string) *http.Client {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.clients[team]; ok {
		return c
	}
	if h.clients == nil {
		h.clients = map[string]*http.Client{}
	}
	newTransport := h.Transport
	if newTransport == nil {
		newTransport = PooledTransport(2)
	}
	d := &egress.Dialer{Policy: h.Egress, Team: team, Resolver: h.Resolver}
	c := &http.Client{Transport: newTransport(d.DialContext), CheckRedirect: checkRedirect}
	h.clients[team] = c
	return c
}

// CloseIdleConnections closes the idle connections of every team's
// transport.
func (h *HTTP) CloseIdleConnections() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.clients {
		c.CloseIdleConnections()
	}
}

// checkRedirect follows at most MaxRedirects redirects, to http and https
// only. The address of every redirect is checked by the dialer as the first
// request's was.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return &Error{Code: CodeRedirect, Message: fmt.Sprintf("more than %d redirects", MaxRedirects)}
	}
	if s := req.URL.Scheme; s != "http" && s != "https" {
		return &Error{Code: CodeRedirect, Message: fmt.Sprintf("a redirect to scheme %q (only http and https are followed)", s)}
	}
	return nil
}

// refused returns the *Error of an egress refusal or of a redirect not
// followed in err, nil for any other error. Its message is the refusal's
// own, never the URL (which may hold a secret).
func refused(err error) *Error {
	var r *egress.Refusal
	if errors.As(err, &r) {
		return &Error{Code: CodeEgressRefused, Message: r.Error(), Err: r}
	}
	var te *Error
	if errors.As(err, &te) {
		return te
	}
	return nil
}

// refusal turns a policy's decision into an attempt's failure.
func refusal(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: CodeEgressRefused, Message: err.Error(), Err: err}
}
