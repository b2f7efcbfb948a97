package apiserver

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
)

func TestCheckExpectedRevision(t *testing.T) {
	t.Parallel()
	rev := func(n int64) *int64 { return &n }
	cases := []struct {
		name     string
		expected *int64
		found    bool
		inForce  int64
		refused  string // empty: applied
	}{
		{name: "no expected revision expects nothing", expected: nil, found: true, inForce: 7},
		{name: "the revision edited is still in force", expected: rev(7), found: true, inForce: 7},
		{name: "a create expects none and finds none", expected: rev(0), found: false},
		{name: "a newer revision in force refuses the edit", expected: rev(7), found: true, inForce: 9, refused: "the revision in force is 9"},
		{name: "a create finds a definition created meanwhile", expected: rev(0), found: true, inForce: 3, refused: "created meanwhile"},
		{name: "an edit of a job deleted meanwhile is refused", expected: rev(7), found: false, inForce: 7, refused: "no definition is in force"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := checkExpectedRevision(c.expected, c.found, c.inForce)
			if c.refused == "" {
				assert.NoError(t, err)
				return
			}
			assert.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err))
			assert.ErrorContains(t, err, c.refused)
		})
	}
}
