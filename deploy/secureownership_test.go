//go:build secure

package deploy_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/registry"
	"github.com/sundialhq/sundial/store/memory"
)

// ownershipShards is S of this test's installation: the unprefixed
// sundial.shards it creates keeps it from one run to the next.
const ownershipShards = 8

// TestSecureStackOwnership checks ownership enforced by the broker, on the
// stack's own team users and ACLs (deploy/local/stackcheck -kafka-teams),
// which name the unprefixed team topics as an operator's would: team-a may
// not write team-b's topic nor sundial.audit (TOPIC_AUTHORIZATION_FAILED);
// its definition on its own topic is accepted by a registry that reads team
// topics only; and a definition it forges for team-b on its own topic is
// rejected by that registry, naming owner_team. The registry, as the
// service principal sundial, keeps its jobs in memory: the store plays no
// part in who may write what.
func TestSecureStackOwnership(t *testing.T) {
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

	// The service principal creates the installation's topics.
	svc, err := kgo.NewClient(append(login("sundial"), kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))...)
	require.NoError(t, err)
	t.Cleanup(svc.Close)
	all, err := names.Specs(ownershipShards)
	require.NoError(t, err)
	specs := []topics.Spec{names.TeamJobsSpec("team-a"), names.TeamJobsSpec("team-b")}
	for _, sp := range all {
		if slices.Contains([]string{names.JobsStatus(), names.Shards(), names.Audit()}, sp.Name) {
			specs = append(specs, sp)
		}
	}
	_, err = topics.Ensure(ctx, kadm.NewClient(svc), specs, -1)
	require.NoError(t, err)

	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	_, err = st.InitCluster(ctx, ownershipShards)
	require.NoError(t, err)
	enq, err := enqueue.New(enqueue.Config{Store: st, Client: svc, Topics: names, Shards: ownershipShards})
	require.NoError(t, err)
	group := "sundial-ownership-" + randomName(t)
	reg, err := registry.New(registry.Config{
		Kafka: append([]kgo.Opt{kgo.SeedBrokers(s.kafka)}, login("sundial")...), Topics: names,
		Group: group,
		Store: st, Waker: enq, Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	t.Cleanup(func() { // after the registry left it
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, err := kadm.NewClient(svc).DeleteGroup(ctx, group); err != nil {
			t.Logf("cleanup: delete group %s: %v", group, err)
		}
	})
	require.NoError(t, reg.Start(ctx))
	t.Cleanup(reg.Stop)

	teamA, err := kgo.NewClient(append(login("team-a"), kgo.RequestRetries(1))...)
	require.NoError(t, err)
	t.Cleanup(teamA.Close)
	for _, topic := range []string{names.TeamJobs("team-b"), names.Audit()} {
		err := teamA.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("x"), Value: []byte("x")}).FirstErr()
		require.Error(t, err, "team-a wrote %s", topic)
		t.Logf("team-a producing to %s: %v", topic, err)
		require.ErrorContains(t, err, "TOPIC_AUTHORIZATION_FAILED")
	}

	c, err := client.New(client.Config{Kafka: append([]kgo.Opt{kgo.SeedBrokers(s.kafka)}, login("team-a")...), Team: "team-a"})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	id := "own-" + randomName(t)
	own := ownershipSpec(id, "team-a")
	forged := ownershipSpec(id+"-forged", "team-b")
	receipts, err := c.ApplyAll(ctx, sundialv1.EncodingProtobuf, own, forged)
	require.NoError(t, err)
	for _, r := range receipts {
		require.Equal(t, names.TeamJobs("team-a"), r.Topic)
	}
	answers, err := c.WaitStatus(ctx, receipts...)
	require.NoError(t, err)
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, answers[0].GetOutcome(), "%v", answers[0])
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, answers[1].GetOutcome(), "%v", answers[1])
	require.Len(t, answers[1].GetErrors(), 1, "%v", answers[1])
	require.Equal(t, "owner_team", answers[1].GetErrors()[0].GetField())
	t.Logf("forged owner_team: %s", answers[1].GetErrors()[0].GetReason())
	job, err := st.GetJob(ctx, id)
	require.NoError(t, err)
	require.Equal(t, receipts[0].Revision, job.Revision)
}

func ownershipSpec(id, team string) *sundialv1.JobSpec {
	return &sundialv1.JobSpec{
		Id: id, OwnerTeam: team,
		Schedule: &sundialv1.Schedule{Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "0 3 * * *"}}},
		Target:   &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}},
	}
}
