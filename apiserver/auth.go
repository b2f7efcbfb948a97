package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/sundialhq/sundial/auth"
)

// Authenticator turns a bearer token into the principal it stands for. It
// fails for a token it does not know, one that expired or was revoked;
// whatever it returns as error, the caller is answered Unauthenticated.
type Authenticator interface {
	Authenticate(ctx context.Context, bearer string) (auth.Principal, error)
}

// errNoToken is the answer to a request without a bearer token.
var errNoToken = errors.New("authorization: a bearer token is required (Authorization: Bearer <token>)")

// errBadToken is the answer to a request whose Sundial token is refused. It
// says no more, so that the answer tells nothing about which tokens exist.
var errBadToken = errors.New("authorization: the bearer token is not valid")

// refusal is the answer to a request whose bearer was refused with err. A
// Sundial token's refusal is errBadToken; any other bearer (a JWT) carries
// all it is checked against in itself, so the answer says why it was
// refused (expired, wrong audience, a missing claim) and reveals nothing
// about the token store. An auth.RefusedError never contains a secret.
func refusal(token string, err error) error {
	var r *auth.RefusedError
	if strings.HasPrefix(token, auth.TokenPrefix) || !errors.As(err, &r) {
		return errBadToken
	}
	return fmt.Errorf("authorization: the bearer token is not valid: %s (%s)", r.Detail, r.Reason)
}

// bearer returns the token of an Authorization header value.
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// authenticate checks a request's Authorization header and returns ctx
// carrying the principal. A ctx that carries one already (the server's
// edge authenticated the request before its body was read) is returned as
// it is, so that a request costs one authentication.
func authenticate(ctx context.Context, a Authenticator, header string) (context.Context, error) {
	if _, ok := auth.FromContext(ctx); ok {
		return ctx, nil
	}
	token, ok := bearer(header)
	if !ok {
		return ctx, connect.NewError(connect.CodeUnauthenticated, errNoToken)
	}
	p, err := a.Authenticate(ctx, token)
	switch {
	case err == nil:
	case errors.Is(err, auth.ErrUnauthenticated):
		return ctx, connect.NewError(connect.CodeUnauthenticated, refusal(token, err))
	default:
		// The credential could not be checked (the token store or the
		// identity provider is unreachable): the server's fault, never
		// a bad credential.
		return ctx, connect.NewError(connect.CodeUnavailable, fmt.Errorf("authorization: the credential could not be checked: %w", err))
	}
	return auth.NewContext(ctx, p), nil
}

// authInterceptor authenticates unary calls and streams alike.
type authInterceptor struct{ a Authenticator }

// NewAuthInterceptor returns the interceptor that authenticates every call
// with a: a call without a valid bearer token is refused with
// Unauthenticated before it reaches the service; an accepted call's context
// carries its auth.Principal.
func NewAuthInterceptor(a Authenticator) connect.Interceptor { return authInterceptor{a} }

func (i authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		ctx, err := authenticate(ctx, i.a, req.Header().Get("Authorization"))
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (i authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := authenticate(ctx, i.a, conn.RequestHeader().Get("Authorization"))
		if err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// RequireAuth wraps a plain HTTP handler in the same authentication,
// answering 401 with a WWW-Authenticate challenge when it refuses the
// credential, and 503 when it could not check it.
func RequireAuth(a Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, err := authenticate(r.Context(), a, r.Header.Get("Authorization"))
		if err != nil {
			msg, status := err.Error(), http.StatusUnauthorized
			if ce := new(connect.Error); errors.As(err, &ce) {
				msg = ce.Message()
				if ce.Code() == connect.CodeUnavailable {
					status = http.StatusServiceUnavailable
				}
			}
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sundial"`)
			}
			http.Error(w, msg, status)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// BearerToken is a client interceptor that sends token on every call, for
// Go clients of the API.
func BearerToken(token string) connect.Interceptor { return bearerToken(token) }

type bearerToken string

func (t bearerToken) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			req.Header().Set("Authorization", "Bearer "+string(t))
		}
		return next(ctx, req)
	}
}

func (t bearerToken) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(t))
		return conn
	}
}

func (t bearerToken) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
