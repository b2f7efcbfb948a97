package client_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/client"
)

func TestConfigTeam(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"status", "Team-A", "a.b"} {
		err := client.Config{Brokers: []string{"127.0.0.1:1"}, Team: bad}.Validate()
		assert.ErrorContains(t, err, "team", bad)
	}
	require.NoError(t, client.Config{Brokers: []string{"127.0.0.1:1"}, Team: "team-a"}.Validate())
}
