package discovery

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func TestMemberServesItsAnnouncedHandlers(t *testing.T) {
	t.Parallel()
	m, ok := memberOf(&sundialv1.ExecutorAnnouncement{ExecutorId: "gw", Pool: "gateway", HeartbeatTime: timestamppb.New(time.Unix(1, 0)),
		HeartbeatIntervalMs: 1000, Handlers: []*sundialv1.ServedHandler{{Name: "noop"}, {Team: "team-a", Name: "work", Pool: "blue"}}})
	require.True(t, ok)
	for _, tc := range []struct {
		pool, team, name string
		want             bool
	}{
		{"blue", "team-a", "work", true},
		{"blue", "team-b", "work", false},
		{"gateway", "team-a", "work", false},
		{"gateway", "team-b", "noop", true},
		{"blue", "team-b", "noop", false},
		{"blue", "team-a", "other", false},
	} {
		assert.Equal(t, tc.want, m.Serves(tc.pool, tc.team, tc.name), "%s/%s/%s", tc.pool, tc.team, tc.name)
	}
	c := m.clone()
	c.Handlers[0].Name = "changed"
	assert.Equal(t, "noop", m.Handlers[0].Name, "clone shares the handlers")
}
