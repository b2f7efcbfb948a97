package apiserver_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/client"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/quota"
)

// TestCreateTeamMakesItsTopic, on the real stack with the registry reading
// team topics only: a team created through the API gets its job topic,
// made as `sundial migrate --teams` makes it, so the team's definitions
// are registered with no migrate run; creating it again changes nothing;
// and the topic is the team's alone: a definition of another team on it is
// rejected, and a team's token cannot apply another team's job.
func TestCreateTeamMakesItsTopic(t *testing.T) {
	e := newEnvWith(t, envOptions{teamTopicsOnly: true})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	// Topics outlive the test on the shared stack: names of this run.
	suffix := strings.ToLower(rand.Text()[:8])
	teamA, teamB := "api-made-a-"+suffix, "api-made-b-"+suffix
	kafka := []kgo.Opt{kgo.SeedBrokers(e.brokers...)}

	svc, err := apiserver.NewTeamService(apiserver.TeamServiceConfig{Tokens: auth.NewMemoryStore(), Jobs: quota.NewMemory(),
		Topics: apiserver.KafkaTeamTopics{Kafka: kafka, Topics: e.names}})
	require.NoError(t, err)
	srv, err := apiserver.New(apiserver.Config{Addr: "127.0.0.1:0", Authenticator: tokenAuth{},
		Services: []apiserver.Service{svc.Service()}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop)
	teams := apiv1connect.NewTeamServiceClient(e.http, "http://"+srv.Addr().String(), e.opts(clusterAdminToken)...)

	for _, team := range []string{teamA, teamB} {
		resp, err := teams.CreateTeam(ctx, connect.NewRequest(&apiv1.CreateTeamRequest{Name: team}))
		require.NoError(t, err, "create team %s", team)
		assert.Equal(t, e.names.TeamJobs(team), resp.Msg.GetTopic())
		assert.True(t, resp.Msg.GetTopicCreated(), "the topic of %s was made by the call", team)
	}

	// The topic is made as migrate makes it: TeamJobsSpec.
	admin, err := kgo.NewClient(kafka...)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	adm := kadm.NewClient(admin)
	want := e.names.TeamJobsSpec(teamA)
	details, err := adm.ListTopics(ctx, want.Name)
	require.NoError(t, err)
	require.True(t, details.Has(want.Name), "no topic %s", want.Name)
	assert.Len(t, details[want.Name].Partitions, int(want.Partitions))
	configs, err := adm.DescribeTopicConfigs(ctx, want.Name)
	require.NoError(t, err)
	cfg, err := configs.On(want.Name, nil)
	require.NoError(t, err)
	policy := ""
	for _, c := range cfg.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil {
			policy = *c.Value
		}
	}
	assert.Equal(t, want.Configs["cleanup.policy"], policy)

	// Again: the team exists; its topic is kept, not made twice.
	_, err = teams.CreateTeam(ctx, connect.NewRequest(&apiv1.CreateTeamRequest{Name: teamA}))
	assert.Equal(t, connect.CodeAlreadyExists, connect.CodeOf(err), "create %s again: %v", teamA, err)
	topic, created, err := apiserver.KafkaTeamTopics{Kafka: kafka, Topics: e.names}.EnsureTeamTopic(ctx, teamA)
	require.NoError(t, err)
	assert.Equal(t, want.Name, topic)
	assert.False(t, created, "made again")

	// The team's admin applies a job through the API: produced to the
	// team's topic and registered, though no migrate made the topic.
	spec := &sundialv1.JobSpec{Id: teamA + ".hello", OwnerTeam: teamA,
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "hello"}}}}
	applied, err := e.jobs(teamA+":admin").ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: spec}))
	require.NoError(t, err)
	require.True(t, applied.Msg.GetAccepted(), "apply %s: %v", spec.GetId(), applied.Msg.GetStatus())
	got, err := e.jobs(teamA+":viewer").GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: spec.GetId()}))
	require.NoError(t, err)
	assert.Equal(t, teamA, got.Msg.GetJob().GetSpec().GetOwnerTeam())

	// Team B's token cannot apply a job of team A, nor name A its owner.
	theirs := &sundialv1.JobSpec{Id: teamA + ".taken", OwnerTeam: teamA, Target: spec.GetTarget()}
	_, err = e.jobs(teamB+":admin").ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: theirs}))
	require.Error(t, err, "team B applied a job of team A")
	assert.Contains(t, []connect.Code{connect.CodePermissionDenied, connect.CodeNotFound}, connect.CodeOf(err), "%v", err)

	// A record on team B's topic that names team A the owner, as whoever
	// may write B's topic could produce: the registry rejects it, naming
	// owner_team, and team A's job is left alone.
	onB, err := client.New(client.Config{Kafka: kafka, Topics: e.names, Team: teamB, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(onB.Close)
	forged := &sundialv1.JobSpec{Id: spec.GetId(), OwnerTeam: teamA, Description: "forged on team B's topic", Target: spec.GetTarget()}
	receipt, err := onB.Apply(ctx, forged)
	require.NoError(t, err)
	assert.Equal(t, e.names.TeamJobs(teamB), receipt.Topic)
	sts, err := onB.WaitStatus(ctx, receipt)
	require.NoError(t, err)
	require.Len(t, sts, 1)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, sts[0].GetOutcome(), "%v", sts[0])
	assert.Contains(t, fmt.Sprint(sts[0].GetErrors()), "owner_team")
	got, err = e.jobs(teamA+":viewer").GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: spec.GetId()}))
	require.NoError(t, err)
	assert.Empty(t, got.Msg.GetJob().GetSpec().GetDescription(), "the forged definition changed team A's job")
}
