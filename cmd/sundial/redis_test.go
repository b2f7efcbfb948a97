package main

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedisClient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addrs   string
		cluster bool
		want    string // the client's type, or "" for an error
	}{
		{"127.0.0.1:6379", false, "single"},
		{"127.0.0.1:6379", true, "cluster"},
		{"127.0.0.1:7001, 127.0.0.1:7002,127.0.0.1:7003", false, "cluster"},
		{"", false, ""},
		{"127.0.0.1:7001,,127.0.0.1:7002", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.addrs, func(t *testing.T) {
			t.Parallel()
			c, err := redisClient(tt.addrs, tt.cluster, 4)
			if tt.want == "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "--redis-addr")
				return
			}
			require.NoError(t, err)
			defer c.Close()
			switch c.(type) {
			case *redis.Client:
				assert.Equal(t, tt.want, "single")
			case *redis.ClusterClient:
				assert.Equal(t, tt.want, "cluster")
			default:
				t.Fatalf("unexpected client %T", c)
			}
		})
	}
}
