package worker

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRemoteConfigNeedsTheAPIAndATokenOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"api and token", Config{APIURL: "https://sundial.example:8480", Token: "s3cret"}, nil},
		{"no token", Config{APIURL: "http://127.0.0.1:8480"}, []string{"Token: is required with APIURL"}},
		{"not a URL", Config{APIURL: "127.0.0.1:8480", Token: "t"}, []string{`APIURL: "127.0.0.1:8480": want an http or https URL`}},
		{"backends too", Config{APIURL: "http://a:1", Token: "t", RedisAddr: "r:6379"}, []string{"APIURL: a worker of the API holds no backend"}},
		{"neither", Config{}, []string{"Kafka: the seed brokers (kgo.SeedBrokers) are required (or APIURL and Token)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.cfg.Validate()
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}
