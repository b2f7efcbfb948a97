package apiserver

// The edge is what a request passes before any service sees it. Its order
// is the defence: a request costs the server its headers until its bearer
// token is accepted, and a bounded body after.
//
//  1. The body read deadline is set (Config.BodyReadTimeout), so that a
//     client that sends its body slowly is cut, authenticated or not.
//  2. The bearer token is checked. A refusal is written in the protocol of
//     the request (Connect, gRPC, gRPC-Web, or plain HTTP) without reading,
//     inflating or decoding a byte of the body; on HTTP/1.1 the connection
//     is closed after the answer, so that what the caller still sends is
//     never read either.
//  3. The raw body is bounded (http.MaxBytesReader), and Connect bounds the
//     message after decompression (connect.WithReadMaxBytes), both at
//     Config.MaxRequestBytes: a gzip bomb stops at the limit.
//  4. Once the body is read to its end the deadline is lifted, so that a
//     server stream (WatchEvents, WatchRuns, the SSE stream) lives on.

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// edge authenticates and bounds every request but the open paths.
type edge struct {
	authn    Authenticator
	metrics  *metrics
	mux      *http.ServeMux
	errw     *connect.ErrorWriter
	open     func(*http.Request) bool
	maxBytes int64
	bodyTime time.Duration
	now      func() time.Time
	next     http.Handler
}

func (e *edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e.open(r) {
		e.next.ServeHTTP(w, r)
		return
	}
	rc := http.NewResponseController(w)
	// A request without a body (a GET, the SSE stream) has nothing to wait
	// for; its connection's reads are the server's (a background read that
	// notices the client leaving), which a deadline would cut.
	hasBody := r.Body != nil && r.Body != http.NoBody
	if hasBody && e.bodyTime > 0 {
		// ErrNotSupported only when the writer is not a server's (a test
		// recorder): there is no connection to bound then.
		_ = rc.SetReadDeadline(e.now().Add(e.bodyTime))
	}
	start := e.now()
	ctx, err := authenticate(r.Context(), e.authn, r.Header.Get("Authorization"))
	if err != nil {
		e.refuse(w, r, err)
		e.metrics.observe(e.procedure(r), start, err)
		return
	}
	if hasBody {
		r.Body = &liftOnEOF{ReadCloser: http.MaxBytesReader(w, r.Body, e.maxBytes), lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
	}
	e.next.ServeHTTP(w, r.WithContext(ctx))
}

// refuse answers a request whose credential was refused (or could not be
// checked) with err, a *connect.Error, in the request's protocol.
func (e *edge) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if r.ProtoMajor == 1 {
		// The unread body stays unread: net/http would otherwise read up
		// to 256 KiB of it to keep the connection.
		w.Header().Set("Connection", "close")
	}
	code := connect.CodeOf(err)
	if code == connect.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sundial"`)
	}
	if e.errw.IsSupported(r) {
		_ = e.errw.Write(w, r, err)
		return
	}
	msg, status := err.Error(), http.StatusUnauthorized
	if ce := new(connect.Error); errors.As(err, &ce) {
		msg = ce.Message()
	}
	if code == connect.CodeUnavailable {
		status = http.StatusServiceUnavailable
	}
	http.Error(w, msg, status)
}

// procedure is the metrics label of a refused request: its procedure when
// the path names a method of a mounted service, the pattern of a mounted
// plain handler, else "unknown", so that a caller without a token cannot
// grow the label set.
func (e *edge) procedure(r *http.Request) string {
	_, pattern := e.mux.Handler(r)
	if pattern == "" {
		return "unknown"
	}
	service, method, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if ok {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
		if sd, isService := d.(protoreflect.ServiceDescriptor); err == nil && isService && sd.Methods().ByName(protoreflect.Name(method)) != nil {
			return r.URL.Path
		}
	}
	return pattern
}

// liftOnEOF lifts the body read deadline once the body has been read to
// its end.
type liftOnEOF struct {
	io.ReadCloser
	lift func()
	once sync.Once
}

func (b *liftOnEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.lift)
	}
	return n, err
}
