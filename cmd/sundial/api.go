package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/telemetry"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/store/cassandra"
)

func apiCommand() *cli.Command {
	return &cli.Command{
		Name:  "api",
		Usage: "serve the control-plane API (gRPC, gRPC-Web and HTTP/JSON on one port)",
		Description: `Serves the services of proto/sundial/api/v1 with Connect: gRPC, gRPC-Web and
HTTP/JSON from one handler. Reads go to Cassandra; changes are produced to
sundial.jobs and answered by the registry (jobs) or the DAG engine (DAGs),
which must be running. The server keeps no state: run several side by side.

Every call needs "Authorization: Bearer <token>". Until the team token store
is configured, tokens are given with --api-static-token TEAM:ROLE:SECRET
(TEAM "*" for the cluster admin): for development only, as the secrets sit
in the configuration in clear. See docs/api.md.

Example, against the local stack:
  source <(deploy/local/stack.sh env)
  sundial api --listen 127.0.0.1:8480 --api-static-token data:admin:dev-secret`,
		Flags: append(append(append(kafkaFlags(), cassandraStoreFlags()...), processFlags()...),
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8480", Usage: "address to serve the API on, host:port", Sources: envVar("listen")},
			&cli.StringSliceFlag{Name: "api-static-token", Usage: "a token TEAM:ROLE:SECRET (repeatable; TEAM * is the cluster admin; ROLE viewer, operator or admin); for development only", Sources: envVar("api-static-token")},
			&cli.DurationFlag{Name: "answer-timeout", Value: 30 * time.Second, Usage: "how long an apply or delete waits for the registry's answer", Sources: envVar("answer-timeout")},
			&cli.DurationFlag{Name: "shutdown-grace", Value: 10 * time.Second, Usage: "how long requests in flight may finish after a stop signal", Sources: envVar("shutdown-grace")},
		),
		Action: runAPI,
	}
}

// apiAuthenticator is the one place the API's Authenticator is chosen from
// the flags: the team token store and OIDC plug in here.
func apiAuthenticator(cmd *cli.Command) (apiserver.Authenticator, error) {
	specs := cmd.StringSlice("api-static-token")
	if len(specs) == 0 {
		return nil, errors.New("--api-static-token: at least one token is required (TEAM:ROLE:SECRET)")
	}
	tokens, err := apiserver.ParseStaticTokens(specs)
	if err != nil {
		return nil, fmt.Errorf("--api-static-token: %w", err)
	}
	return tokens, nil
}

func runAPI(ctx context.Context, cmd *cli.Command) error {
	var bad []error
	kopts, err := kafkaOptions(cmd)
	if err != nil {
		bad = append(bad, err)
	}
	cc, err := cassandraConfig(cmd)
	if err != nil {
		bad = append(bad, err)
	}
	authn, err := apiAuthenticator(cmd)
	if err != nil {
		bad = append(bad, err)
	}
	p, err := newProcess(cmd, "api")
	if err != nil {
		bad = append(bad, err)
	}
	if err := errors.Join(bad...); err != nil {
		return err
	}
	names := topics.Names{Prefix: cmd.String("topic-prefix")}
	if err := checkKafka(ctx, kopts); err != nil {
		return err
	}
	if err := p.instrumentCassandra(&cc); err != nil {
		return err
	}
	openCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := cassandra.Open(openCtx, cc)
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	defer func() { _ = st.Close() }()
	producer, err := kgo.NewClient(withKafka(kopts, telemetry.KafkaMetrics(p.reg, "api"))...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer producer.Close()
	cl, err := client.New(client.Config{Brokers: cmd.StringSlice("kafka-brokers"), KafkaOptions: kopts, Topics: names, Logger: p.named("client")})
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := errors.Join(
		p.check("cassandra", st.Ping),
		p.check("kafka", telemetry.KafkaCheck(producer)),
	); err != nil {
		return err
	}

	jobs, err := apiserver.NewJobService(apiserver.JobServiceConfig{Store: st, Writer: cl, AnswerTimeout: cmd.Duration("answer-timeout")})
	if err != nil {
		return err
	}
	dags, err := apiserver.NewDagService(apiserver.DagServiceConfig{
		Store: st, Writer: apiserver.KafkaDagWriter{Producer: producer, Client: cl, Topics: names}, AnswerTimeout: cmd.Duration("answer-timeout"),
	})
	if err != nil {
		return err
	}
	srv, err := apiserver.New(apiserver.Config{
		Addr: cmd.String("listen"), Authenticator: authn,
		Services:      []apiserver.Service{jobs.Service(), dags.Service()},
		ShutdownGrace: cmd.Duration("shutdown-grace"),
		Registerer:    p.reg, Logger: p.logger,
	})
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	return p.run(ctx, srv)
}
