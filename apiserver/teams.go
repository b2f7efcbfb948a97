package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/topics"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	"github.com/sundialhq/sundial/quota"
)

// Audit actions of TeamService.
const (
	AuditTeamCreated  = "team.created"
	AuditTeamDeleted  = "team.deleted"
	AuditTokenCreated = "token.created"
	AuditTokenRevoked = "token.revoked"
)

// maxDescription bounds a team's or a token's description, in bytes.
const maxDescription = 1024

// TeamJobCounter counts a team's jobs (quota.Store is one).
type TeamJobCounter interface {
	CountTeamJobs(ctx context.Context, team string) (int, error)
}

// TeamTopics makes a team's job topic (sundial.jobs.<team>), or finds it,
// and names it.
type TeamTopics interface {
	EnsureTeamTopic(ctx context.Context, team string) (topic string, created bool, err error)
}

// KafkaTeamTopics makes teams' job topics on the installation's Kafka, by
// the rule of `sundial migrate --teams` (topics.EnsureTeam). The API's
// Kafka principal must be allowed to create them (Sundial's service
// principal is).
type KafkaTeamTopics struct {
	// Kafka are the client options, the seed brokers among them.
	Kafka []kgo.Opt
	// Topics names the installation's topics.
	Topics topics.Names
	// Replication is the new topics' replication factor; 0 or -1 is the
	// brokers' default (default.replication.factor), as migrate's default.
	Replication int16
}

// EnsureTeamTopic implements TeamTopics.
func (k KafkaTeamTopics) EnsureTeamTopic(ctx context.Context, team string) (string, bool, error) {
	rf := k.Replication
	if rf == 0 {
		rf = -1
	}
	r, err := topics.EnsureTeam(ctx, k.Kafka, k.Topics, team, rf)
	if err != nil {
		return "", false, err
	}
	return r.Name, r.Created, nil
}

// TeamServiceConfig configures a TeamService.
type TeamServiceConfig struct {
	// Tokens keeps the teams and the tokens. Required.
	Tokens auth.TokenStore
	// Jobs counts a team's jobs, so that a team that still owns one is not
	// deleted. Required.
	Jobs TeamJobCounter
	// Topics makes a created team's job topic before the team is stored;
	// nil makes none (then `sundial migrate --teams` makes it).
	Topics TeamTopics
	// Audit records every write; nil records none.
	Audit audit.Recorder
	// Rand draws the tokens' ids and secrets; nil is crypto/rand.
	Rand io.Reader
	// Now is the clock of creations, revocations and expiry. Default
	// time.Now.
	Now func() time.Time
	// Logger; nil discards. It never receives a secret.
	Logger *slog.Logger
}

// Validate reports every bad field.
func (c TeamServiceConfig) Validate() error {
	var errs []error
	if c.Tokens == nil {
		errs = append(errs, errors.New("team service config: tokens: required"))
	}
	if c.Jobs == nil {
		errs = append(errs, errors.New("team service config: jobs: required"))
	}
	return errors.Join(errs...)
}

// TeamService implements apiv1connect.TeamServiceHandler. Teams, and the
// tokens of any team, are the cluster admin's; a team's admin lists,
// creates and revokes its own team's tokens only, and another team's
// token or team is NotFound to it. No answer but CreateToken's holds a
// secret, and none, nor any audit record, log or error, holds a secret or
// its hash.
type TeamService struct {
	cfg TeamServiceConfig
}

var _ apiv1connect.TeamServiceHandler = (*TeamService)(nil)

// NewTeamService checks cfg.
func NewTeamService(cfg TeamServiceConfig) (*TeamService, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = deps.Logger(cfg.Logger)
	cfg.Now = deps.Clock(cfg.Now)
	return &TeamService{cfg: cfg}, nil
}

// Service mounts the team service on a Server.
func (s *TeamService) Service() Service {
	return ConnectService(apiv1connect.NewTeamServiceHandler, apiv1connect.TeamServiceHandler(s))
}

// requireClusterAdmin answers PermissionDenied to any other caller.
func requireClusterAdmin(ctx context.Context, what string) (auth.Principal, error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return p, err
	}
	if !p.ClusterAdmin {
		return p, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s: cluster admin only", what))
	}
	return p, nil
}

// requireClusterAdminOf is requireClusterAdmin for a write to one team's
// object (the team, its quota): another team is NotFound to a team's
// caller, as every other team's object is, so that it learns nothing of
// the others; its own team, and the default quota row (quota.DefaultTeam,
// every team's), are PermissionDenied.
func requireClusterAdminOf(ctx context.Context, what, team string) (auth.Principal, error) {
	p, err := requireCaller(ctx)
	switch {
	case err != nil, p.ClusterAdmin:
		return p, err
	case team != p.Team && team != quota.DefaultTeam:
		return p, notVisible("team", team)
	}
	return p, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s: cluster admin only", what))
}

