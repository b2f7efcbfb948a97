package cassandra

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/sundialhq/sundial/auth"
)

// The teams and tokens tables (migration 5) hold who may call the API.
// Their rows are written only by lightweight transactions (create if not
// exists, delete if exists, revoke if not revoked), so two operators racing
// on one name or id see one winner. GetToken, on the API's path, is a plain
// read at Config.Consistency: a transaction commits at a quorum, so a read
// at LOCAL_QUORUM after a revocation sees it. Listing reads the whole
// table: teams and tokens are counted in hundreds, not millions.

var _ auth.TokenStore = (*Store)(nil)

// CreateTeam implements auth.TokenStore.
func (s *Store) CreateTeam(ctx context.Context, t auth.Team) error {
	if err := auth.CheckTeamName(t.Name); err != nil {
		return fmt.Errorf("create team: %w", err)
	}
	applied, err := s.query(ctx, fmt.Sprintf(`INSERT INTO %s.teams (name, description, created_at, created_by) VALUES (?, ?, ?, ?) IF NOT EXISTS`, s.cfg.Keyspace),
		t.Name, t.Description, nullTime(t.CreatedAt), t.CreatedBy).MapScanCAS(map[string]any{})
	switch {
	case err == nil && applied:
		return nil
	case err == nil:
		return fmt.Errorf("create team %s: %w", t.Name, auth.ErrTeamExists)
	case !casUnknown(err):
		return fmt.Errorf("create team %s: %w", t.Name, err)
	}
	// The insert may or may not have applied: the row tells whether it is
	// this call's.
	got, rerr := s.readTeam(ctx, t.Name)
	if rerr != nil {
		return fmt.Errorf("create team %s: %w; reading it back: %w", t.Name, err, rerr)
	}
	if got.CreatedAt.Equal(ms(t.CreatedAt)) && got.CreatedBy == t.CreatedBy && got.Description == t.Description {
		return nil
	}
	return fmt.Errorf("create team %s: %w", t.Name, auth.ErrTeamExists)
}

func (s *Store) readTeam(ctx context.Context, name string) (auth.Team, error) {
	t := auth.Team{Name: name}
	err := s.serialRead(ctx, fmt.Sprintf(`SELECT description, created_at, created_by FROM %s.teams WHERE name = ?`, s.cfg.Keyspace), name).
		Scan(&t.Description, &t.CreatedAt, &t.CreatedBy)
	if errors.Is(err, gocql.ErrNotFound) {
		return auth.Team{}, fmt.Errorf("team %s: %w", name, auth.ErrTeamNotFound)
	}
	if err != nil {
		return auth.Team{}, fmt.Errorf("read team %s: %w", name, err)
	}
	t.CreatedAt = fromDB(t.CreatedAt)
	return t, nil
}

