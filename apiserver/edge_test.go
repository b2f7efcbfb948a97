package apiserver_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/connect/testpki"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store/memory"
)

// The edge tests run the server on loopback with the real handler stack:
// the test services of server_test.go and the job service over the memory
// store, whose changes a fake writer accepts.

// acceptingWriter is a JobWriter whose registry accepts every change.
type acceptingWriter struct{}

func (acceptingWriter) Apply(_ context.Context, spec *sundialv1.JobSpec) (client.Receipt, error) {
	return client.Receipt{ID: spec.GetId()}, nil
}

func (acceptingWriter) Delete(_ context.Context, id string) (client.Receipt, error) {
	return client.Receipt{ID: id}, nil
}

func (acceptingWriter) WaitStatus(_ context.Context, rs ...client.Receipt) ([]*sundialv1.JobStatus, error) {
	out := make([]*sundialv1.JobStatus, len(rs))
	for i, r := range rs {
		out[i] = &sundialv1.JobStatus{Subject: &sundialv1.JobStatus_JobId{JobId: r.ID}, Accepted: true,
			Outcome: sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED}
	}
	return out, nil
}

// release is closed by a test to let slowStream send its second message.
type slowStream struct{ release chan struct{} }

const slowProcedure = "/test.v1.Test/Slow"

func (s slowStream) service(opts ...connect.HandlerOption) apiserver.Handler {
	h := connect.NewServerStreamHandler(slowProcedure, func(ctx context.Context, _ *connect.Request[apiv1.GetJobRequest], st *connect.ServerStream[apiv1.Job]) error {
		if err := st.Send(&apiv1.Job{Revision: 1}); err != nil {
			return err
		}
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return st.Send(&apiv1.Job{Revision: 2})
	}, opts...)
	return apiserver.Handler{Path: slowProcedure, Handler: h}
}

// edgeServer starts a server on loopback with cfg changed by mutate, and
// returns it with the stream a test releases.
func edgeServer(t *testing.T, mutate func(*apiserver.Config)) (*apiserver.Server, slowStream) {
	t.Helper()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	jobs, err := apiserver.NewJobService(apiserver.JobServiceConfig{Store: st, Writer: acceptingWriter{}})
	require.NoError(t, err)
	slow := slowStream{release: make(chan struct{})}
	cfg := apiserver.Config{
		Addr: "127.0.0.1:0", Authenticator: tokenAuth{},
		Services: []apiserver.Service{whoAmIService, slow.service, jobs.Service()},
		Handlers: []apiserver.Handler{{Path: "/plain/", Handler: plainWhoAmI}},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := apiserver.New(cfg)
	require.NoError(t, err)
	require.NoError(t, srv.Start(t.Context()))
	t.Cleanup(srv.Stop)
	return srv, slow
}

// gzipBomb is 256 MiB of JSON-ish zeros, gzipped to about 255 KB.
var gzipBomb = sync.OnceValue(func() []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write([]byte(`{"id": "`))
	zeros := make([]byte, 1<<20)
	for range 256 {
		_, _ = zw.Write(zeros)
	}
	_ = zw.Close()
	return buf.Bytes()
})

// rawPost sends a POST over a fresh connection of its own, the way a
// hostile client would, and returns the status and body of the answer.
func rawPost(t *testing.T, addr, path string, header http.Header, body []byte) (int, string) {
	t.Helper()
	code, _, b := rawPostHeader(t, addr, path, header, body)
	return code, b
}

// rawPostHeader is rawPost that also returns the answer's headers.
func rawPostHeader(t *testing.T, addr, path string, header http.Header, body []byte) (int, http.Header, string) {
	t.Helper()
	conn, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(time.Minute)))
	var head strings.Builder
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", path, addr, len(body))
	for k, vs := range header {
		for _, v := range vs {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
	}
	head.WriteString("\r\n")
	_, err = io.WriteString(conn, head.String())
	require.NoError(t, err)
	// The server may answer and close before it has read the body: a
	// write error then is the point, not a failure.
	_, _ = conn.Write(body)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	return res.StatusCode, res.Header, string(b)
}

