package apiserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
)

func TestStaticTokens(t *testing.T) {
	t.Parallel()
	s, err := apiserver.ParseStaticTokens([]string{"data:viewer:s3cret", "billing:admin:with:colons", "*:admin:root-secret"})
	require.NoError(t, err)
	tests := []struct {
		bearer string
		want   auth.Principal
		ok     bool
	}{
		{"s3cret", auth.Principal{Subject: "static-token:1", Team: "data", Role: auth.RoleViewer}, true},
		{"with:colons", auth.Principal{Subject: "static-token:2", Team: "billing", Role: auth.RoleAdmin}, true},
		{"root-secret", auth.Principal{Subject: "static-token:3", Role: auth.RoleAdmin, ClusterAdmin: true}, true},
		{"s3cret ", auth.Principal{}, false},
		{"", auth.Principal{}, false},
	}
	for _, tc := range tests {
		p, err := s.Authenticate(t.Context(), tc.bearer)
		if !tc.ok {
			assert.Error(t, err, "%q", tc.bearer)
			continue
		}
		require.NoError(t, err, "%q", tc.bearer)
		assert.Equal(t, tc.want, p, "%q", tc.bearer)
	}
}

func TestParseStaticTokensReportsEveryBadSpec(t *testing.T) {
	t.Parallel()
	_, err := apiserver.ParseStaticTokens([]string{"data:viewer", "data:root:x", ":admin:y", "a:admin:dup", "b:viewer:dup"})
	require.Error(t, err)
	for _, want := range []string{"static token 1: want TEAM:ROLE:SECRET", "static token 2: role \"root\"", "static token 3: want", "static token 5: its secret is also another token's"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), "dup", "secrets stay out of errors")
}
