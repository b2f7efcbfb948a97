package assemble

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAPIServicesNamesEveryMissingBackend refuses a configuration without
// its required clients, naming each, before anything is built.
func TestAPIServicesNamesEveryMissingBackend(t *testing.T) {
	_, _, err := APIServices(APIConfig{}, APIBackends{})
	for _, want := range []string{
		"api backends: store: required", "api backends: kafka: required", "api backends: producer: required",
		"api backends: client: required", "api backends: enqueuer: required", "api backends: executors: required",
		"api config: shards 0: must be at least 1",
	} {
		assert.ErrorContains(t, err, want)
	}
}
