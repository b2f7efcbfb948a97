package apiserver_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

// jobViewsEnv is a job service on the memory store holding the jobs
// own.a and own.b of team "own" and oth.a of team "oth", each with a run
// history, at a fixed now.
type jobViewsEnv struct {
	url string
	now time.Time
}

func setupJobViews(t *testing.T) jobViewsEnv {
	t.Helper()
	ctx := t.Context()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	_, err = st.InitCluster(ctx, 4)
	require.NoError(t, err)
	due := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	for _, id := range []string{"own.a", "own.b", "oth.a"} {
		team, _, _ := strings.Cut(id, ".")
		value, err := proto.Marshal(cronJob(id, team))
		require.NoError(t, err)
		_, err = st.UpsertJob(ctx, store.Job{ID: id, Spec: value, Revision: 1, UpdatedAt: due.Add(-time.Hour)})
		require.NoError(t, err)
		// Three attempts, 1 s, 2 s and 3 s late; the second failed.
		var recs []store.RunRecord
		for i := range 3 {
			d := due.Add(time.Duration(i) * 5 * time.Minute)
			state := store.StateSucceeded
			if i == 1 {
				state = store.StateFailed
			}
			started := d.Add(time.Duration(i+1) * time.Second)
			recs = append(recs, store.RunRecord{JobID: id, RunID: store.RunID(id, d), Attempt: 1, Due: d, State: state,
				Started: started, Finished: started.Add(time.Second), Duration: time.Second, UpdatedAt: started.Add(time.Second)})
		}
		require.NoError(t, st.RecordRuns(ctx, recs))
	}
	now := due.Add(time.Hour)
	jobs, err := apiserver.NewJobService(apiserver.JobServiceConfig{Store: st, Writer: acceptingWriter{}, Now: func() time.Time { return now }})
	require.NoError(t, err)
	srv, err := apiserver.New(apiserver.Config{Addr: "127.0.0.1:0", Authenticator: tokenAuth{}, Services: []apiserver.Service{jobs.Service()}})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return jobViewsEnv{url: ts.URL, now: now}
}

func (e jobViewsEnv) client(tok string) apiv1connect.JobServiceClient {
	return apiv1connect.NewJobServiceClient(http.DefaultClient, e.url, connect.WithInterceptors(apiserver.BearerToken(tok)))
}

// TestGetJobViewsAnswersEachIDAsGetJobView: each job the caller may see
// is answered as GetJobView answers it, in the request's order; a job of
// another team is answered exactly as a job that does not exist.
func TestGetJobViewsAnswersEachIDAsGetJobView(t *testing.T) {
	t.Parallel()
	e := setupJobViews(t)
	ctx := t.Context()
	cases := []struct {
		name         string
		token        string
		ids          []string
		wantViews    []string
		wantNotFound []string
	}{
		{"a team's viewer", token("own", auth.RoleViewer), []string{"own.b", "oth.a", "own.missing", "own.a"},
			[]string{"own.b", "own.a"}, []string{"oth.a", "own.missing"}},
		{"another team's admin", token("oth", auth.RoleAdmin), []string{"own.a", "oth.a", "own.b"},
			[]string{"oth.a"}, []string{"own.a", "own.b"}},
		{"only another team's jobs", token("oth", auth.RoleViewer), []string{"own.a"}, nil, []string{"own.a"}},
		{"the cluster admin", clusterAdminToken, []string{"oth.a", "own.a"}, []string{"oth.a", "own.a"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			jobs := e.client(c.token)
			for _, withRuns := range []bool{false, true} {
				res, err := jobs.GetJobViews(ctx, connect.NewRequest(&apiv1.GetJobViewsRequest{Ids: c.ids, NextFireTimes: 3, WithRuns: withRuns}))
				require.NoError(t, err)
				var got []string
				for _, v := range res.Msg.GetViews() {
					got = append(got, v.GetJob().GetSpec().GetId())
					one, err := jobs.GetJobView(ctx, connect.NewRequest(&apiv1.GetJobViewRequest{Id: v.GetJob().GetSpec().GetId(), NextFireTimes: 3}))
					require.NoError(t, err)
					want := one.Msg
					if !withRuns {
						want.LastRuns = nil
					}
					assert.True(t, proto.Equal(want, v), "the view of %s is GetJobView's (with_runs %v):\n%v\n%v", v.GetJob().GetSpec().GetId(), withRuns, want, v)
				}
				assert.Equal(t, c.wantViews, got, "the views, in the request's order")
				assert.Equal(t, c.wantNotFound, res.Msg.GetNotFound(), "not found, another team's or missing alike")
			}
		})
	}
}

