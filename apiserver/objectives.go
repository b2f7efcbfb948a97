package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/objective"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// Bounds of ListObjectives. One call reads at most ObjectiveScan history
// records of the run index's team hours, newest first, or the newest Scan
// (10,000) of one job's partition; at most maxObjectiveJobs definitions,
// viewReaders at a time; and at most maxObjectivePartitions team hours (a
// team's window is at most maxObjectiveWindow: 169 hour partitions). Past
// a bound it stops and says so (truncated).
// It writes nothing, and nothing is written per run for it: the figures
// come from the records the history writer already stores.
const (
	// DefaultObjectiveScan is RunServiceConfig.ObjectiveScan's default.
	DefaultObjectiveScan   = 50_000
	defaultObjectiveWindow = 24 * time.Hour
	maxObjectiveWindow     = 7 * 24 * time.Hour
	maxObjectiveJobs       = 2_000
	// maxObjectivePartitions bounds the team hours one call of every team
	// reads (teams × hours the window touches): a day's window (25 hours)
	// covers the first 96 teams by name.
	maxObjectivePartitions = 2_400
	defaultObjectivePage   = 25
	maxObjectivePage       = 100
	// maxLateAttempts bounds the late attempts listed for one job.
	maxLateAttempts = 100
)

// objectiveRead says what one ListObjectives call read.
type objectiveRead struct {
	windowStart time.Time
	records     int
	truncated   bool
	countedFrom time.Time
}

// ListObjectives implements apiv1connect.RunServiceHandler.
func (s *RunService) ListObjectives(ctx context.Context, req *connect.Request[apiv1.ListObjectivesRequest]) (*connect.Response[apiv1.ListObjectivesResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if err := checkObjectives(p, m); err != nil {
		return nil, err
	}
	offset, err := objectivesOffset(m)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	var ranked []*apiv1.JobObjective
	var read objectiveRead
	if m.GetJobId() != "" {
		ranked, read, err = s.jobObjective(ctx, p, m, now)
	} else {
		ranked, read, err = s.rankObjectives(ctx, p, m, now)
	}
	if err != nil {
		return nil, err
	}
	size := cmp.Or(int(m.GetPageSize()), defaultObjectivePage)
	out := &apiv1.ListObjectivesResponse{
		WindowStart: timestamppb.New(read.windowStart), Now: timestamppb.New(now),
		Truncated: read.truncated, CountedFrom: timestampOrNil(read.countedFrom),
		RecordsRead: uint32(read.records), JobsRanked: uint32(len(ranked)), //nolint:gosec // both bounded by ObjectiveScan
	}
	if offset < len(ranked) {
		out.Objectives = ranked[offset:min(offset+size, len(ranked))]
	}
	if offset+size < len(ranked) {
		out.NextPageToken = encodeToken(strconv.Itoa(offset+size), objectivesFilter(m))
	}
	return connect.NewResponse(out), nil
}

// checkObjectives reports the bad fields of a request, and refuses a
// selection the caller may not read.
func checkObjectives(p auth.Principal, m *apiv1.ListObjectivesRequest) error {
	var errs []error
	if m.GetPageSize() > maxObjectivePage {
		errs = append(errs, fmt.Errorf("page_size %d: must be at most %d", m.GetPageSize(), maxObjectivePage))
	}
	if w := m.GetWindow(); w != nil {
		switch d := w.AsDuration(); {
		case d <= 0:
			errs = append(errs, fmt.Errorf("window %s: must be positive", d))
		case d > maxObjectiveWindow && m.GetJobId() == "":
			errs = append(errs, fmt.Errorf("window %s: at most %s for a team's jobs", d, maxObjectiveWindow))
		}
	}
	switch {
	case m.GetJobId() != "" && (m.GetTeam() != "" || m.GetAllTeams()):
		errs = append(errs, errors.New("job_id: not with team or all_teams"))
	case m.GetAllTeams() && m.GetTeam() != "":
		errs = append(errs, errors.New("all_teams: not with team"))
	case m.GetJobId() == "" && !m.GetAllTeams() && m.GetTeam() == "" && p.Team == "":
		errs = append(errs, errors.New("team: required for a caller of no team (or all_teams)"))
	}
	if err := errors.Join(errs...); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	switch {
	case m.GetAllTeams() && !p.ClusterAdmin:
		return connect.NewError(connect.CodePermissionDenied, errors.New("all_teams: only the cluster admin ranks every team's jobs"))
	case m.GetTeam() != "" && !p.CanSee(m.GetTeam()):
		return notVisible("team", m.GetTeam())
	}
	return nil
}

// objectivesFilter fingerprints a request's selection, so that a page
// token is used with the selection it was issued for.
func objectivesFilter(m *apiv1.ListObjectivesRequest) uint64 {
	return filterHash(nil, fmt.Sprintf("objectives\x00%s\x00%t\x00%s\x00%d", m.GetTeam(), m.GetAllTeams(), m.GetJobId(), m.GetWindow().AsDuration()))
}

// objectivesOffset reads the page token: the rank the page starts at.
func objectivesOffset(m *apiv1.ListObjectivesRequest) (int, error) {
	after, err := decodeToken(m.GetPageToken(), objectivesFilter(m))
	if ce := (*connect.Error)(nil); errors.As(err, &ce) {
		return 0, connect.NewError(ce.Code(), errors.New("page_token"+strings.TrimPrefix(ce.Message(), "page.token")))
	}
	if after == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(after)
	if err != nil || n < 0 {
		return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("page_token: not a token this API issued"))
	}
	return n, nil
}

