package target

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// secretMap is a Secrets of fixed values by team and name; a value "!"
// stands for a secret that cannot be read.
type secretMap map[string]map[string]string

func (m secretMap) Secret(_ context.Context, team, name string) (string, error) {
	v, ok := m[team][name]
	switch {
	case !ok:
		return "", ErrSecretNotFound
	case v == "!":
		return "", errors.New("permission denied")
	}
	return v, nil
}

func TestRedactFailure(t *testing.T) {
	t.Parallel()
	target := &sundialv1.HttpTarget{
		Url:               "https://h.example/v1?apikey=KEY-123456&sig=SIG-abcdef&page=2",
		Headers:           map[string]string{"Authorization": "Bearer TOKEN-987", "X-Tenant": "TEN-42", "Accept": "text/plain"},
		SecretQueryParams: []string{"sig"},
	}
	resolved := []string{"RESOLVED-secret", escapeSecret("RESOLVED-secret")}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{
			name: "the client's error quotes the URL: its secret values go",
			err:  &Error{Code: CodeConnection, Message: `Post "https://h.example/v1?apikey=KEY-123456&sig=SIG-abcdef&page=2": dial tcp: connection refused`, Retryable: true},
			want: `connection: Post "https://h.example/v1?apikey=<redacted>&sig=<redacted>&page=2": dial tcp: connection refused`,
		},
		{
			name: "an answer that echoes a secret header loses it",
			err:  &Error{Code: "http_500", Message: "HTTP 500: got Bearer TOKEN-987 for /v1?apikey=KEY-123456"},
			want: "http_500: HTTP 500: got <redacted> for /v1?apikey=<redacted>",
		},
		{
			name: "a redirect's URL, which the definition does not know, loses its secret-like parameters",
			err:  &Error{Code: CodeConnection, Message: `Get "http://other.example/cb?access_token=XYZ-777&state=1": stopped after 10 redirects`},
			want: `connection: Get "http://other.example/cb?access_token=<redacted>&state=1": stopped after 10 redirects`,
		},
		{
			name: "a resolved reference goes, escaped or not",
			err:  &Error{Code: "http_401", Message: "rejected RESOLVED-secret at /hook/RESOLVED-secret"},
			want: "http_401: rejected <redacted> at /hook/<redacted>",
		},
		{
			name: "a value that is not secret stays",
			err:  &Error{Code: "http_400", Message: "unknown tenant TEN-42"},
			want: "http_400: unknown tenant TEN-42",
		},
		{
			name: "no failure, nothing to do",
			err:  nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := redactFailure(tc.err, target, append(resolved, "Bearer TOKEN-987", "KEY-123456", "SIG-abcdef"))
			if tc.err == nil {
				assert.NoError(t, got)
				return
			}
			assert.Equal(t, tc.want, got.Error())
		})
	}
}

// TestRedactFailureKeepsTheCause: the text is clean, and errors.As still
// finds what failed.
func TestRedactFailureKeepsTheCause(t *testing.T) {
	t.Parallel()
	ue := &url.Error{Op: "Post", URL: "https://h.example/?token=TOK-123456", Err: context.DeadlineExceeded}
	got := redactFailure(&Error{Code: CodeTimeout, Message: ue.Error(), Retryable: true, Err: ue}, &sundialv1.HttpTarget{}, nil)
	var e *Error
	require.ErrorAs(t, got, &e)
	assert.NotContains(t, e.Message, "TOK-123456")
	assert.NotContains(t, e.Err.Error(), "TOK-123456")
	assert.ErrorIs(t, got, context.DeadlineExceeded)
	assert.True(t, e.Retryable)
}

func TestResolveSecrets(t *testing.T) {
	t.Parallel()
	secrets := secretMap{
		"team-a": {"tok": "A+B/C", "crlf": "x\r\nInjected: yes", "locked": "!"},
		"team-b": {"tok": "other"},
	}
	for _, tc := range []struct {
		name      string
		secrets   Secrets
		team      string
		target    *sundialv1.HttpTarget
		wantURL   string
		wantAuth  string
		wantKept  string // a value kept out of the failure
		wantCode  string
		wantRetry bool
		wantMsg   string
	}{
		{
			name: "a header and a query value resolve for the run's team", secrets: secrets, team: "team-a",
			target:  &sundialv1.HttpTarget{Url: "https://h.example/x?k=${secret:tok}", Headers: map[string]string{"Authorization": "Bearer ${secret:tok}"}},
			wantURL: "https://h.example/x?k=A%2BB%2FC", wantAuth: "Bearer A+B/C", wantKept: "A+B/C",
		},
		{
			name: "the same name is another team's own secret", secrets: secrets, team: "team-b",
			target:  &sundialv1.HttpTarget{Url: "https://h.example/", Headers: map[string]string{"Authorization": "Bearer ${secret:tok}"}},
			wantURL: "https://h.example/", wantAuth: "Bearer other", wantKept: "other",
		},
		{
			name: "a team without the secret fails for good", secrets: secrets, team: "team-c",
			target:   &sundialv1.HttpTarget{Url: "https://h.example/", Headers: map[string]string{"Authorization": "Bearer ${secret:tok}"}},
			wantCode: CodeSecretNotFound, wantMsg: `secret "tok" not found for team team-c`,
		},
		{
			name: "a runner without secrets fails for good", team: "team-a",
			target:   &sundialv1.HttpTarget{Url: "https://h.example/${secret:tok}"},
			wantCode: CodeSecretNotFound, wantMsg: `secret "tok" not found for team team-a: this runner has no secrets (sundial runner --secrets-dir)`,
		},
		{
			name: "a secret that cannot be read is retried", secrets: secrets, team: "team-a",
			target:   &sundialv1.HttpTarget{Url: "https://h.example/", Headers: map[string]string{"X-Key": "${secret:locked}"}},
			wantCode: CodeSecretUnavailable, wantRetry: true, wantMsg: `secret "locked" of team team-a: permission denied`,
		},
		{
			name: "a secret with a line break cannot be a header value", secrets: secrets, team: "team-a",
			target:   &sundialv1.HttpTarget{Url: "https://h.example/", Headers: map[string]string{"X-Key": "${secret:crlf}"}},
			wantCode: CodeInvalidTarget, wantMsg: `target.http.headers["X-Key"]: a secret it references holds CR, LF or NUL, which a header value cannot`,
		},
		{
			name: "no reference, the target as it is", secrets: secrets, team: "team-a",
			target:  &sundialv1.HttpTarget{Url: "https://h.example/?q=1", Headers: map[string]string{"Authorization": "Bearer literal"}},
			wantURL: "https://h.example/?q=1", wantAuth: "Bearer literal", wantKept: "Bearer literal",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &HTTP{Secrets: tc.secrets}
			call, values, err := h.resolveSecrets(t.Context(), tc.team, tc.target)
			if tc.wantCode != "" {
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, tc.wantCode, e.Code)
				assert.Equal(t, tc.wantRetry, e.Retryable)
				assert.Equal(t, tc.wantMsg, e.Message)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantURL, call.GetUrl())
			assert.Equal(t, tc.wantAuth, call.GetHeaders()["Authorization"])
			assert.Contains(t, values, tc.wantKept, "the value sent is kept out of the failure")
			assert.NotContains(t, tc.target.GetHeaders()["Authorization"], "A+B/C", "the run's target is left as it was")
		})
	}
}
