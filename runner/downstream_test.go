package runner

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The counting downstream of the integration tests must be able to report a
// duplicate effect, or their zero would prove nothing.
func TestDownstreamCounts(t *testing.T) {
	t.Parallel()
	type call struct {
		key, runID string
		token      int64
	}
	for _, tc := range []struct {
		name string
		// sequential calls, one after the other
		calls []call
		// concurrent: both calls of the pair are applying at the same time
		concurrent bool
		want       downstreamFigures
	}{
		{
			name:  "a redelivery is answered as a replay",
			calls: []call{{"r1", "r1", 1}, {"r1", "r1", 2}},
			want:  downstreamFigures{requests: 2, effects: 1, dupRequests: 1, redelivered: 1},
		},
		{
			name:       "two executions at the same time apply twice",
			calls:      []call{{"r1", "r1", 1}, {"r1", "r1", 1}},
			concurrent: true,
			want:       downstreamFigures{requests: 2, effects: 1, dupEffects: 1, dupRequests: 1},
		},
		{
			name:  "a key other than the run id applies twice",
			calls: []call{{"r1#1", "r1", 1}, {"r1#2", "r1", 2}},
			want:  downstreamFigures{requests: 2, effects: 1, dupEffects: 1},
		},
		{
			name:  "an older fencing token after a newer one is stale",
			calls: []call{{"r1", "r1", 5}, {"r1", "r1", 3}, {"r2", "r2", 1}},
			want:  downstreamFigures{requests: 3, effects: 2, dupRequests: 1, redelivered: 1, stale: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newDownstream(t)
			send := func(c call) {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.srv.URL, nil)
				require.NoError(t, err)
				req.Header.Set("Idempotency-Key", c.key)
				req.Header.Set("Sundial-Run-Id", c.runID)
				req.Header.Set("Sundial-Fencing-Token", strconv.FormatInt(c.token, 10))
				resp, err := d.srv.Client().Do(req)
				require.NoError(t, err)
				_ = resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			}
			if !tc.concurrent {
				for _, c := range tc.calls {
					send(c)
				}
				assert.Equal(t, tc.want, d.figures())
				return
			}
			d.applyGate = make(chan struct{})
			var wg sync.WaitGroup
			for _, c := range tc.calls {
				wg.Go(func() { send(c) })
			}
			require.Eventually(t, func() bool {
				d.mu.Lock()
				defer d.mu.Unlock()
				return d.applying[tc.calls[0].key] == len(tc.calls)
			}, wait, 5*time.Millisecond)
			close(d.applyGate)
			wg.Wait()
			assert.Equal(t, tc.want, d.figures())
		})
	}
}
