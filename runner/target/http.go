package target

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/sundialhq/sundial/internal/tracing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/egress"
)

// maxErrorBody is how much of an error response's body is kept in the
// error message: a short prefix, enough for a downstream's own reason, too
// little to read a page the job's team should not see; the rest is drained
// (up to drainLimit) so the connection can be reused.
const (
	maxErrorBody = 128
	drainLimit   = 64 << 10
)

// HTTP calls HTTP targets, each team through its own transport whose
// dialer checks every address against Egress (egress.go).
type HTTP struct {
	// Egress decides which addresses each team may dial. Nil is the
	// default policy: loopback, private, link-local and the like refused.
	Egress *egress.Policy
	// Transport builds each team's transport. Default PooledTransport(2).
	Transport TransportFunc
	// Resolver resolves target host names. Default net.DefaultResolver.
	Resolver egress.Resolver
	// Now reads the clock to turn an HTTP-date Retry-After into a delay.
	// Default time.Now.
	Now func() time.Time
	// Secrets resolves the secret references of a target ("${secret:NAME}")
	// for its job's owner team. Nil: a target with a reference fails, not
	// retried ("secret_not_found").
	Secrets Secrets

	mu      sync.Mutex
	clients map[string]*http.Client // by team
}

var reservedHeaders = []string{HeaderIdempotencyKey, HeaderJobID, HeaderRunID, HeaderAttempt, HeaderFencingToken, HeaderShard, HeaderShardCount}

// execute performs one attempt against t, whose secret references are
// resolved (Execute).
func (h *HTTP) execute(ctx context.Context, req Request, t *sundialv1.HttpTarget) error {
	method := strings.ToUpper(t.GetMethod())
	if method == "" {
		method = http.MethodPost
	}
	u, err := url.Parse(t.GetUrl())
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("target.http.url %q: not an absolute http(s) URL", t.GetUrl())
	}
	var body io.Reader
	if b := req.body(t.GetBody()); len(b) > 0 && method != http.MethodGet && method != http.MethodHead {
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return invalid("target.http: %v", err)
	}
	for k, v := range t.GetHeaders() {
		for _, r := range reservedHeaders {
			if strings.EqualFold(k, r) {
				return invalid("target.http.headers: %s is set by the runner", r)
			}
		}
		hr.Header.Set(k, v)
	}
	hr.Header.Set(HeaderIdempotencyKey, req.Run.GetRunId())
	hr.Header.Set(HeaderJobID, req.Run.GetJobId())
	hr.Header.Set(HeaderRunID, req.Run.GetRunId())
	hr.Header.Set(HeaderAttempt, req.attempt())
	hr.Header.Set(HeaderFencingToken, req.token())
	if i, n, ok := req.shard(); ok {
		hr.Header.Set(HeaderShard, i)
		hr.Header.Set(HeaderShardCount, n)
	}
	// The downstream continues the attempt's trace (tracing on).
	tracing.Inject(ctx, propagation.HeaderCarrier(hr.Header))

	resp, err := h.client(req.Run.GetOwnerTeam()).Do(hr)
	if err != nil {
		if e := refused(err); e != nil {
			return e
		}
		if ctx.Err() != nil {
			// The job's timeout or the lease's end, not the downstream.
			return Classify(context.Cause(ctx), CodeConnection)
		}
		var ue *url.Error
		if errors.As(err, &ue) && ue.Timeout() {
			return &Error{Code: CodeTimeout, Message: err.Error(), Retryable: true, Err: err}
		}
		return &Error{Code: CodeConnection, Message: err.Error(), Retryable: true, Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	if e := ClassifyResponse(resp.StatusCode, resp.Header, now()); e != nil {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if len(msg) > 0 {
			e.Message = fmt.Sprintf("%s: %s", e.Message, bytes.TrimSpace(msg))
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
		return e
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	return nil
}

// ClassifyResponse returns nil for a 2xx status and the classified failure
// otherwise: 408, 429 and 5xx are retryable with the Retry-After header as
// the minimum delay; every other status is not retryable.
func ClassifyResponse(status int, header http.Header, now time.Time) *Error {
	if status >= 200 && status <= 299 {
		return nil
	}
	e := &Error{Code: "http_" + strconv.Itoa(status), Message: fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))}
	if status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || (status >= 500 && status <= 599) {
		e.Retryable = true
		e.RetryAfter = ParseRetryAfter(header.Get("Retry-After"), now)
	}
	return e
}

// ParseRetryAfter reads a Retry-After value: a number of seconds or an HTTP
// date. An absent, malformed or past value is 0.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(24*time.Hour/time.Second)*365 {
			secs = int64(24*time.Hour/time.Second) * 365
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
