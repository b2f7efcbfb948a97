package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClusterShape(t *testing.T) {
	t.Parallel()
	const (
		m1 = "aaa 127.0.0.1:26101@26201 myself,master - 0 0 1 connected 0-5460\n"
		m2 = "bbb 127.0.0.1:26102@26202 master - 0 1700000000000 2 connected 5461-10922\n"
		m3 = "ccc 127.0.0.1:26103@26203 master - 0 1700000000000 3 connected 10923-16383\n"
		r1 = "ddd 127.0.0.1:26104@26204 slave aaa 0 1700000000000 1 connected\n"
		r2 = "eee 127.0.0.1:26105@26205 slave bbb 0 1700000000000 2 connected\n"
		r3 = "fff 127.0.0.1:26106@26206 slave ccc 0 1700000000000 3 connected\n"
	)
	tests := []struct {
		name     string
		nodes    string
		masters  map[string]int
		self     string
		wantFail bool
	}{
		{name: "three masters with a replica each", nodes: m1 + m2 + m3 + r1 + r2 + r3,
			masters: map[string]int{"aaa": 1, "bbb": 1, "ccc": 1}, self: "master"},
		{name: "a replica's link is down", nodes: m1 + m2 + m3 + r1 + r2 +
			"fff 127.0.0.1:26106@26206 slave ccc 0 1700000000000 3 disconnected\n",
			masters: map[string]int{"aaa": 1, "bbb": 1, "ccc": 0}, self: "master"},
		{name: "a failed master and its promoted replica", nodes: m1 + m2 + r1 + r2 +
			"ccc 127.0.0.1:26103@26203 master,fail - 0 1700000000000 3 disconnected\n" +
			"fff 127.0.0.1:26106@26206 master - 0 1700000000000 4 connected 10923-16383\n",
			masters: map[string]int{"aaa": 1, "bbb": 1, "fff": 0}, self: "master"},
		{name: "seen from a replica", nodes: "ddd 127.0.0.1:26104@26204 myself,slave aaa 0 0 1 connected\n" +
			"aaa 127.0.0.1:26101@26201 master - 0 0 1 connected 0-16383\n",
			masters: map[string]int{"aaa": 1}, self: "replica"},
		{name: "no line for this node", nodes: m2 + r2, wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := clusterShape(tt.nodes)
			if tt.wantFail {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.masters, got.masters)
			assert.Equal(t, tt.self, got.self)
		})
	}
}
