package client_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/topics"
)

func TestConfigTeam(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"status", "Team-A", "a.b"} {
		err := client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Team: bad}.Validate()
		assert.ErrorContains(t, err, "team", bad)
	}
	require.NoError(t, client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Team: "team-a"}.Validate())
}

// TestTopicFor is where a definition or delete goes: the client's team,
// else (ByOwner) the definition's owner team, else the shared topic.
func TestTopicFor(t *testing.T) {
	t.Parallel()
	names := topics.Names{Prefix: "p."}
	for _, tc := range []struct {
		name    string
		cfg     client.Config
		team    string
		want    string
		wantErr string
	}{
		{name: "fixed team wins", cfg: client.Config{Team: "a", ByOwner: true}, team: "b", want: "p.sundial.jobs.a"},
		{name: "by owner", cfg: client.Config{ByOwner: true}, team: "b", want: "p.sundial.jobs.b"},
		{name: "by owner, no team", cfg: client.Config{ByOwner: true}, team: "", wantErr: "owner_team"},
		{name: "by owner, bad team", cfg: client.Config{ByOwner: true}, team: "B.x", wantErr: "owner_team"},
		{name: "shared", cfg: client.Config{}, team: "b", want: "p.sundial.jobs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Kafka, tc.cfg.Topics = []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, names
			c, err := client.New(tc.cfg)
			require.NoError(t, err)
			defer c.Close()
			got, err := c.TopicFor(tc.team)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
