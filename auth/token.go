package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sundialhq/sundial/internal/topics"
)

// TokenPrefix starts every bearer token Sundial issues. It lets a chain of
// authenticators route a bearer without trying each, and lets secret
// scanners recognise a leaked token.
const TokenPrefix = "sdl_"

// Sizes of a token's parts, in random bytes. The id only has to be unique;
// the secret carries the 256 bits an attacker would have to guess, which is
// why a fast hash (SHA-256) is enough to store it: there is no dictionary
// to try, unlike a password.
const (
	tokenIDBytes     = 10
	tokenSecretBytes = 32
)

// tokenEncoding is lower-case base32 without padding: no '_' (the separator),
// nothing a shell or a URL would quote.
var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// CheckTeamName reports why name cannot name a team, or nil. The rule is
// the team job topics' (topics.ValidTeam): a team's definitions go to
// sundial.jobs.<team>, so a name that cannot make that topic, or makes
// another one (sundial.jobs.status), cannot name a team either.
func CheckTeamName(name string) error {
	if err := topics.ValidTeam(name); err != nil {
		return fmt.Errorf("team name: %w", err)
	}
	return nil
}

// Sentinel errors of a TokenStore, for callers to branch on.
var (
	ErrTeamExists    = errors.New("team exists")
	ErrTeamNotFound  = errors.New("team not found")
	ErrTeamInUse     = errors.New("team has live tokens")
	ErrTokenExists   = errors.New("token id exists")
	ErrTokenNotFound = errors.New("token not found")
)

// Team is a group of people who own jobs.
type Team struct {
	// Name identifies the team (CheckTeamName).
	Name string
	// Description is free text for operators.
	Description string
	// CreatedAt is when the team was created.
	CreatedAt time.Time
	// CreatedBy names who created it, e.g. "cli:alice".
	CreatedBy string
}

// Token is a stored bearer token. It holds the SHA-256 hash of the secret,
// never the secret: a copy of the store does not let anyone call the API.
type Token struct {
	// ID is the public part of the bearer, used to look the token up.
	ID string
	// Team is the team the token acts for; empty for a cluster-admin token.
	Team string
	// Role is the token's role in Team; RoleAdmin for a cluster admin.
	Role Role
	// ClusterAdmin tokens act on every team.
	ClusterAdmin bool
	// SecretHash is SHA-256 of the secret part of the bearer.
	SecretHash []byte
	// CreatedAt is when the token was created.
	CreatedAt time.Time
	// CreatedBy names who created it.
	CreatedBy string
	// RevokedAt is when the token was revoked; zero while it is live.
	RevokedAt time.Time
	// ExpiresAt is when the token stops working; zero for never.
	ExpiresAt time.Time
	// Description is free text, e.g. what the token is for.
	Description string
}

