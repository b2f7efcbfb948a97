package main

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/store/cassandra"
)

// The teams and tokens commands write Cassandra directly, not through the
// API: they are how the first cluster-admin token comes to exist, and how
// an operator with database access recovers when every admin token is
// lost. Whoever can run them can read the store anyway. The API's
// TeamService (apiserver/teams.go) offers the same calls to callers with
// a token.

const bootstrapNote = `These commands talk to Cassandra directly, not to the API: they are the
bootstrap path (the first cluster-admin token is made here) and need
the store's credentials. The API's TeamService (and the web console's
team page) offers the same calls to the cluster admin, and a team's
tokens to the team's admin.`

func teamsCommand() *cli.Command {
	return &cli.Command{
		Name:        "teams",
		Usage:       "create, list and delete the teams that own jobs",
		Description: bootstrapNote,
		Commands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "create a team",
				ArgsUsage: "NAME",
				Description: `Creates the team and, with --kafka-brokers, its definitions topic
sundial.jobs.<team> if missing: the registry reads a team's definitions only
from there, and the API writes them there.

Example:
  sundial teams create payments --description "card payments"`,
				Flags: append(append(cassandraStoreFlags(), kafkaFlags()...),
					&cli.StringFlag{Name: "description", Usage: "what the team is", Sources: envVar("description")},
					&cli.IntFlag{Name: "topic-replication-factor", Value: -1, Usage: "replication factor of the team's topic when created; -1 for the brokers' default", Sources: envVar("topic-replication-factor")},
				),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					name, err := oneArg(cmd, "team name")
					kopts, kerr := kafkaOptions(cmd)
					return withStore(ctx, cmd, []error{err, kerr}, func(st *cassandra.Store) error {
						t := auth.Team{Name: name, Description: cmd.String("description"), CreatedAt: time.Now().UTC(), CreatedBy: cliActor()}
						if err := st.CreateTeam(ctx, t); err != nil {
							return err
						}
						fmt.Fprintf(cmd.Root().Writer, "created team %s\n", name)
						return ensureTeamTopics(ctx, cmd, kopts, []string{name})
					})
				},
			},
			{
				Name:  "list",
				Usage: "print every team",
				Flags: append(cassandraStoreFlags(), outputFlag()),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					form, err := outputOf(cmd)
					return withStore(ctx, cmd, errs(err), func(st *cassandra.Store) error {
						teams, err := st.ListTeams(ctx)
						if err != nil {
							return err
						}
						if out := (emitter{w: cmd.Root().Writer, form: form}); out.structured() {
							return emitAll(out, teams, func(t auth.Team) teamOut {
								return teamOut{Name: t.Name, Description: t.Description, CreatedAt: t.CreatedAt.UTC(), CreatedBy: t.CreatedBy}
							})
						}
						w := tabwriter.NewWriter(cmd.Root().Writer, 0, 4, 2, ' ', 0)
						fmt.Fprintln(w, "NAME\tCREATED\tCREATED BY\tDESCRIPTION")
						for _, t := range teams {
							fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", t.Name, dateOf(t.CreatedAt), dash(t.CreatedBy), dash(t.Description))
						}
						return w.Flush()
					})
				},
			},
			{
				Name:        "delete",
				Usage:       "delete a team that has no live token",
				ArgsUsage:   "NAME",
				Description: "Revoke the team's tokens first (sundial tokens list --team NAME): no token outlives its team.",
				Flags:       cassandraStoreFlags(),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					name, err := oneArg(cmd, "team name")
					return withStore(ctx, cmd, []error{err}, func(st *cassandra.Store) error {
						if err := st.DeleteTeam(ctx, name, time.Now()); err != nil {
							return err
						}
						fmt.Fprintf(cmd.Root().Writer, "deleted team %s\n", name)
						return nil
					})
				},
			},
		},
	}
}