// TestGetJobViewsSummarises: the stats summarise last_runs attempts, and
// a view holds next_fire_times fire times, 1 by default.
func TestGetJobViewsSummarises(t *testing.T) {
	t.Parallel()
	e := setupJobViews(t)
	jobs := e.client(token("own", auth.RoleViewer))
	res, err := jobs.GetJobViews(t.Context(), connect.NewRequest(&apiv1.GetJobViewsRequest{Ids: []string{"own.a"}}))
	require.NoError(t, err)
	require.Len(t, res.Msg.GetViews(), 1)
	v := res.Msg.GetViews()[0]
	require.Len(t, v.GetNextFireTimes(), 1, "one fire time by default")
	assert.True(t, v.GetNextFireTimes()[0].AsTime().After(e.now), "the next fire after now")
	assert.Empty(t, v.GetLastRuns(), "stats only without with_runs")
	st := v.GetStats()
	assert.Equal(t, uint32(3), st.GetFinished())
	assert.Equal(t, uint32(2), st.GetSucceeded())
	assert.Equal(t, 3*time.Second, st.GetTriggerLatencyP99().AsDuration())

	// last_runs 2: the two newest attempts, 2 s and 3 s late, one failed.
	res, err = jobs.GetJobViews(t.Context(), connect.NewRequest(&apiv1.GetJobViewsRequest{Ids: []string{"own.a"}, LastRuns: 2, WithRuns: true}))
	require.NoError(t, err)
	v = res.Msg.GetViews()[0]
	assert.Len(t, v.GetLastRuns(), 2)
	assert.Equal(t, uint32(2), v.GetStats().GetFinished())
	assert.Equal(t, 2*time.Second, v.GetStats().GetTriggerLatencyP50().AsDuration())
}

// TestGetJobViewsBounds: a request outside the bounds is refused, naming
// the field and the bound, and nothing is read.
func TestGetJobViewsBounds(t *testing.T) {
	t.Parallel()
	e := setupJobViews(t)
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf("own.job-%03d", i)
	}
	cases := []struct {
		name string
		req  *apiv1.GetJobViewsRequest
		want string
	}{
		{"no id", &apiv1.GetJobViewsRequest{}, "ids: required"},
		{"more than 100 ids", &apiv1.GetJobViewsRequest{Ids: many}, "ids: 101 ids, at most 100"},
		{"an empty id", &apiv1.GetJobViewsRequest{Ids: []string{"own.a", ""}}, "ids[1]: required"},
		{"an id twice", &apiv1.GetJobViewsRequest{Ids: []string{"own.a", "own.b", "own.a"}}, `ids[2] "own.a": already ids[0]`},
		{"too many fire times", &apiv1.GetJobViewsRequest{Ids: []string{"own.a"}, NextFireTimes: 11}, "next_fire_times 11: must be at most 10"},
		{"too many runs", &apiv1.GetJobViewsRequest{Ids: []string{"own.a"}, LastRuns: 101}, "last_runs 101: must be at most 100"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := e.client(token("own", auth.RoleViewer)).GetJobViews(t.Context(), connect.NewRequest(c.req))
			requireCode(t, connect.CodeInvalidArgument, err)
			assert.ErrorContains(t, err, c.want)
		})
	}
	// 100 ids, the bound, are answered: none of these exists.
	res, err := e.client(token("own", auth.RoleViewer)).GetJobViews(t.Context(), connect.NewRequest(&apiv1.GetJobViewsRequest{Ids: many[:100]}))
	require.NoError(t, err)
	assert.Empty(t, res.Msg.GetViews())
	assert.Equal(t, many[:100], res.Msg.GetNotFound())

	_, err = e.client("nobody").GetJobViews(t.Context(), connect.NewRequest(&apiv1.GetJobViewsRequest{Ids: []string{"own.a"}}))
	requireCode(t, connect.CodeUnauthenticated, err)
}