// ListTeams implements auth.TokenStore.
func (s *Store) ListTeams(ctx context.Context) ([]auth.Team, error) {
	iter := s.idempotent(ctx, fmt.Sprintf(`SELECT name, description, created_at, created_by FROM %s.teams`, s.cfg.Keyspace)).Iter()
	var out []auth.Team
	var t auth.Team
	for iter.Scan(&t.Name, &t.Description, &t.CreatedAt, &t.CreatedBy) {
		t.CreatedAt = fromDB(t.CreatedAt)
		out = append(out, t)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	slices.SortFunc(out, func(a, b auth.Team) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteTeam implements auth.TokenStore. A token created for the team
// between the check and the delete would outlive it; tokens are created by
// operators, one at a time, so the check is a guard against mistakes, not
// a lock.
func (s *Store) DeleteTeam(ctx context.Context, name string, now time.Time) error {
	if _, err := s.readTeam(ctx, name); err != nil {
		return fmt.Errorf("delete team: %w", err)
	}
	tokens, err := s.ListTokens(ctx, name)
	if err != nil {
		return fmt.Errorf("delete team %s: %w", name, err)
	}
	for _, t := range tokens {
		if t.Live(now) {
			return fmt.Errorf("delete team %s: token %s: %w", name, t.ID, auth.ErrTeamInUse)
		}
	}
	applied, err := s.query(ctx, fmt.Sprintf(`DELETE FROM %s.teams WHERE name = ? IF EXISTS`, s.cfg.Keyspace), name).MapScanCAS(map[string]any{})
	switch {
	case err == nil && applied:
		return nil
	case err == nil:
		return fmt.Errorf("delete team %s: %w", name, auth.ErrTeamNotFound)
	case !casUnknown(err):
		return fmt.Errorf("delete team %s: %w", name, err)
	}
	if _, rerr := s.readTeam(ctx, name); errors.Is(rerr, auth.ErrTeamNotFound) {
		return nil
	} else if rerr != nil {
		return fmt.Errorf("delete team %s: %w; reading it back: %w", name, err, rerr)
	}
	return fmt.Errorf("delete team %s: %w; the team is still there", name, err)
}

const tokenColumns = `id, team, role, cluster_admin, secret_hash, created_at, created_by, revoked_at, expires_at, description`

// CreateToken implements auth.TokenStore.
func (s *Store) CreateToken(ctx context.Context, t auth.Token) error {
	if err := t.Check(); err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	if !t.ClusterAdmin {
		if _, err := s.readTeam(ctx, t.Team); err != nil {
			return fmt.Errorf("create token for team %s: %w", t.Team, err)
		}
	}
	applied, err := s.query(ctx, fmt.Sprintf(`INSERT INTO %s.tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS`, s.cfg.Keyspace),
		t.ID, t.Team, t.Role.String(), t.ClusterAdmin, t.SecretHash, nullTime(t.CreatedAt), t.CreatedBy,
		nullTime(t.RevokedAt), nullTime(t.ExpiresAt), t.Description).MapScanCAS(map[string]any{})
	switch {
	case err == nil && applied:
		return nil
	case err == nil:
		return fmt.Errorf("create token %s: %w", t.ID, auth.ErrTokenExists)
	case !casUnknown(err):
		return fmt.Errorf("create token %s: %w", t.ID, err)
	}
	got, rerr := s.readToken(s.serialRead(ctx, fmt.Sprintf(`SELECT `+tokenColumns+` FROM %s.tokens WHERE id = ?`, s.cfg.Keyspace), t.ID))
	if rerr != nil {
		return fmt.Errorf("create token %s: %w; reading it back: %w", t.ID, err, rerr)
	}
	if !bytes.Equal(got.SecretHash, t.SecretHash) {
		return fmt.Errorf("create token %s: %w", t.ID, auth.ErrTokenExists)
	}
	return nil
}

// GetToken implements auth.TokenStore.
func (s *Store) GetToken(ctx context.Context, id string) (auth.Token, error) {
	t, err := s.readToken(s.idempotent(ctx, fmt.Sprintf(`SELECT `+tokenColumns+` FROM %s.tokens WHERE id = ?`, s.cfg.Keyspace), id))
	if err != nil {
		return auth.Token{}, fmt.Errorf("token %s: %w", id, err)
	}
	return t, nil
}

// readToken scans one token row; ErrTokenNotFound when there is none.
func (s *Store) readToken(q *gocql.Query) (auth.Token, error) {
	var r tokenRow
	err := q.Scan(r.dest()...)
	if errors.Is(err, gocql.ErrNotFound) {
		return auth.Token{}, auth.ErrTokenNotFound
	}
	if err != nil {
		return auth.Token{}, err
	}
	return r.token()
}

// tokenRow is a tokens row as the driver scans it.
type tokenRow struct {
	t    auth.Token
	role string
}

func (r *tokenRow) dest() []any {
	return []any{&r.t.ID, &r.t.Team, &r.role, &r.t.ClusterAdmin, &r.t.SecretHash, &r.t.CreatedAt, &r.t.CreatedBy, &r.t.RevokedAt, &r.t.ExpiresAt, &r.t.Description}
}

func (r *tokenRow) token() (auth.Token, error) {
	t := r.t
	role, err := auth.ParseRole(r.role)
	if err != nil {
		return auth.Token{}, fmt.Errorf("token %s: stored %w", t.ID, err)
	}
	t.Role = role
	t.SecretHash = slices.Clone(t.SecretHash)
	t.CreatedAt, t.RevokedAt, t.ExpiresAt = fromDB(t.CreatedAt), fromDB(t.RevokedAt), fromDB(t.ExpiresAt)
	return t, nil
}

// ListTokens implements auth.TokenStore.
func (s *Store) ListTokens(ctx context.Context, team string) ([]auth.Token, error) {
	iter := s.idempotent(ctx, fmt.Sprintf(`SELECT `+tokenColumns+` FROM %s.tokens`, s.cfg.Keyspace)).Iter()
	var out []auth.Token
	var r tokenRow
	for iter.Scan(r.dest()...) {
		if team != "" && r.t.Team != team {
			continue
		}
		t, err := r.token()
		if err != nil {
			_ = iter.Close()
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	slices.SortFunc(out, func(a, b auth.Token) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// RevokeToken implements auth.TokenStore. The transaction is conditional
// on the row's created_at, which a missing row lacks, so it never creates a
// row for an unknown id, and on revoked_at being null, so the first
// revocation's time stays.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) error {
	read := func() (auth.Token, error) {
		return s.readToken(s.serialRead(ctx, fmt.Sprintf(`SELECT `+tokenColumns+` FROM %s.tokens WHERE id = ?`, s.cfg.Keyspace), id))
	}
	t, err := read()
	if err != nil {
		return fmt.Errorf("revoke token %s: %w", id, err)
	}
	if !t.RevokedAt.IsZero() {
		return nil
	}
	_, err = s.query(ctx, fmt.Sprintf(`UPDATE %s.tokens SET revoked_at = ? WHERE id = ? IF revoked_at = null AND created_at = ?`, s.cfg.Keyspace),
		ms(at), id, nullTime(t.CreatedAt)).MapScanCAS(map[string]any{})
	if err != nil && !casUnknown(err) {
		return fmt.Errorf("revoke token %s: %w", id, err)
	}
	// Applied, lost to another revocation, or unknown: the row decides.
	t, rerr := read()
	if rerr != nil {
		return fmt.Errorf("revoke token %s: reading it back: %w", id, errors.Join(err, rerr))
	}
	if t.RevokedAt.IsZero() {
		return fmt.Errorf("revoke token %s: %w; the token is still live", id, err)
	}
	return nil
}

// nullTime is t at millisecond precision, or null for the zero time, so
// that conditions on "= null" hold for times never set.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return ms(t)
}