// mayManageTokens decides whether p may list, create or revoke the tokens
// of team ("" for a cluster-admin token): the cluster admin any team's, a
// team's admin its own team's. Another team is NotFound, so that a
// team's caller learns nothing of the others; a lower role in the own
// team is PermissionDenied.
func mayManageTokens(p auth.Principal, what, team string) error {
	switch {
	case p.ClusterAdmin:
		return nil
	case team == "" || team != p.Team:
		return notVisible("team", team)
	case p.Role < auth.RoleAdmin:
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s: needs the admin role in team %q; the caller is %s", what, team, p.Role))
	}
	return nil
}

// ListTeams implements apiv1connect.TeamServiceHandler.
func (s *TeamService) ListTeams(ctx context.Context, _ *connect.Request[apiv1.ListTeamsRequest]) (*connect.Response[apiv1.ListTeamsResponse], error) {
	if _, err := requireClusterAdmin(ctx, "list teams"); err != nil {
		return nil, err
	}
	teams, err := s.cfg.Tokens.ListTeams(ctx)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "list teams", "err", err)
		return nil, internalError("list teams")
	}
	out := &apiv1.ListTeamsResponse{}
	for _, t := range teams {
		out.Teams = append(out.Teams, teamView(t))
	}
	return connect.NewResponse(out), nil
}

// CreateTeam implements apiv1connect.TeamServiceHandler.
func (s *TeamService) CreateTeam(ctx context.Context, req *connect.Request[apiv1.CreateTeamRequest]) (*connect.Response[apiv1.CreateTeamResponse], error) {
	p, err := requireClusterAdmin(ctx, "create team")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	var bad []error
	if err := auth.CheckTeamName(m.GetName()); err != nil {
		bad = append(bad, fmt.Errorf("name: %w", err))
	}
	if len(m.GetDescription()) > maxDescription {
		bad = append(bad, fmt.Errorf("description: %d bytes, at most %d", len(m.GetDescription()), maxDescription))
	}
	if err := errors.Join(bad...); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	// The topic first: making it is idempotent, so a failure here stores
	// no team and the call may be repeated; a team stored without its
	// topic could define nothing.
	out := &apiv1.CreateTeamResponse{}
	detail := "through the API; its job topic is made by `sundial migrate --teams`"
	if s.cfg.Topics != nil {
		topic, created, err := s.cfg.Topics.EnsureTeamTopic(ctx, m.GetName())
		if err != nil {
			s.cfg.Logger.ErrorContext(ctx, "create team: job topic", "team", m.GetName(), "err", err)
			return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("create team %q: its job topic could not be made, so the team was not created; try again: %w", m.GetName(), err))
		}
		out.Topic, out.TopicCreated = topic, created
		state := "made"
		if !created {
			state = "found"
		}
		detail = fmt.Sprintf("through the API, with its job topic %s (%s)", topic, state)
	}
	now := s.cfg.Now().UTC()
	t := auth.Team{Name: m.GetName(), Description: m.GetDescription(), CreatedAt: now, CreatedBy: actorOf(p)}
	switch err := s.cfg.Tokens.CreateTeam(ctx, t); {
	case errors.Is(err, auth.ErrTeamExists):
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("team %q: exists", t.Name))
	case err != nil:
		s.cfg.Logger.ErrorContext(ctx, "create team", "team", t.Name, "err", err)
		return nil, internalError("create team")
	}
	s.record(ctx, p, now, AuditTeamCreated, t.Name, t.Name, detail)
	out.Team = teamView(t)
	return connect.NewResponse(out), nil
}

// DeleteTeam implements apiv1connect.TeamServiceHandler.
func (s *TeamService) DeleteTeam(ctx context.Context, req *connect.Request[apiv1.DeleteTeamRequest]) (*connect.Response[apiv1.DeleteTeamResponse], error) {
	name := req.Msg.GetName()
	p, err := requireClusterAdminOf(ctx, "delete team", name)
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("name: required"))
	}
	jobs, err := s.cfg.Jobs.CountTeamJobs(ctx, name)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "delete team: count jobs", "team", name, "err", err)
		return nil, internalError("delete team")
	}
	if jobs > 0 {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("team %q: owns %d jobs; delete them first", name, jobs))
	}
	now := s.cfg.Now().UTC()
	switch err := s.cfg.Tokens.DeleteTeam(ctx, name, now); {
	case errors.Is(err, auth.ErrTeamNotFound):
		return nil, notVisible("team", name)
	case errors.Is(err, auth.ErrTeamInUse):
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("team %q: has live tokens; revoke them first", name))
	case err != nil:
		s.cfg.Logger.ErrorContext(ctx, "delete team", "team", name, "err", err)
		return nil, internalError("delete team")
	}
	// The team's job topic is kept (TeamService.DeleteTeam's doc in
	// teams.proto says why): revisions are its offsets.
	s.record(ctx, p, now, AuditTeamDeleted, name, name, "through the API; its job topic is kept")
	return connect.NewResponse(&apiv1.DeleteTeamResponse{}), nil
}

