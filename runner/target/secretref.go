package target

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Codes of failures to resolve a secret reference (RunError.code).
const (
	// CodeSecretNotFound: the job's team has no secret of that name, or
	// the runner has no secrets at all. Not retried.
	CodeSecretNotFound = "secret_not_found"
	// CodeSecretUnavailable: the secret exists but could not be read.
	// Retried.
	CodeSecretUnavailable = "secret_unavailable"
)

// MaxSecretBytes bounds the value of one secret.
const MaxSecretBytes = 16 << 10

// ErrSecretNotFound is wrapped by a Secrets' error for a secret the team
// does not have.
var ErrSecretNotFound = errors.New("secret not found")

// Secrets gives an HTTP target the secrets of its job's owner team, by the
// names its secret references use.
type Secrets interface {
	// Secret returns the value of team's secret name, or an error wrapping
	// ErrSecretNotFound when team has none of that name. It is called at
	// every attempt, so a secret changed at its source is used from the
	// next attempt on.
	Secret(ctx context.Context, team, name string) (string, error)
}

// SecretsDir is a Secrets that reads team T's secret NAME from the file
// <dir>/T/NAME: one directory per team, one file per secret (a Kubernetes
// Secret per team mounted at <dir>/T, for example). Trailing line breaks of
// a file are not part of the value. A lookup never leaves the team's
// directory: the team and the name must each be one file name, not
// starting with a dot, and symbolic links may not point outside dir.
type SecretsDir struct {
	dir string
}

// NewSecretsDir returns the SecretsDir of dir, which must be a directory.
func NewSecretsDir(dir string) (*SecretsDir, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	return &SecretsDir{dir: dir}, nil
}