// ensureTeamTopics creates the definitions topics sundial.jobs.<team> of
// teams that lack one and prints each; without --kafka-brokers it says how
// to create them later.
func ensureTeamTopics(ctx context.Context, cmd *cli.Command, kopts []kgo.Opt, teams []string) error {
	out := cmd.Root().Writer
	if len(cmd.StringSlice("kafka-brokers")) == 0 {
		fmt.Fprintf(out, "topics of %v not created: no --kafka-brokers; run `sundial migrate --teams %s` before writing their definitions\n",
			teams, strings.Join(teams, ","))
		return nil
	}
	names := topics.Names{Prefix: cmd.String("topic-prefix")}
	specs := make([]topics.Spec, 0, len(teams))
	for _, team := range teams {
		if err := topics.ValidTeam(team); err != nil {
			return err
		}
		specs = append(specs, names.TeamJobsSpec(team))
	}
	res, err := topics.EnsureAt(ctx, cmd.StringSlice("kafka-brokers"), specs, int16(cmd.Int("topic-replication-factor")), kopts...)
	for _, r := range res {
		state := "exists"
		if r.Created {
			state = "created"
		}
		fmt.Fprintf(out, "topic %s %s\n", r.Name, state)
	}
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	return nil
}

func tokensCommand() *cli.Command {
	return &cli.Command{
		Name:        "tokens",
		Usage:       "create, list and revoke API bearer tokens",
		Description: bootstrapNote + "\n\nA token is sdl_<id>_<secret>; the store keeps the SHA-256 of the secret, never the secret.",
		Commands: []*cli.Command{
			{
				Name:  "create",
				Usage: "create a token and print it, once",
				Description: `Prints the bearer token on standard output, and nothing else there: it is
shown this once and cannot be read back.

Examples:
  sundial tokens create --team payments --role operator --expires 720h --description "deploy pipeline"
  sundial tokens create --cluster-admin --description "first admin"`,
				Flags: append(cassandraStoreFlags(),
					&cli.StringFlag{Name: "team", Usage: "team the token acts for (required unless --cluster-admin)", Sources: envVar("team")},
					&cli.StringFlag{Name: "role", Usage: "role in the team: viewer, operator or admin (required unless --cluster-admin)", Sources: envVar("role")},
					&cli.BoolFlag{Name: "cluster-admin", Usage: "a token that acts on every team and manages teams and quotas", Sources: envVar("cluster-admin")},
					&cli.DurationFlag{Name: "expires", Usage: "lifetime of the token, e.g. 720h (default: until revoked)", Sources: envVar("expires")},
					&cli.StringFlag{Name: "description", Usage: "what the token is for", Sources: envVar("description")},
				),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					now := time.Now().UTC()
					tok, bad := tokenFromFlags(cmd, now)
					return withStore(ctx, cmd, bad, func(st *cassandra.Store) error {
						cred, err := auth.GenerateCredential(nil)
						if err != nil {
							return err
						}
						tok.ID, tok.SecretHash = cred.ID, auth.HashSecret(cred.Secret)
						if err := st.CreateToken(ctx, tok); err != nil {
							return err
						}
						who := "cluster admin"
						if !tok.ClusterAdmin {
							who = "team " + tok.Team + ", role " + tok.Role.String()
						}
						fmt.Fprintf(cmd.Root().ErrWriter, "created token %s (%s, expires %s); its secret is printed below, once: store it now\n", tok.ID, who, expiry(tok.ExpiresAt))
						fmt.Fprintln(cmd.Root().Writer, cred.Bearer())
						return nil
					})
				},
			},
			{
				Name:  "list",
				Usage: "print tokens, without their secrets",
				Flags: append(cassandraStoreFlags(),
					&cli.StringFlag{Name: "team", Usage: "only this team's tokens (default: every token)", Sources: envVar("team")},
					outputFlag(),
				),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					form, err := outputOf(cmd)
					return withStore(ctx, cmd, errs(err), func(st *cassandra.Store) error {
						tokens, err := st.ListTokens(ctx, cmd.String("team"))
						if err != nil {
							return err
						}
						if out := (emitter{w: cmd.Root().Writer, form: form}); out.structured() {
							return emitAll(out, tokens, tokenView)
						}
						printTokens(cmd, tokens, time.Now())
						return nil
					})
				},
			},
			{
				Name:      "revoke",
				Usage:     "revoke a token",
				ArgsUsage: "ID",
				Description: fmt.Sprintf(`A server that cached the token refuses it within its
--auth-token-cache-ttl (default %s) of the revocation.`, auth.DefaultTokenCacheTTL),
				Flags: cassandraStoreFlags(),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					id, err := oneArg(cmd, "token id")
					return withStore(ctx, cmd, []error{err}, func(st *cassandra.Store) error {
						if err := st.RevokeToken(ctx, id, time.Now()); err != nil {
							return err
						}
						fmt.Fprintf(cmd.Root().Writer, "revoked token %s\n", id)
						return nil
					})
				},
			},
		},
	}
}