// Live reports whether the token may authenticate at now.
func (t Token) Live(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

// Principal is the caller a token authenticates as.
func (t Token) Principal() Principal {
	if t.ClusterAdmin {
		return Principal{Subject: "token:" + t.ID, Role: RoleAdmin, ClusterAdmin: true}
	}
	return Principal{Subject: "token:" + t.ID, Team: t.Team, Role: t.Role}
}

// Check reports every field of t that a store must refuse.
func (t Token) Check() error {
	var bad []error
	if !validTokenID(t.ID) {
		bad = append(bad, fmt.Errorf("token id %q: want %d lower-case base32 characters", t.ID, tokenEncoding.EncodedLen(tokenIDBytes)))
	}
	switch {
	case t.ClusterAdmin && t.Team != "":
		bad = append(bad, fmt.Errorf("token team %q: a cluster-admin token acts for every team and names none", t.Team))
	case t.ClusterAdmin && t.Role != RoleAdmin:
		bad = append(bad, fmt.Errorf("token role %s: a cluster-admin token has role admin", t.Role))
	case !t.ClusterAdmin:
		if err := CheckTeamName(t.Team); err != nil {
			bad = append(bad, fmt.Errorf("token team: %w", err))
		}
		if t.Role < RoleViewer || t.Role > RoleAdmin {
			bad = append(bad, fmt.Errorf("token role %d: want viewer, operator or admin", int(t.Role)))
		}
	}
	if len(t.SecretHash) != sha256.Size {
		bad = append(bad, fmt.Errorf("token secret hash: %d bytes, want %d (SHA-256)", len(t.SecretHash), sha256.Size))
	}
	if t.CreatedAt.IsZero() {
		bad = append(bad, errors.New("token created_at: required"))
	}
	if !t.ExpiresAt.IsZero() && !t.ExpiresAt.After(t.CreatedAt) {
		bad = append(bad, fmt.Errorf("token expires_at %s: not after created_at %s", t.ExpiresAt.Format(time.RFC3339), t.CreatedAt.Format(time.RFC3339)))
	}
	return errors.Join(bad...)
}

// TokenStore keeps teams and tokens. Implementations: an in-memory one
// (MemoryStore, for the embedded mode and tests) and Cassandra's (package
// store/cassandra); package auth/authtest holds the conformance suite both
// pass.
type TokenStore interface {
	// CreateTeam adds a team; ErrTeamExists if the name is taken.
	CreateTeam(ctx context.Context, t Team) error
	// ListTeams returns every team, by name.
	ListTeams(ctx context.Context) ([]Team, error)
	// DeleteTeam removes a team: ErrTeamNotFound if there is none,
	// ErrTeamInUse while it has a live token (revoke them first, so that
	// no token outlives its team).
	DeleteTeam(ctx context.Context, name string, now time.Time) error
	// CreateToken stores a token: ErrTokenExists if its id is taken,
	// ErrTeamNotFound if its team does not exist.
	CreateToken(ctx context.Context, t Token) error
	// GetToken returns a token, revoked or not; ErrTokenNotFound if there
	// is none.
	GetToken(ctx context.Context, id string) (Token, error)
	// ListTokens returns the tokens of team, or every token when team is
	// empty, by id, revoked ones included.
	ListTokens(ctx context.Context, team string) ([]Token, error)
	// RevokeToken marks a token revoked at at; revoking it again keeps the
	// first time. ErrTokenNotFound if there is none.
	RevokeToken(ctx context.Context, id string, at time.Time) error
}

// Credential is a freshly generated token: its id, and the secret that is
// shown to its owner once and then only kept hashed.
type Credential struct {
	ID     string
	Secret string
}

// GenerateCredential draws a new id and secret from r (crypto/rand's Reader
// when nil).
func GenerateCredential(r io.Reader) (Credential, error) {
	if r == nil {
		r = rand.Reader
	}
	buf := make([]byte, tokenIDBytes+tokenSecretBytes)
	if _, err := io.ReadFull(r, buf); err != nil {
		return Credential{}, fmt.Errorf("generate token: %w", err)
	}
	return Credential{
		ID:     tokenEncoding.EncodeToString(buf[:tokenIDBytes]),
		Secret: tokenEncoding.EncodeToString(buf[tokenIDBytes:]),
	}, nil
}

// Bearer is the token as its owner sends it: sdl_<id>_<secret>.
func (c Credential) Bearer() string { return TokenPrefix + c.ID + "_" + c.Secret }

// String hides the secret, so that a Credential printed by mistake shows
// only its id.
func (c Credential) String() string { return TokenPrefix + c.ID + "_…" }

// HashSecret is what a TokenStore keeps of a secret.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// ParseBearer splits a bearer token into its id and secret. The error never
// contains the secret.
func ParseBearer(bearer string) (Credential, error) {
	rest, ok := strings.CutPrefix(bearer, TokenPrefix)
	if !ok {
		return Credential{}, fmt.Errorf("bearer: not a Sundial token (want %s<id>_<secret>)", TokenPrefix)
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || !validTokenID(id) {
		return Credential{}, fmt.Errorf("bearer: malformed Sundial token (want %s<id>_<secret>)", TokenPrefix)
	}
	if b, err := tokenEncoding.DecodeString(secret); err != nil || len(b) != tokenSecretBytes {
		return Credential{}, fmt.Errorf("bearer: token %s: malformed secret", id)
	}
	return Credential{ID: id, Secret: secret}, nil
}

func validTokenID(id string) bool {
	b, err := tokenEncoding.DecodeString(id)
	return err == nil && len(b) == tokenIDBytes
}

// secretMatches compares in constant time, so that the time a refusal takes
// says nothing about how much of the secret was right.
func secretMatches(hash []byte, secret string) bool {
	return subtle.ConstantTimeCompare(hash, HashSecret(secret)) == 1
}
