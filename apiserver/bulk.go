package apiserver

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
)

// BulkJobs implements apiv1connect.OperatorServiceHandler; the next commit
// implements it.
func (s *OperatorService) BulkJobs(context.Context, *connect.Request[apiv1.BulkJobsRequest]) (*connect.Response[apiv1.BulkJobsResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("bulk jobs: not implemented yet"))
}
