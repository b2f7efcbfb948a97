package apiserver_test

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/client"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

// TestListingIsBoundedPerRequest lists a team's jobs among many of another
// team with MaxScan smaller than the page: pages come back short, with a
// token, and together hold each of the team's jobs once.
func TestListingIsBoundedPerRequest(t *testing.T) {
	t.Parallel()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	ctx := t.Context()
	_, err = st.InitCluster(ctx, 4)
	require.NoError(t, err)
	var want []string
	for i := range 40 {
		team := "crowd"
		if i%10 == 0 {
			team = "few"
		}
		spec := cronJob(fmt.Sprintf("job-%02d", i), team)
		value, err := proto.Marshal(spec)
		require.NoError(t, err)
		_, err = st.UpsertJob(ctx, store.Job{ID: spec.GetId(), Spec: value, Revision: 1, UpdatedAt: time.Unix(1, 0)})
		require.NoError(t, err)
		if team == "few" {
			want = append(want, spec.GetId())
		}
	}
	// The client connects lazily; listings never produce.
	cl, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	jobs, err := apiserver.NewJobService(apiserver.JobServiceConfig{Store: st, Writer: cl, MaxScan: 7})
	require.NoError(t, err)
	srv, err := apiserver.New(apiserver.Config{Addr: "127.0.0.1:0", Authenticator: tokenAuth{}, Services: []apiserver.Service{jobs.Service()}})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := apiv1connect.NewJobServiceClient(ts.Client(), ts.URL, connect.WithInterceptors(apiserver.BearerToken(token("few", auth.RoleViewer))))

	var got []string
	page, requests, short := &apiv1.PageRequest{Size: 3}, 0, 0
	for {
		requests++
		require.Less(t, requests, 100, "listing does not end")
		res, err := c.ListJobs(ctx, connect.NewRequest(&apiv1.ListJobsRequest{Page: page}))
		require.NoError(t, err)
		for _, j := range res.Msg.GetJobs() {
			got = append(got, j.GetSpec().GetId())
		}
		if res.Msg.GetNextPageToken() == "" {
			break
		}
		if len(res.Msg.GetJobs()) < 3 {
			short++
		}
		page = &apiv1.PageRequest{Size: 3, Token: res.Msg.GetNextPageToken()}
	}
	assert.Equal(t, want, got, "each of the team's jobs once, in id order")
	assert.Positive(t, short, "MaxScan 7 over 40 jobs cuts pages short")
	assert.GreaterOrEqual(t, requests, 40/7, "no request read more than 7 stored jobs")
}