// jobObjective measures one job over its objective's window (or the
// request's, if shorter), from the newest ObjectiveScan records of its
// history, with its late attempts.
func (s *RunService) jobObjective(ctx context.Context, p auth.Principal, m *apiv1.ListObjectivesRequest, now time.Time) ([]*apiv1.JobObjective, objectiveRead, error) {
	id := m.GetJobId()
	spec, job, found, err := jobSpec(ctx, s.cfg.Jobs, id)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "list objectives: read job", "job", id, "err", err)
		return nil, objectiveRead{}, internalError("list objectives")
	}
	if !found || job.Deleted || !p.CanSee(spec.GetOwnerTeam()) {
		return nil, objectiveRead{}, notVisible("job", id)
	}
	text, ok := spec.GetLabels()[objective.Label]
	if !ok {
		return nil, objectiveRead{}, connect.NewError(connect.CodeFailedPrecondition,
			fmt.Errorf("job_id %q: the job has no label %s (for example \"p99 <= 2s over 7d\")", id, objective.Label))
	}
	o, perr := objective.Parse(text)
	if perr != nil {
		// A label that does not parse is an answer, not a failure of the
		// call: the job is returned with the reason.
		job := &apiv1.JobObjective{JobId: id, Team: spec.GetOwnerTeam(), Objective: text, ObjectiveError: perr.Error()}
		return []*apiv1.JobObjective{job}, objectiveRead{windowStart: now}, nil //nolint:nilerr // see above
	}
	if w := m.GetWindow(); w != nil {
		o.Window = min(o.Window, w.AsDuration())
	}
	read := objectiveRead{windowStart: now.Add(-o.Window)}
	// A job's records come with their log lines: the bound is GetRun's.
	scan := min(s.cfg.ObjectiveScan, s.cfg.Scan)
	recs, err := s.cfg.History.ListRuns(ctx, id, scan+1)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "list objectives: read history", "job", id, "err", err)
		return nil, objectiveRead{}, internalError("list objectives")
	}
	if len(recs) > scan {
		// The record past the bound is in the window: older ones of the
		// window are out of reach.
		read.truncated = !recs[scan].Due.Before(read.windowStart)
		recs = recs[:scan]
		if read.truncated {
			read.countedFrom = recs[len(recs)-1].Due
		}
	}
	read.records = len(recs)
	return []*apiv1.JobObjective{s.measure(id, spec, o, recs, now, maxLateAttempts)}, read, nil
}

