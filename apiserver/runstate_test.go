package apiserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sundialhq/sundial/apiserver"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/store"
)

// TestStoreRunStateRoundTrip checks the one mapping of attempt states both
// ways: every history state comes back from its API state, and a state the
// build does not know keeps its API name, which the CLI prints.
func TestStoreRunStateRoundTrip(t *testing.T) {
	t.Parallel()
	for _, st := range []store.RunState{store.StateScheduled, store.StateRunning, store.StateSucceeded,
		store.StateFailed, store.StateSkipped, store.StateCancelled, store.StateSuspended} {
		api := apiserver.AttemptState(st)
		assert.NotEqual(t, apiv1.RunAttemptState_RUN_ATTEMPT_STATE_UNSPECIFIED, api, "state %s", st)
		assert.Equal(t, st, apiserver.StoreRunState(api))
	}
	for _, tc := range []struct {
		api  apiv1.RunAttemptState
		want store.RunState
	}{
		{apiv1.RunAttemptState_RUN_ATTEMPT_STATE_UNSPECIFIED, "RUN_ATTEMPT_STATE_UNSPECIFIED"},
		{apiv1.RunAttemptState(99), "99"},
	} {
		assert.Equal(t, tc.want, apiserver.StoreRunState(tc.api))
	}
}
