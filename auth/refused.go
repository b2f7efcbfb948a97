package auth

import (
	"errors"
)

// ErrUnauthenticated is what every refused credential matches with
// errors.Is; the API answers it with 401 (Unauthenticated). An error that
// does not match it (a store that cannot be read) is the server's fault,
// not the caller's.
var ErrUnauthenticated = errors.New("unauthenticated")

// Refused reasons, the values of the result label of the authentications
// metric besides "ok" and "error".
const (
	ReasonMalformed     = "malformed"
	ReasonUnknown       = "unknown"
	ReasonBadSecret     = "bad_secret"
	ReasonRevoked       = "revoked"
	ReasonExpired       = "expired"
	ReasonBadSignature  = "bad_signature"
	ReasonWrongAudience = "wrong_audience"
	ReasonWrongIssuer   = "wrong_issuer"
	ReasonClaims        = "claims"
	ReasonNoMethod      = "no_method"
	ReasonUnknownTeam   = "unknown_team"
)

// RefusedError is a credential refused for a reason the caller may be told.
// Its message never contains a secret.
type RefusedError struct {
	// Reason is one of the Reason constants.
	Reason string
	// Detail says what was wrong, for the caller and the logs.
	Detail string
}

func (e *RefusedError) Error() string { return "unauthenticated: " + e.Detail }

// Is makes a RefusedError match ErrUnauthenticated.
func (e *RefusedError) Is(target error) bool { return target == ErrUnauthenticated }

// Refuse returns a RefusedError.
func Refuse(reason, detail string) error { return &RefusedError{Reason: reason, Detail: detail} }