// ListTokens implements apiv1connect.TeamServiceHandler.
func (s *TeamService) ListTokens(ctx context.Context, req *connect.Request[apiv1.ListTokensRequest]) (*connect.Response[apiv1.ListTokensResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	team := req.Msg.GetTeam()
	if team == "" && !p.ClusterAdmin {
		team = p.Team
	}
	if err := mayManageTokens(p, "list tokens", team); err != nil {
		return nil, err
	}
	tokens, err := s.cfg.Tokens.ListTokens(ctx, team)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "list tokens", "team", team, "err", err)
		return nil, internalError("list tokens")
	}
	now := s.cfg.Now()
	out := &apiv1.ListTokensResponse{}
	for _, t := range tokens {
		out.Tokens = append(out.Tokens, tokenView(t, now))
	}
	return connect.NewResponse(out), nil
}

// CreateToken implements apiv1connect.TeamServiceHandler.
func (s *TeamService) CreateToken(ctx context.Context, req *connect.Request[apiv1.CreateTokenRequest]) (*connect.Response[apiv1.CreateTokenResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now().UTC()
	tok, err := tokenOf(req.Msg, p, now)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if tok.ClusterAdmin && !p.ClusterAdmin {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("cluster_admin: only the cluster admin makes a cluster-admin token"))
	}
	if err := mayManageTokens(p, "create token", tok.Team); !tok.ClusterAdmin && err != nil {
		return nil, err
	}
	cred, err := auth.GenerateCredential(s.cfg.Rand)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "create token", "err", err)
		return nil, internalError("create token")
	}
	tok.ID, tok.SecretHash = cred.ID, auth.HashSecret(cred.Secret)
	switch err := s.cfg.Tokens.CreateToken(ctx, tok); {
	case errors.Is(err, auth.ErrTeamNotFound):
		return nil, notVisible("team", tok.Team)
	case err != nil:
		// The store's errors name the token's id, never its secret.
		s.cfg.Logger.ErrorContext(ctx, "create token", "token", tok.ID, "err", err)
		return nil, internalError("create token")
	}
	s.record(ctx, p, now, AuditTokenCreated, tok.ID, tok.Team, tokenDetail(tok))
	return connect.NewResponse(&apiv1.CreateTokenResponse{Token: tokenView(tok, now), Bearer: cred.Bearer()}), nil
}

// tokenOf reads a CreateTokenRequest into a token without id or secret;
// errors name the fields.
func tokenOf(m *apiv1.CreateTokenRequest, p auth.Principal, now time.Time) (auth.Token, error) {
	tok := auth.Token{ClusterAdmin: m.GetClusterAdmin(), Description: m.GetDescription(), CreatedAt: now, CreatedBy: actorOf(p)}
	var bad []error
	if tok.ClusterAdmin {
		if m.GetTeam() != "" || m.GetRole() != "" {
			bad = append(bad, errors.New("cluster_admin: acts for every team; leave team and role unset"))
		}
		tok.Role = auth.RoleAdmin
	} else {
		tok.Team = m.GetTeam()
		if tok.Team == "" {
			tok.Team = p.Team
		}
		if tok.Team == "" {
			bad = append(bad, errors.New("team: required (or cluster_admin)"))
		} else if err := auth.CheckTeamName(tok.Team); err != nil {
			bad = append(bad, fmt.Errorf("team: %w", err))
		}
		role, err := auth.ParseRole(m.GetRole())
		if err != nil {
			bad = append(bad, fmt.Errorf("role: %w", err))
		}
		tok.Role = role
	}
	if m.ExpiresIn != nil {
		if d := m.GetExpiresIn().AsDuration(); d <= 0 {
			bad = append(bad, fmt.Errorf("expires_in %s: want a positive lifetime, or none for a token that lasts until revoked", d))
		} else {
			tok.ExpiresAt = now.Add(d)
		}
	}
	if len(tok.Description) > maxDescription {
		bad = append(bad, fmt.Errorf("description: %d bytes, at most %d", len(tok.Description), maxDescription))
	}
	return tok, errors.Join(bad...)
}