// secretFileName is one file name that does not start with a dot.
var secretFileName = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]*$`)

// Secret implements Secrets.
func (d *SecretsDir) Secret(_ context.Context, team, name string) (string, error) {
	if !secretFileName.MatchString(team) || !secretFileName.MatchString(name) || strings.Contains(name, "..") {
		return "", ErrSecretNotFound
	}
	f, err := os.OpenInRoot(d.dir, team+"/"+name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", ErrSecretNotFound
	}
	if err != nil {
		return "", pathless(err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, MaxSecretBytes+1))
	if err != nil {
		return "", pathless(err)
	}
	if len(b) > MaxSecretBytes {
		return "", fmt.Errorf("larger than %d bytes", MaxSecretBytes)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// pathless drops the path from a file error: a run's error is no place
// for the runner's file layout.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Execute performs one attempt against t: it resolves t's secret
// references for the run's owner team, calls the downstream (execute),
// and takes every secret out of the failure it reports, so that a run's
// error and the runner's log hold neither a secret value nor a secret
// part of a URL.
func (h *HTTP) Execute(ctx context.Context, req Request, t *sundialv1.HttpTarget) error {
	call, secrets, err := h.resolveSecrets(ctx, req.Run.GetOwnerTeam(), t)
	if err != nil {
		return err
	}
	return redactFailure(h.execute(ctx, req, call), t, secrets)
}

// resolveSecrets returns t with its secret references replaced by the
// values of team's secrets (t itself when it has none), and the secret
// values the call carries, to be kept out of its failure.
func (h *HTTP) resolveSecrets(ctx context.Context, team string, t *sundialv1.HttpTarget) (*sundialv1.HttpTarget, []string, error) {
	var secrets []string
	for name, v := range t.GetHeaders() {
		// A value with references holds their values (added as they
		// resolve), not a secret of its own.
		if jobspec.IsSecretHeader(t, name) && !strings.Contains(v, secretRefOpen) {
			secrets = append(secrets, v)
		}
	}
	secrets = append(secrets, secretQueryValues(t)...)
	if !hasSecretRef(t) {
		return t, secrets, nil
	}
	value := func(name string) (string, error) {
		v, err := h.secret(ctx, team, name)
		if err == nil {
			secrets = append(secrets, v, escapeSecret(v))
		}
		return v, err
	}
	call := proto.CloneOf(t)
	for name, v := range call.GetHeaders() {
		if _, err := jobspec.SecretRefs(v); err != nil {
			return nil, nil, invalid("target.http.headers[%q]: %v", name, err)
		}
		resolved, err := jobspec.ExpandSecretRefs(v, value, nil)
		if err != nil {
			return nil, nil, err
		}
		if strings.ContainsAny(resolved, "\r\n\x00") {
			return nil, nil, invalid("target.http.headers[%q]: a secret it references holds CR, LF or NUL, which a header value cannot", name)
		}
		call.Headers[name] = resolved
	}
	if _, err := jobspec.SecretRefs(call.GetUrl()); err != nil {
		return nil, nil, invalid("target.http.url: %v", err)
	}
	u, err := jobspec.ExpandSecretRefs(call.GetUrl(), value, escapeSecret)
	if err != nil {
		return nil, nil, err
	}
	call.Url = u
	return call, secrets, nil
}

// secret reads one secret of team as a failure of the attempt would
// report it: never with its value.
func (h *HTTP) secret(ctx context.Context, team, name string) (string, error) {
	if h.Secrets == nil {
		return "", &Error{Code: CodeSecretNotFound, Message: fmt.Sprintf("secret %q not found for team %s: this runner has no secrets (sundial runner --secrets-dir)", name, team)}
	}
	v, err := h.Secrets.Secret(ctx, team, name)
	switch {
	case errors.Is(err, ErrSecretNotFound):
		return "", &Error{Code: CodeSecretNotFound, Message: fmt.Sprintf("secret %q not found for team %s", name, team)}
	case err != nil:
		return "", &Error{Code: CodeSecretUnavailable, Message: fmt.Sprintf("secret %q of team %s: %v", name, team, err), Retryable: true}
	}
	return v, nil
}

// secretRefOpen starts every secret reference.
const secretRefOpen = "${secret:"

func hasSecretRef(t *sundialv1.HttpTarget) bool {
	if strings.Contains(t.GetUrl(), secretRefOpen) {
		return true
	}
	for _, v := range t.GetHeaders() {
		if strings.Contains(v, secretRefOpen) {
			return true
		}
	}
	return false
}

// secretQueryValues are the values of the secret query parameters of t's
// URL as written.
func secretQueryValues(t *sundialv1.HttpTarget) []string {
	redacted := jobspec.RedactURL(t.GetUrl(), t)
	if redacted == t.GetUrl() {
		return nil
	}
	_, q, _ := strings.Cut(t.GetUrl(), "?")
	_, rq, _ := strings.Cut(redacted, "?")
	var out []string
	pairs, rpairs := strings.Split(q, "&"), strings.Split(rq, "&")
	for i := range min(len(pairs), len(rpairs)) {
		if pairs[i] != rpairs[i] {
			_, v, _ := strings.Cut(pairs[i], "=")
			out = append(out, v)
		}
	}
	return out
}

// escapeSecret percent-encodes every byte of a secret but the unreserved
// ones (RFC 3986), so that it stands for itself in a URL's path or query.
func escapeSecret(s string) string {
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// minRedactedSecret is the shortest secret value taken out of a failure's
// text wherever it stands: a shorter one would mangle the message and is
// no secret anyway.
const minRedactedSecret = 4

// urlInText finds the URLs in a failure's text: a client error quotes the
// URL it called, a redirect's the one it was sent to.
var urlInText = regexp.MustCompile("(?i)https?://[^\\s\"'`]+")

// redactFailure returns err (nil or an *Error) without the secrets of t:
// every value of secrets (a response may echo a header) and every secret
// part of a URL (jobspec.RedactURL) in its message read jobspec.Redacted.
func redactFailure(err error, t *sundialv1.HttpTarget, secrets []string) error {
	if err == nil {
		return nil
	}
	e := Classify(err, CodeConnection)
	clean := *e
	clean.Message = redactText(e.Message, t, secrets)
	if e.Err != nil {
		clean.Err = &redactedError{msg: redactText(e.Err.Error(), t, secrets), err: e.Err}
	}
	return &clean
}

func redactText(s string, t *sundialv1.HttpTarget, secrets []string) string {
	secrets = slices.DeleteFunc(slices.Clone(secrets), func(v string) bool { return len(v) < minRedactedSecret })
	slices.SortFunc(secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) }) // longest first
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, jobspec.Redacted)
	}
	return urlInText.ReplaceAllStringFunc(s, func(u string) string { return jobspec.RedactURL(u, t) })
}

// redactedError is an error whose text has its secrets taken out; errors.Is
// and errors.As still see the error it stands for.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
