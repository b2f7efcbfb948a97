package apiserver_test

import (
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/apiserver"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

func TestWhoAmIAnswersTheCallersRoleAndWhatItAllows(t *testing.T) {
	t.Parallel()
	tokens, err := apiserver.ParseStaticTokens([]string{"dev:viewer:v-secret", "dev:operator:o-secret", "dev:admin:a-secret", "*:admin:c-secret"})
	require.NoError(t, err)
	srv, err := apiserver.New(apiserver.Config{Addr: "127.0.0.1:0", Authenticator: tokens, Services: []apiserver.Service{apiserver.IdentityService{}.Service()}})
	require.NoError(t, err)
	web := httptest.NewServer(srv)
	t.Cleanup(web.Close)
	cases := []struct {
		name, token string
		want        *apiv1.WhoAmIResponse
	}{
		{name: "a viewer may read", token: "v-secret", want: &apiv1.WhoAmIResponse{
			Subject: "static-token:1", Team: "dev", Role: "viewer", Permissions: []string{"read"}}},
		{name: "an operator may read and operate", token: "o-secret", want: &apiv1.WhoAmIResponse{
			Subject: "static-token:2", Team: "dev", Role: "operator", Permissions: []string{"read", "operate"}}},
		{name: "an admin may also apply", token: "a-secret", want: &apiv1.WhoAmIResponse{
			Subject: "static-token:3", Team: "dev", Role: "admin", Permissions: []string{"read", "operate", "apply"}}},
		{name: "the cluster admin may do everything, on every team", token: "c-secret", want: &apiv1.WhoAmIResponse{
			Subject: "static-token:4", Role: "admin", ClusterAdmin: true, Permissions: []string{"read", "operate", "apply", "cluster"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cl := apiv1connect.NewIdentityServiceClient(web.Client(), web.URL, connect.WithInterceptors(apiserver.BearerToken(c.token)))
			resp, err := cl.WhoAmI(t.Context(), connect.NewRequest(&apiv1.WhoAmIRequest{}))
			require.NoError(t, err)
			assert.Equal(t, c.want.String(), resp.Msg.String())
		})
	}
	t.Run("an unknown token is unauthenticated", func(t *testing.T) {
		t.Parallel()
		cl := apiv1connect.NewIdentityServiceClient(web.Client(), web.URL, connect.WithInterceptors(apiserver.BearerToken("nope")))
		_, err := cl.WhoAmI(t.Context(), connect.NewRequest(&apiv1.WhoAmIRequest{}))
		assert.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))
	})
}
