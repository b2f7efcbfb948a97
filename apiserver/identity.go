package apiserver

import (
	"context"

	"connectrpc.com/connect"

	"github.com/sundialhq/sundial/auth"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

// Permissions a principal holds, as WhoAmI names them. Each is the role
// the server's checks ask for (auth.Principal.Allows): "read" is the
// viewer's, "operate" the operator's, "apply" the admin's, and "cluster"
// the cluster admin's.
const (
	PermissionRead    = "read"
	PermissionOperate = "operate"
	PermissionApply   = "apply"
	PermissionCluster = "cluster"
)

// permissions lists what p's role allows, lowest first: the one rule
// WhoAmI answers with, read off the same roles the other calls check.
func permissions(p auth.Principal) []string {
	if p.ClusterAdmin {
		return []string{PermissionRead, PermissionOperate, PermissionApply, PermissionCluster}
	}
	var out []string
	for _, r := range []struct {
		need auth.Role
		name string
	}{{auth.RoleViewer, PermissionRead}, {auth.RoleOperator, PermissionOperate}, {auth.RoleAdmin, PermissionApply}} {
		if p.Allows(p.Team, r.need) {
			out = append(out, r.name)
		}
	}
	return out
}

// IdentityService implements apiv1connect.IdentityServiceHandler: it tells
// the caller who it is. It reads nothing but the request's principal.
type IdentityService struct{}

var _ apiv1connect.IdentityServiceHandler = IdentityService{}

// Service mounts the identity service on a Server.
func (s IdentityService) Service() Service {
	return ConnectService(apiv1connect.NewIdentityServiceHandler, apiv1connect.IdentityServiceHandler(s))
}

// WhoAmI implements apiv1connect.IdentityServiceHandler.
func (IdentityService) WhoAmI(ctx context.Context, _ *connect.Request[apiv1.WhoAmIRequest]) (*connect.Response[apiv1.WhoAmIResponse], error) {
	p, err := requireCaller(ctx)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&apiv1.WhoAmIResponse{
		Subject:      p.Subject,
		Team:         p.Team,
		Role:         p.Role.String(),
		ClusterAdmin: p.ClusterAdmin,
		Permissions:  permissions(p),
	}), nil
}
