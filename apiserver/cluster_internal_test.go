package apiserver

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Lag call whose every describe failed at the coordinator shows each
// group with its error instead of failing the cluster view (CI saw
// COORDINATOR_NOT_AVAILABLE for a group created a moment before).
func TestDescribeErrorsBecomeEachGroupsError(t *testing.T) {
	t.Parallel()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{"p.runners", "p.history"}
	err := &kadm.ShardErrors{Name: "DescribeGroups", AllFailed: true, Errs: []kadm.ShardError{{Req: req, Err: kerr.CoordinatorNotAvailable}}}

	lags, got := describeErrors(err)
	require.NoError(t, got)
	require.Len(t, lags, 2)
	for _, g := range req.Groups {
		l := lags[g]
		require.ErrorIs(t, l.Error(), kerr.CoordinatorNotAvailable, g)
	}

	other := errors.New("dial tcp: connection refused")
	_, got = describeErrors(other)
	assert.ErrorIs(t, got, other, "an error that is not a describe's is the view's")
	listErr := &kadm.ShardErrors{Name: "ListGroups", AllFailed: true, Errs: []kadm.ShardError{{Req: kmsg.NewPtrListGroupsRequest(), Err: kerr.CoordinatorNotAvailable}}}
	_, got = describeErrors(listErr)
	assert.Error(t, got, "a failure to list the groups names no group to show it on")
}
