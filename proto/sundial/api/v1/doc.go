// Package apiv1 is the wire format of the control-plane API that `sundial
// api` serves over Connect, gRPC and gRPC-Web: the services JobService,
// RunService, DagService, DlqService, WatchService, ClusterService,
// AuditService, QuotaService, OperatorService and WorkerService, generated
// from the .proto files beside this file (package sundial.api.v1);
// apiv1connect holds their generated handlers and clients.
//
// # Invariants
//
//   - The .proto files are the reference: their comments state each
//     field's and each call's meaning. `make generate` rebuilds the
//     generated code, which is never edited by hand.
//   - Compatibility: a published field number, type or name never changes
//     or is reused; new fields and new calls only.
package apiv1
