//go:build secure

package deploy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/internal/topics"
)

// TestSecureStackTeamTopicsOfTheAPI: the topics that the API's CreateTeam
// makes (apiserver.KafkaTeamTopics, as the service principal) are the ones
// the stack's ACLs protect (deploy/local/stackcheck -kafka-teams): team-a
// writes its own, and may neither write nor read team-b's
// (TOPIC_AUTHORIZATION_FAILED).
func TestSecureStackTeamTopicsOfTheAPI(t *testing.T) {
	s := needSecureStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	names := topics.Names{}
	login := func(user string) []kgo.Opt {
		return []kgo.Opt{
			kgo.SeedBrokers(s.kafka), kgo.DialTLSConfig(tlsConfigFor(t, s.ca())),
			kgo.SASL(scram.Auth{User: user, Pass: s.secret(t, "kafka-"+user)}.AsSha512Mechanism()),
		}
	}
	made := apiserver.KafkaTeamTopics{Kafka: login("sundial"), Topics: names}
	for _, team := range []string{"team-a", "team-b"} {
		topic, _, err := made.EnsureTeamTopic(ctx, team)
		require.NoError(t, err, "the API's topic of %s", team)
		require.Equal(t, names.TeamJobs(team), topic)
	}

	teamA, err := kgo.NewClient(append(login("team-a"), kgo.RequestRetries(1))...)
	require.NoError(t, err)
	t.Cleanup(teamA.Close)
	require.NoError(t, teamA.ProduceSync(ctx, &kgo.Record{Topic: names.TeamJobs("team-a"), Key: []byte("team-a.acl-probe")}).FirstErr(),
		"team-a writes its own topic")
	err = teamA.ProduceSync(ctx, &kgo.Record{Topic: names.TeamJobs("team-b"), Key: []byte("x"), Value: []byte("x")}).FirstErr()
	require.Error(t, err, "team-a wrote team-b's topic")
	require.ErrorContains(t, err, "TOPIC_AUTHORIZATION_FAILED")

	reader, err := kgo.NewClient(append(login("team-a"), kgo.ConsumeTopics(names.TeamJobs("team-b")),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	require.NoError(t, err)
	t.Cleanup(reader.Close)
	var (
		refused error
		read    int
	)
	assert.Eventually(t, func() bool {
		pollCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		fetches := reader.PollFetches(pollCtx)
		read += fetches.NumRecords()
		for _, fe := range fetches.Errors() {
			if fe.Err != nil && !errors.Is(fe.Err, context.DeadlineExceeded) {
				refused = fe.Err
				return true
			}
		}
		return read > 0
	}, 2*time.Minute, 10*time.Millisecond, "team-a reading team-b's topic was never refused")
	require.Zero(t, read, "team-a read team-b's topic")
	require.Error(t, refused)
	assert.Contains(t, refused.Error(), "TOPIC_AUTHORIZATION_FAILED")
}