// allocated is the bytes the process has allocated so far.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestUnauthenticatedGzipBombIsRefusedCheaply protects the server from a
// caller without a token (finding 2): a 255 KB gzip body that inflates to
// 256 MiB is answered 401 before a byte of it is read, and costs the
// server less than 10 MiB; with a token it stops at the request limit,
// answered resource_exhausted naming it. Not parallel: it measures the
// process's allocations.
func TestUnauthenticatedGzipBombIsRefusedCheaply(t *testing.T) {
	srv, _ := edgeServer(t, func(c *apiserver.Config) { c.MaxRequestBytes = 1 << 20 })
	bomb := gzipBomb()
	require.Less(t, len(bomb), 300_000, "the bomb is small on the wire")
	header := http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	const applyJob = "/sundial.api.v1.JobService/ApplyJob"

	before := allocated()
	code, body := rawPost(t, srv.Addr().String(), applyJob, header, bomb)
	cost := allocated() - before
	assert.Equal(t, http.StatusUnauthorized, code, body)
	assert.Contains(t, body, "unauthenticated")
	assert.Less(t, cost, uint64(10<<20), "the refused bomb cost %d bytes", cost)
	t.Logf("unauthenticated bomb: %d, %d bytes allocated", code, cost)

	header.Set("Authorization", "Bearer "+token("data", auth.RoleAdmin))
	before = allocated()
	code, body = rawPost(t, srv.Addr().String(), applyJob, header, bomb)
	cost = allocated() - before
	assert.Equal(t, http.StatusTooManyRequests, code, "resource_exhausted in the Connect protocol: %s", body)
	assert.Contains(t, body, "resource_exhausted")
	assert.Contains(t, body, "1048576", "the answer names the limit")
	assert.Less(t, cost, uint64(16<<20), "the authenticated bomb stopped at the limit, cost %d bytes", cost)
	t.Logf("authenticated bomb: %d, %d bytes allocated: %s", code, cost, body)
}

// TestUnauthenticatedMalformedBodyIsRefused protects the order of the
// checks (finding 2): a malformed or oversized body without a token is
// 401, never 400 or 413, since the body is not read before the token is
// checked.
func TestUnauthenticatedMalformedBodyIsRefused(t *testing.T) {
	t.Parallel()
	srv, _ := edgeServer(t, func(c *apiserver.Config) { c.MaxRequestBytes = 64 << 10 })
	addr := srv.Addr().String()
	for name, c := range map[string]struct {
		header http.Header
		body   []byte
	}{
		"malformed JSON":         {http.Header{"Content-Type": {"application/json"}}, []byte(`{"spec": `)},
		"unknown field":          {http.Header{"Content-Type": {"application/json"}}, []byte(`{"colour": "blue"}`)},
		"not gzip":               {http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}, []byte("plain")},
		"over the size limit":    {http.Header{"Content-Type": {"application/json"}}, bytes.Repeat([]byte(" "), 200<<10)},
		"unknown content type":   {http.Header{"Content-Type": {"text/plain"}}, []byte("hello")},
		"gRPC, malformed frame":  {http.Header{"Content-Type": {"application/grpc-web+proto"}}, []byte{0, 0, 0, 0, 9, 1}},
		"refused JWT-like token": {http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer a.b.c"}}, []byte(`{`)},
	} {
		code, header, body := rawPostHeader(t, addr, "/sundial.api.v1.JobService/ApplyJob", c.header, c.body)
		if strings.HasPrefix(c.header.Get("Content-Type"), "application/grpc") {
			// gRPC-Web answers 200 with the status in its headers.
			assert.Equal(t, http.StatusOK, code, name)
			assert.Equal(t, "16", header.Get("Grpc-Status"), "%s: unauthenticated", name)
			continue
		}
		assert.Equal(t, http.StatusUnauthorized, code, "%s: %s", name, body)
	}
	// With a token, the same bodies get the decoder's answers.
	tok := "Bearer " + token("data", auth.RoleAdmin)
	code, body := rawPost(t, addr, "/sundial.api.v1.JobService/GetJob", http.Header{"Content-Type": {"application/json"}, "Authorization": {tok}}, []byte(`{"colour": "blue"}`))
	assert.Equal(t, http.StatusBadRequest, code, body)
	assert.Contains(t, body, "colour")
	code, body = rawPost(t, addr, "/sundial.api.v1.JobService/GetJob", http.Header{"Content-Type": {"application/json"}, "Authorization": {tok}}, bytes.Repeat([]byte(" "), 200<<10))
	assert.Equal(t, http.StatusTooManyRequests, code, body)
	assert.Contains(t, body, "resource_exhausted")
}

