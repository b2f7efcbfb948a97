package apiserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"

	"github.com/sundialhq/sundial/auth"
)

// StaticTokens authenticates a fixed list of tokens given at start, for
// development and tests: the tokens sit in the process's configuration in
// clear, cannot be revoked without a restart and leave nothing to audit
// but their position in the list. Production uses the token store.
type StaticTokens struct {
	tokens []staticToken
}

type staticToken struct {
	sum       [sha256.Size]byte
	principal auth.Principal
}

// ClusterAdminTeam is the TEAM of a static token that authenticates the
// cluster admin.
const ClusterAdminTeam = "*"

// ParseStaticTokens reads "TEAM:ROLE:SECRET" specs (TEAM "*" for the
// cluster admin, ROLE viewer, operator or admin). The secret may contain
// colons. Errors name the spec by position, never by its secret.
func ParseStaticTokens(specs []string) (*StaticTokens, error) {
	s := &StaticTokens{}
	var errs []error
	seen := map[[sha256.Size]byte]bool{}
	for i, spec := range specs {
		team, rest, ok1 := strings.Cut(spec, ":")
		roleName, secret, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || team == "" || secret == "" {
			errs = append(errs, fmt.Errorf("static token %d: want TEAM:ROLE:SECRET", i+1))
			continue
		}
		role, err := auth.ParseRole(roleName)
		if err != nil {
			errs = append(errs, fmt.Errorf("static token %d: %w", i+1, err))
			continue
		}
		sum := sha256.Sum256([]byte(secret))
		if seen[sum] {
			errs = append(errs, fmt.Errorf("static token %d: its secret is also another token's", i+1))
			continue
		}
		seen[sum] = true
		p := auth.Principal{Subject: fmt.Sprintf("static-token:%d", i+1), Team: team, Role: role}
		if team == ClusterAdminTeam {
			p = auth.Principal{Subject: p.Subject, Role: auth.RoleAdmin, ClusterAdmin: true}
		}
		s.tokens = append(s.tokens, staticToken{sum: sum, principal: p})
	}
	return s, errors.Join(errs...)
}

// Authenticate implements Authenticator. It compares digests in constant
// time and looks at every token, so that its timing tells nothing.
func (s *StaticTokens) Authenticate(_ context.Context, bearer string) (auth.Principal, error) {
	sum := sha256.Sum256([]byte(bearer))
	var (
		found auth.Principal
		ok    bool
	)
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			found, ok = t.principal, true
		}
	}
	if !ok {
		return auth.Principal{}, auth.Refuse(auth.ReasonUnknown, "not a static token")
	}
	return found, nil
}
