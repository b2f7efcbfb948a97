package apiserver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSplitNodeRunID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in           string
		dagRun, node string
		ok           bool
	}{
		{"etl.daily@1924992000000/load", "etl.daily@1924992000000", "load", true},
		{"etl.daily@1924992000000/load#3", "etl.daily@1924992000000", "load", true},
		{"team/etl@1924992000000/load", "team/etl@1924992000000", "load", true},
		{"billing.invoice@1767148200000", "", "", false},
		{"etl.daily@1924992000000/", "etl.daily@1924992000000", "", false},
		{"no-at-sign/load", "", "", false},
	} {
		dagRun, node, ok := splitNodeRunID(tc.in)
		assert.Equal(t, tc.ok, ok, tc.in)
		if tc.ok {
			assert.Equal(t, tc.dagRun, dagRun, tc.in)
			assert.Equal(t, tc.node, node, tc.in)
		}
	}
}