// TestSlowAndIdleConnectionsAreClosed protects the server from clients
// that hold connections open (finding 9): silent connections, headers or
// bodies sent a byte at a time (with and without a token), and idle
// keep-alive connections are all closed by the server. The timeouts are
// short here; the test waits for each close, up to a generous bound.
func TestSlowAndIdleConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	srv, _ := edgeServer(t, func(c *apiserver.Config) {
		c.ReadHeaderTimeout, c.BodyReadTimeout, c.IdleTimeout = time.Second, time.Second, time.Second
	})
	addr := srv.Addr().String()
	tok := token("data", auth.RoleAdmin)
	post := func(auth string) string {
		return "POST /sundial.api.v1.JobService/GetJob HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n" + auth + "\r\n"
	}
	kinds := map[string]struct {
		first string // sent at once
		drip  bool   // then a byte every 200 ms
	}{
		"silent":               {},
		"slow headers":         {first: "POST /sundial.api.v1.JobService/GetJob HTTP/1.1\r\n", drip: true},
		"slow body, no token":  {first: post(""), drip: true},
		"slow body, token":     {first: post("Authorization: Bearer " + tok + "\r\n"), drip: true},
		"idle after a request": {first: "GET " + apiserver.HealthPath + " HTTP/1.1\r\nHost: x\r\n\r\n"},
	}
	const perKind = 10
	const bound = 30 * time.Second
	type result struct {
		kind   string
		closed bool
		err    error
	}
	results := make(chan result, perKind*len(kinds))
	for name, k := range kinds {
		for range perKind {
			conn, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			go func() {
				if k.first != "" {
					if _, err := io.WriteString(conn, k.first); err != nil {
						results <- result{kind: name, err: err}
						return
					}
				}
				done := make(chan struct{})
				if k.drip {
					go func() {
						tick := time.NewTicker(200 * time.Millisecond)
						defer tick.Stop()
						for {
							select {
							case <-done:
								return
							case <-tick.C:
								if _, err := conn.Write([]byte("x")); err != nil {
									return
								}
							}
						}
					}()
				}
				defer close(done)
				_ = conn.SetReadDeadline(time.Now().Add(bound))
				// Read whatever the server answers until it closes.
				_, err := io.Copy(io.Discard, conn)
				var ne net.Error
				timedOut := errors.As(err, &ne) && ne.Timeout()
				results <- result{kind: name, closed: !timedOut}
			}()
		}
	}
	open := map[string]int{}
	for range perKind * len(kinds) {
		r := <-results
		require.NoError(t, r.err, r.kind)
		if !r.closed {
			open[r.kind]++
		}
	}
	assert.Empty(t, open, "connections the server left open after %v, by kind", bound)
}