// RevokeToken implements apiv1connect.TeamServiceHandler.
func (s *TeamService) RevokeToken(ctx context.Context, req *connect.Request[apiv1.RevokeTokenRequest]) (*connect.Response[apiv1.RevokeTokenResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	id := req.Msg.GetId()
	if id == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("id: required"))
	}
	tok, err := s.cfg.Tokens.GetToken(ctx, id)
	switch {
	case errors.Is(err, auth.ErrTokenNotFound):
		return nil, notVisible("token", id)
	case err != nil:
		s.cfg.Logger.ErrorContext(ctx, "revoke token: read", "token", id, "err", err)
		return nil, internalError("revoke token")
	}
	if err := mayManageTokens(p, "revoke token", tok.Team); err != nil {
		if connect.CodeOf(err) == connect.CodeNotFound {
			return nil, notVisible("token", id)
		}
		return nil, err
	}
	now := s.cfg.Now().UTC()
	switch err := s.cfg.Tokens.RevokeToken(ctx, id, now); {
	case errors.Is(err, auth.ErrTokenNotFound):
		return nil, notVisible("token", id)
	case err != nil:
		s.cfg.Logger.ErrorContext(ctx, "revoke token", "token", id, "err", err)
		return nil, internalError("revoke token")
	}
	if tok.RevokedAt.IsZero() {
		tok.RevokedAt = now
		s.record(ctx, p, now, AuditTokenRevoked, id, tok.Team, "through the API")
	}
	return connect.NewResponse(&apiv1.RevokeTokenResponse{Token: tokenView(tok, now)}), nil
}

// record writes the audit record of a write that took effect
// (recordAudit).
func (s *TeamService) record(ctx context.Context, p auth.Principal, at time.Time, action, subject, team, detail string) {
	recordAudit(ctx, s.cfg.Audit, s.cfg.Logger, p, at, action, subject, team, detail)
}

// recordAudit writes to r, when set, the audit record of a write of the
// team and quota services that took effect; a failure is logged, the write
// stands. Its ID is the time, action and subject, so that records sort in
// the order of the writes.
func recordAudit(ctx context.Context, r audit.Recorder, log *slog.Logger, p auth.Principal, at time.Time, action, subject, team, detail string) {
	if r == nil {
		return
	}
	rec := audit.Record{
		ID:      fmt.Sprintf("%s/%s/%s", at.UTC().Format("20060102T150405.000000000Z"), action, subject),
		At:      at.UTC().Truncate(time.Millisecond),
		Actor:   actorOf(p),
		Action:  action,
		Subject: subject,
		Team:    team,
		Detail:  detail,
	}
	if err := r.Record(ctx, rec); err != nil {
		log.ErrorContext(ctx, "audit record not written", "action", action, "subject", subject, "err", err)
	}
}

// actorOf names the caller in created_by and the audit trail.
func actorOf(p auth.Principal) string {
	if p.Subject != "" {
		return p.Subject
	}
	if p.ClusterAdmin {
		return "api:cluster-admin"
	}
	return "api:" + p.Team
}

// tokenDetail is the audit detail of a created token: what it may do and
// for how long, never its secret.
func tokenDetail(t auth.Token) string {
	who := "cluster admin"
	if !t.ClusterAdmin {
		who = "role " + t.Role.String()
	}
	expires := "never"
	if !t.ExpiresAt.IsZero() {
		expires = t.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("through the API: %s, expires %s", who, expires)
}

func teamView(t auth.Team) *apiv1.Team {
	v := &apiv1.Team{Name: t.Name, Description: t.Description, CreatedBy: t.CreatedBy}
	if !t.CreatedAt.IsZero() {
		v.CreatedAt = timestamppb.New(t.CreatedAt)
	}
	return v
}

// tokenView is a token's metadata: never its secret's hash.
func tokenView(t auth.Token, now time.Time) *apiv1.Token {
	v := &apiv1.Token{
		Id: t.ID, Team: t.Team, Role: t.Role.String(), ClusterAdmin: t.ClusterAdmin, Description: t.Description,
		CreatedBy: t.CreatedBy, Live: t.Live(now),
	}
	if !t.CreatedAt.IsZero() {
		v.CreatedAt = timestamppb.New(t.CreatedAt)
	}
	if !t.ExpiresAt.IsZero() {
		v.ExpiresAt = timestamppb.New(t.ExpiresAt)
	}
	if !t.RevokedAt.IsZero() {
		v.RevokedAt = timestamppb.New(t.RevokedAt)
	}
	return v
}
