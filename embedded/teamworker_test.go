package embedded

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/client"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/worker"
)

// TestTeamWorkerRunsTheQuickstartJobOnDev is docs/workers.md's quickstart
// on the pipeline `sundial dev` runs: docs/examples/team-hello.json,
// applied through the API, fires the handler of a worker that has only the
// API's address and its team's token.
func TestTeamWorkerRunsTheQuickstartJobOnDev(t *testing.T) {
	t.Parallel()
	p, ctx := startWithAPI(t, "dev:admin:dev-admin", "dev:operator:dev-operator")

	var mu sync.Mutex
	fired := map[string]int{}
	w, err := worker.New(worker.Config{APIURL: p.APIURL(), Token: "dev-operator", ID: "quickstart"})
	require.NoError(t, err)
	w.Handle("hello", func(_ context.Context, r *worker.Run) error {
		mu.Lock()
		defer mu.Unlock()
		fired[r.ID]++
		return nil
	})
	require.NoError(t, w.Start(ctx))
	defer w.Stop()

	raw, err := os.ReadFile("../docs/examples/team-hello.json")
	require.NoError(t, err)
	var specs []*sundialv1.JobSpec
	for spec, err := range client.DecodeSpecs(bytes.NewReader(raw)) {
		require.NoError(t, err)
		specs = append(specs, spec)
	}
	require.Len(t, specs, 1)
	jobs := apiv1connect.NewJobServiceClient(http.DefaultClient, p.APIURL(), as("dev-admin")...)
	applied, err := jobs.ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: specs[0]}))
	require.NoError(t, err)
	require.True(t, applied.Msg.GetAccepted(), "%v", applied.Msg.GetStatus())

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(fired) >= 2
	}, 4*time.Minute, 100*time.Millisecond, "the worker's function never fired twice")
	mu.Lock()
	defer mu.Unlock()
	for id, n := range fired {
		require.Equal(t, 1, n, "run %s fired %d times", id, n)
	}
}