// TestStreamsOutliveTheBodyReadTimeout keeps server streams working under
// the body read deadline: a stream open longer than the timeout still gets
// its messages, over HTTP/1.1 and HTTP/2.
func TestStreamsOutliveTheBodyReadTimeout(t *testing.T) {
	t.Parallel()
	srv, slow := edgeServer(t, func(c *apiserver.Config) {
		c.BodyReadTimeout, c.IdleTimeout = 300*time.Millisecond, 300*time.Millisecond
	})
	url := "http://" + srv.Addr().String()
	h1 := &http.Transport{}
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h1.CloseIdleConnections)
	t.Cleanup(h2c.CloseIdleConnections)
	var streams []*connect.ServerStreamForClient[apiv1.Job]
	for _, v := range []struct {
		tr    *http.Transport
		proto connect.ClientOption
	}{
		// gRPC needs HTTP/2; the others speak both.
		{h1, connect.WithGRPCWeb()}, {h1, connect.WithProtoJSON()},
		{h2c, connect.WithGRPC()}, {h2c, connect.WithGRPCWeb()}, {h2c, connect.WithProtoJSON()},
	} {
		c := connect.NewClient[apiv1.GetJobRequest, apiv1.Job](&http.Client{Transport: v.tr}, url+slowProcedure,
			v.proto, connect.WithInterceptors(apiserver.BearerToken(token("data", auth.RoleViewer))))
		s, err := c.CallServerStream(t.Context(), connect.NewRequest(&apiv1.GetJobRequest{Id: "x"}))
		require.NoError(t, err)
		require.True(t, s.Receive(), "first message: %v", s.Err())
		streams = append(streams, s)
	}
	time.Sleep(time.Second) // past the body read and idle timeouts
	close(slow.release)
	for i, s := range streams {
		require.True(t, s.Receive(), "stream %d: second message: %v", i, s.Err())
		assert.EqualValues(t, 2, s.Msg().GetRevision())
		assert.False(t, s.Receive())
		require.NoError(t, s.Err(), "stream %d", i)
		require.NoError(t, s.Close())
	}
}

// TestGRPCClientsReachTheAPI protects the promise of docs/api.md: gRPC,
// gRPC-Web and Connect clients all reach the API on its one port, over
// unencrypted HTTP/2 (h2c) and over TLS, and a refused call is refused in
// each protocol's form.
func TestGRPCClientsReachTheAPI(t *testing.T) {
	t.Parallel()
	plain, _ := edgeServer(t, nil)
	pki := testpki.New(t)
	caPEM, err := os.ReadFile(pki.CA)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	secure, _ := edgeServer(t, func(c *apiserver.Config) { c.TLSCertFile, c.TLSKeyFile = pki.ServerCert, pki.ServerKey })

	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	h2 := &http.Transport{Protocols: new(http.Protocols), TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	h2.Protocols.SetHTTP2(true)
	t.Cleanup(h2c.CloseIdleConnections)
	t.Cleanup(h2.CloseIdleConnections)

	servers := map[string]struct {
		url string
		tr  *http.Transport
	}{
		"h2c": {"http://" + plain.Addr().String(), h2c},
		"tls": {"https://" + secure.Addr().String(), h2},
	}
	protocols := map[string]connect.ClientOption{"grpc": connect.WithGRPC(), "grpc-web": connect.WithGRPCWeb(), "connect": connect.WithProtoJSON()}
	for sname, s := range servers {
		for pname, proto := range protocols {
			t.Run(sname+"/"+pname, func(t *testing.T) {
				httpc := &http.Client{Transport: s.tr}
				call := func(tok string) ([]string, error) {
					opts := []connect.ClientOption{proto}
					if tok != "" {
						opts = append(opts, connect.WithInterceptors(apiserver.BearerToken(tok)))
					}
					c := connect.NewClient[apiv1.GetJobRequest, apiv1.Job](httpc, s.url+whoAmI, opts...)
					st, err := c.CallServerStream(t.Context(), connect.NewRequest(&apiv1.GetJobRequest{}))
					if err != nil {
						return nil, err
					}
					defer st.Close()
					var teams []string
					for st.Receive() {
						teams = append(teams, st.Msg().GetSpec().GetOwnerTeam())
					}
					return teams, st.Err()
				}
				teams, err := call(token("data", auth.RoleViewer))
				require.NoError(t, err)
				assert.Equal(t, []string{"data", "data"}, teams)
				_, err = call("")
				requireCode(t, connect.CodeUnauthenticated, err, "no token")

				// A unary call of a real service, too.
				jobs := connect.NewClient[apiv1.GetJobRequest, apiv1.GetJobResponse](httpc, s.url+"/sundial.api.v1.JobService/GetJob",
					proto, connect.WithInterceptors(apiserver.BearerToken(token("data", auth.RoleViewer))))
				_, err = jobs.CallUnary(t.Context(), connect.NewRequest(&apiv1.GetJobRequest{Id: "data.missing"}))
				requireCode(t, connect.CodeNotFound, err, "a missing job")
			})
		}
	}
}
