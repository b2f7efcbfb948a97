package apiserver_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/store/memory"
)

// FuzzAuthenticatedRequest drives the API's request decoding behind
// authentication: any body, in any content type and encoding, sent with a
// valid token to the job service's procedures over the real handler stack
// (edge, interceptors, codecs, the service on the memory store). Whatever
// it is sent, the server must not panic, must answer in the protocol's
// form, and must never blame itself (internal or unknown): a bad request
// is the caller's fault.
func FuzzAuthenticatedRequest(f *testing.F) {
	st, err := memory.New(memory.Options{})
	require.NoError(f, err)
	jobs, err := apiserver.NewJobService(apiserver.JobServiceConfig{Store: st, Writer: acceptingWriter{}})
	require.NoError(f, err)
	srv, err := apiserver.New(apiserver.Config{
		Addr: "127.0.0.1:0", Authenticator: tokenAuth{}, Services: []apiserver.Service{jobs.Service()},
		MaxRequestBytes: 64 << 10,
	})
	require.NoError(f, err)

	procedures := []string{"ApplyJob", "GetJob", "ListJobs", "SearchJobs", "DeleteJob", "GetJobView", "GetJobViews"}
	contentTypes := []string{
		"application/json", "application/proto", "application/json; charset=utf-8",
		"application/grpc", "application/grpc+json", "application/grpc-web+proto",
		"application/connect+json", "application/connect+proto", "text/plain", "",
	}
	encodings := []string{"", "gzip", "identity", "br"}
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(b)
		_ = zw.Close()
		return buf.Bytes()
	}
	f.Add(uint8(0), uint8(0), uint8(0), []byte(`{"spec": {"id": "data.x", "ownerTeam": "data", "schedule": {"cron": {"expression": "* * * * *"}}, "target": {"http": {"url": "http://127.0.0.1:1/"}}}}`))
	f.Add(uint8(1), uint8(0), uint8(1), gz([]byte(`{"id": "data.x"}`)))
	f.Add(uint8(2), uint8(1), uint8(0), []byte{})
	f.Add(uint8(1), uint8(3), uint8(0), []byte{0, 0, 0, 0, 8, 10, 6, 100, 97, 116, 97, 46, 120})
	f.Add(uint8(1), uint8(5), uint8(1), []byte{1, 0, 0, 0, 3, 1, 2, 3})
	f.Add(uint8(3), uint8(6), uint8(0), []byte{0, 0, 0, 0, 2, '{', '}'})
	f.Add(uint8(0), uint8(0), uint8(0), []byte(`{"spec": {"id": "\u0000", "labels": {"a": 1}}}`))

	tok := "Bearer " + token("data", auth.RoleAdmin)
	f.Fuzz(func(t *testing.T, proc, ctype, enc uint8, body []byte) {
		path := "/sundial.api.v1.JobService/" + procedures[int(proc)%len(procedures)]
		ct := contentTypes[int(ctype)%len(contentTypes)]
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Authorization", tok)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if e := encodings[int(enc)%len(encodings)]; e != "" {
			for _, h := range []string{"Content-Encoding", "Grpc-Encoding", "Connect-Content-Encoding"} {
				req.Header.Set(h, e)
			}
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		// Connect answers a broken envelope (bad flags, bytes after the one
		// message of a unary call) "internal", as the gRPC specification
		// asks of a protocol error; it is the framing's fault, not the
		// server's, and is allowed.
		res := w.Result()
		grpcStatus := res.Header.Get("Grpc-Status") + res.Trailer.Get("Grpc-Status")
		message := w.Body.String() + res.Header.Get("Grpc-Message") + res.Trailer.Get("Grpc-Message")
		framing := strings.Contains(message, "protocol error") || strings.Contains(message, "extra bytes after end of stream")
		switch {
		case w.Code == http.StatusUnauthorized:
			t.Fatalf("%s %s: a valid token was refused: %s", path, ct, message)
		case w.Code == http.StatusInternalServerError && !framing:
			t.Fatalf("%s %s: 500: %s", path, ct, message)
		case (grpcStatus == "13" || grpcStatus == "2") && !framing:
			t.Fatalf("%s %s: gRPC status %s: %s", path, ct, grpcStatus, message)
		}
	})
}