// rankObjectives measures the jobs of a team (or of every team) that have
// an objective and an attempt in the window, from the run index, and
// ranks them least budget left first.
func (s *RunService) rankObjectives(ctx context.Context, p auth.Principal, m *apiv1.ListObjectivesRequest, now time.Time) ([]*apiv1.JobObjective, objectiveRead, error) {
	if s.cfg.Index == nil {
		return nil, objectiveRead{}, connect.NewError(connect.CodeFailedPrecondition, errors.New("job_id: required: this server has no run index"))
	}
	window := defaultObjectiveWindow
	if w := m.GetWindow(); w != nil {
		window = w.AsDuration()
	}
	teams := []string{cmp.Or(m.GetTeam(), p.Team)}
	if m.GetAllTeams() {
		var err error
		if teams, err = s.teamNames(ctx); err != nil {
			return nil, objectiveRead{}, err
		}
	}
	read := objectiveRead{windowStart: now.Add(-window)}
	hours := int(store.RunBucket(now).Sub(store.RunBucket(read.windowStart))/time.Hour) + 1
	if most := max(maxObjectivePartitions/hours, 1); len(teams) > most {
		teams, read.truncated = teams[:most], true
	}
	byJob := map[string][]store.RunRecord{}
	teamOf := map[string]string{}
	var order []string
	for _, team := range teams {
		left := s.cfg.ObjectiveScan - read.records
		if left <= 0 {
			read.truncated = true
			break
		}
		recs, err := s.cfg.Index.ListTeamRuns(ctx, store.TeamRunsQuery{Team: team, From: read.windowStart, To: now.Add(time.Millisecond), Limit: left + 1})
		if err != nil {
			s.cfg.Logger.ErrorContext(ctx, "list objectives: team index", "team", team, "err", err)
			return nil, objectiveRead{}, internalError("list objectives")
		}
		if len(recs) > left {
			recs = recs[:left]
			read.truncated = true
			if from := recs[left-1].Due; read.countedFrom.IsZero() || from.Before(read.countedFrom) {
				read.countedFrom = from
			}
		}
		read.records += len(recs)
		for _, r := range recs {
			if _, seen := teamOf[r.JobID]; !seen {
				if len(order) == maxObjectiveJobs {
					read.truncated = true
					continue
				}
				teamOf[r.JobID] = team
				order = append(order, r.JobID)
			}
			byJob[r.JobID] = append(byJob[r.JobID], r)
		}
	}
	measured := make([]*apiv1.JobObjective, len(order))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(viewReaders)
	for i, id := range order {
		g.Go(func() error {
			spec, job, found, err := jobSpec(gctx, s.cfg.Jobs, id)
			// A job deleted, moved to another team since these runs, or
			// not the caller's is not listed.
			if err != nil || !found || job.Deleted || spec.GetOwnerTeam() != teamOf[id] || !p.CanSee(spec.GetOwnerTeam()) {
				return err
			}
			o, perr := objective.Parse(spec.GetLabels()[objective.Label])
			if perr != nil {
				return nil //nolint:nilerr // no label, or one that does not parse: nothing to rank by
			}
			o.Window = min(o.Window, window)
			measured[i] = s.measure(id, spec, o, byJob[id], now, 0)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "list objectives: read jobs", "err", err)
		return nil, objectiveRead{}, internalError("list objectives")
	}
	ranked := slices.DeleteFunc(measured, func(o *apiv1.JobObjective) bool { return o == nil || o.GetAttempts() == 0 })
	slices.SortFunc(ranked, func(a, b *apiv1.JobObjective) int {
		return cmp.Or(cmp.Compare(a.GetBudgetLeft(), b.GetBudgetLeft()), cmp.Compare(b.GetLate(), a.GetLate()), strings.Compare(a.GetJobId(), b.GetJobId()))
	})
	return ranked, read, nil
}

// teamNames lists every team, by name.
func (s *RunService) teamNames(ctx context.Context) ([]string, error) {
	if s.cfg.Teams == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("all_teams: this server has no list of teams; name the team"))
	}
	teams, err := s.cfg.Teams.ListTeams(ctx)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "list objectives: list teams", "err", err)
		return nil, internalError("list objectives")
	}
	names := make([]string, 0, len(teams))
	for _, t := range teams {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names, nil
}

// measure assesses one job's records against o and writes the figures,
// with up to lateN of its late attempts.
func (s *RunService) measure(id string, spec *sundialv1.JobSpec, o objective.Objective, recs []store.RunRecord, now time.Time, lateN int) *apiv1.JobObjective {
	a := objective.Assess(o, recs, now)
	out := &apiv1.JobObjective{
		JobId: id, Team: spec.GetOwnerTeam(), Objective: o.Text,
		Percentile: o.Percentile, Lag: durationpb.New(o.Lag), Window: durationpb.New(o.Window),
		Attempts: uint32(a.Counted), Late: uint32(len(a.Late)), //nolint:gosec // bounded by ObjectiveScan
		Budget: a.Budget, BudgetLeft: a.Left, Met: a.Met, LagP99: durationpb.New(a.P99),
		LateByCause: map[string]uint32{},
	}
	for where, n := range a.Causes {
		out.LateByCause[where] = uint32(n) //nolint:gosec // bounded by ObjectiveScan
	}
	for i, l := range a.Late {
		if i == 0 {
			out.Worst = s.lateAttempt(id, spec, l)
		}
		if i >= lateN {
			break
		}
		out.LateAttempts = append(out.LateAttempts, s.lateAttempt(id, spec, l))
	}
	return out
}

// lateAttempt describes a late attempt and what to look at for its cause.
func (s *RunService) lateAttempt(id string, spec *sundialv1.JobSpec, l objective.Late) *apiv1.LateAttempt {
	r := l.Record
	out := &apiv1.LateAttempt{
		RunId: r.RunID, Attempt: uint32(max(r.Attempt, 0)), //nolint:gosec // attempts count from 1
		DueTime: timestamppb.New(cmp.Or(r.AttemptDue, r.Due)), Lag: durationpb.New(l.Lag),
		Cause: l.Cause.Where, CauseTime: durationpb.New(l.Cause.Lost), WaitReason: r.WaitReason,
	}
	switch l.Cause.Where {
	case objective.CauseDispatcher:
		out.Culprit = "the dispatcher of its shard"
		if s.cfg.Shards > 0 {
			out.Culprit = fmt.Sprintf("shard %d", store.ShardOf(id, s.cfg.Shards))
		}
	case objective.CauseConsumer:
		out.Culprit = "the runs topic's consumer lag"
	case objective.CauseRunner:
		out.Culprit = "pool " + cmp.Or(spec.GetPool(), "default")
	}
	return out
}