// tokenFromFlags reads tokens create's flags into a token without id or
// secret; errors name the flags.
func tokenFromFlags(cmd *cli.Command, now time.Time) (auth.Token, []error) {
	tok := auth.Token{CreatedAt: now, CreatedBy: cliActor(), Description: cmd.String("description"), ClusterAdmin: cmd.Bool("cluster-admin")}
	var bad []error
	if cmd.NArg() > 0 {
		bad = append(bad, fmt.Errorf("unexpected argument %q: tokens create takes flags only", cmd.Args().First()))
	}
	if tok.ClusterAdmin {
		if cmd.String("team") != "" || cmd.String("role") != "" {
			bad = append(bad, errors.New("--cluster-admin: acts for every team; drop --team and --role"))
		}
		tok.Role = auth.RoleAdmin
	} else {
		tok.Team = cmd.String("team")
		if tok.Team == "" {
			bad = append(bad, errors.New("--team: required (or --cluster-admin)"))
		} else if err := auth.CheckTeamName(tok.Team); err != nil {
			bad = append(bad, fmt.Errorf("--team: %w", err))
		}
		role, err := auth.ParseRole(cmd.String("role"))
		if err != nil {
			bad = append(bad, fmt.Errorf("--role: %w", err))
		}
		tok.Role = role
	}
	switch d := cmd.Duration("expires"); {
	case d < 0:
		bad = append(bad, fmt.Errorf("--expires %s: want a positive lifetime, or none for a token that lasts until revoked", d))
	case d > 0:
		tok.ExpiresAt = now.Add(d)
	}
	return tok, bad
}

// printTokens writes tokens as a table: never a secret or its hash.
func printTokens(cmd *cli.Command, tokens []auth.Token, now time.Time) {
	w := tabwriter.NewWriter(cmd.Root().Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTEAM\tROLE\tSTATE\tCREATED\tCREATED BY\tEXPIRES\tDESCRIPTION")
	for _, t := range tokens {
		team, state := t.Team, "live"
		if t.ClusterAdmin {
			team = "*cluster-admin*"
		}
		switch {
		case !t.RevokedAt.IsZero():
			state = "revoked " + dateOf(t.RevokedAt)
		case !t.Live(now):
			state = "expired"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, team, t.Role, state, dateOf(t.CreatedAt), dash(t.CreatedBy), expiry(t.ExpiresAt), dash(t.Description))
	}
	_ = w.Flush()
}

// cliActor names the operator in created_by: the account that ran the
// command, as the audit trail would see it.
func cliActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli"
}

func dateOf(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func expiry(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return dateOf(t)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// teamOut is a team as -o json and yaml print it.
type teamOut struct {
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	CreatedBy   string    `json:"createdBy,omitempty"`
}

// tokenOut is a token as -o json and yaml print it: never its secret or
// the secret's hash.
type tokenOut struct {
	ID           string     `json:"id"`
	Team         string     `json:"team,omitempty"`
	Role         string     `json:"role"`
	ClusterAdmin bool       `json:"clusterAdmin,omitempty"`
	CreatedAt    time.Time  `json:"createdAt"`
	CreatedBy    string     `json:"createdBy,omitempty"`
	RevokedAt    *time.Time `json:"revokedAt,omitempty"`
	ExpiresAt    *time.Time `json:"expiresAt,omitempty"`
	Description  string     `json:"description,omitempty"`
}

func tokenView(t auth.Token) tokenOut {
	v := tokenOut{ID: t.ID, Team: t.Team, Role: t.Role.String(), ClusterAdmin: t.ClusterAdmin, CreatedAt: t.CreatedAt.UTC(),
		CreatedBy: t.CreatedBy, Description: t.Description}
	if !t.RevokedAt.IsZero() {
		at := t.RevokedAt.UTC()
		v.RevokedAt = &at
	}
	if !t.ExpiresAt.IsZero() {
		at := t.ExpiresAt.UTC()
		v.ExpiresAt = &at
	}
	return v
}
