package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

// flakyConfig fails its first reads with err, then answers cfg.
type flakyConfig struct {
	fails int
	err   error
	calls int
}

func (f *flakyConfig) GetClusterConfig(context.Context) (store.ClusterConfig, error) {
	f.calls++
	if f.calls <= f.fails {
		return store.ClusterConfig{}, f.err
	}
	return store.ClusterConfig{Shards: 64}, nil
}

// TestServerClusterConfig: a server's start waits out a store that does not
// answer (the chaos bench's restarted Cassandra timed out serial reads for
// a minute) instead of exiting, and gives up only on an uninitialized
// cluster or when its context ends.
func TestServerClusterConfig(t *testing.T) {
	t.Parallel()
	timeout := errors.New("Operation timed out - received only 0 responses.")
	for _, tc := range []struct {
		name      string
		store     *flakyConfig
		within    time.Duration
		wantErr   error // nil: answered
		wantCalls int
		warnings  int
	}{
		{name: "answers at once", store: &flakyConfig{}, within: time.Minute, wantCalls: 1},
		{name: "answers after two timeouts", store: &flakyConfig{fails: 2, err: timeout}, within: time.Minute, wantCalls: 3, warnings: 2},
		{name: "not initialized: no retry", store: &flakyConfig{fails: 5, err: store.ErrNotInitialized}, within: time.Minute,
			wantErr: store.ErrNotInitialized, wantCalls: 1},
		{name: "never answers: gives up when the start's time is up", store: &flakyConfig{fails: 1 << 30, err: timeout}, within: time.Minute,
			wantErr: context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var logs bytes.Buffer
				ctx, cancel := context.WithTimeout(t.Context(), tc.within)
				defer cancel()
				cfg, err := serverClusterConfig(ctx, tc.store, slog.New(slog.NewTextHandler(&logs, nil)))
				if tc.wantErr != nil {
					require.ErrorIs(t, err, tc.wantErr)
					if tc.wantCalls > 0 {
						assert.Equal(t, tc.wantCalls, tc.store.calls)
					} else {
						assert.Greater(t, tc.store.calls, 10, "asked again and again for a minute")
					}
					return
				}
				require.NoError(t, err)
				assert.Equal(t, 64, cfg.Shards)
				assert.Equal(t, tc.wantCalls, tc.store.calls)
				assert.Equal(t, tc.warnings, strings.Count(logs.String(), "cannot read the cluster config; trying again"))
			})
		})
	}
}
