package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/store"
)

// AuditDagRunResumed is the audit action of ResumeDagRun.
const AuditDagRunResumed = "dag_run.resumed"

// DagRunResumer resumes DAG runs: *dagengine.Runs, the code `sundial dag
// resume` calls, so that the CLI and the API follow one rule.
type DagRunResumer interface {
	// Resume reruns the failed, cancelled and timed-out nodes of DAG run
	// id with the DAG's current definition. It fails with
	// dagrun.ErrNothingToResume or dagengine.ErrNotResumable, leaving the
	// run as it was.
	Resume(ctx context.Context, id string) (dagrun.State, error)
}

// ResumeDagRun implements apiv1connect.DagServiceHandler: the caller must
// see the run's team (else NotFound, as a run that does not exist) and be
// an admin of it (else PermissionDenied).
func (s *DagService) ResumeDagRun(ctx context.Context, req *connect.Request[apiv1.ResumeDagRunRequest]) (*connect.Response[apiv1.ResumeDagRunResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	id := req.Msg.GetDagRunId()
	if s.cfg.Runs == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this server does not resume DAG runs"))
	}
	r, err := s.visibleDagRun(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if err := mayChange(p, r.team, "resume DAG run "+id); err != nil {
		return nil, err
	}
	var rerun []string
	for _, i := range r.state.Failed() {
		rerun = append(rerun, r.state.Nodes[i].ID)
	}
	st, err := s.cfg.Runs.Resume(ctx, id)
	switch {
	case errors.Is(err, dagrun.ErrNothingToResume), errors.Is(err, dagengine.ErrNotResumable):
		return nil, connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, store.ErrNotFound):
		return nil, notVisible("DAG run", id)
	case errors.Is(err, dagengine.ErrPermanent):
		s.cfg.Logger.ErrorContext(ctx, "resume DAG run", "dag_run", id, "err", err)
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("resume DAG run %q: the stored run does not fit its definition; the server's log says why", id))
	case err != nil && st.DagRunID == "":
		// Nothing was saved: the run is as it was.
		s.cfg.Logger.ErrorContext(ctx, "resume DAG run", "dag_run", id, "err", err)
		return nil, internalError("resume DAG run " + id)
	case err != nil:
		// The resume is saved; the engine carries out what is left of it.
		s.cfg.Logger.WarnContext(ctx, "resume DAG run: saved, its nodes left to the engine", "dag_run", id, "err", err)
	}
	// Recorded under the DAG's id, as an operator action on a run is under
	// its job's, so that the DAG's trail lists it.
	recordAudit(ctx, s.cfg.Audit, s.cfg.Logger, p, s.cfg.Now(), AuditDagRunResumed, r.row.DagID, r.team,
		fmt.Sprintf("run %s through the API; reran %s", id, strings.Join(rerun, ", ")))
	// The run as stored now (its status and summary are the row's); if it
	// cannot be read, the state the resume saved.
	if now, err := s.visibleDagRun(ctx, p, id); err == nil {
		r = now
	} else {
		r.state = st
		r.row.Status, r.row.Active = st.Status.String(), st.Active()
	}
	return connect.NewResponse(&apiv1.ResumeDagRunResponse{DagRun: r.detail(), Rerun: rerun}), nil
}
