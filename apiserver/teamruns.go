package apiserver

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/auth"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/store"
)

// defaultTeamWindow is how far back ListRuns lists a team's runs when
// due_after is unset; due_before defaults to as far ahead, which lists
// the attempts scheduled soon too.
const defaultTeamWindow = time.Hour

// listTeamRuns answers ListRuns without a job or DAG run: one team's runs
// due in the window, from the run index, paged by the key of the last
// attempt listed.
func (s *RunService) listTeamRuns(ctx context.Context, p auth.Principal, m *apiv1.ListRunsRequest) (*connect.Response[apiv1.ListRunsResponse], error) {
	now := s.cfg.Now()
	size, after, err := s.checkTeamRuns(p, m)
	if err != nil {
		return nil, err
	}
	if s.cfg.Index == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("job_id: required: this server has no run index"))
	}
	team := m.GetTeam()
	if team == "" {
		team = p.Team
	}
	q := store.TeamRunsQuery{Team: team, From: now.Add(-defaultTeamWindow), To: now.Add(defaultTeamWindow), After: after, Limit: size + 1}
	if t := m.GetDueAfter(); t != nil {
		q.From = t.AsTime()
	}
	if t := m.GetDueBefore(); t != nil {
		q.To = t.AsTime()
	}
	if !q.From.Before(q.To) {
		return connect.NewResponse(&apiv1.ListRunsResponse{}), nil
	}
	q.Keep = func(r store.RunRecord) bool {
		switch {
		case len(m.GetStates()) > 0 && !slices.Contains(m.GetStates(), attemptState(r.State)),
			m.GetMinLateBy() != nil && r.LateBy(now) < m.GetMinLateBy().AsDuration(),
			!errorContains(r.Error, m.GetErrorContains()):
			return false
		}
		return true
	}
	recs, err := s.cfg.Index.ListTeamRuns(ctx, q)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "list runs: team index", "team", team, "err", err)
		return nil, internalError("list runs")
	}
	resp := &apiv1.ListRunsResponse{}
	for _, r := range recs[:min(size, len(recs))] {
		resp.Attempts = append(resp.Attempts, attemptDetailOf(r, now))
	}
	if len(recs) > size {
		resp.NextPageToken = keyToken(runPageKey(m), store.KeyOf(recs[size-1]))
	}
	return connect.NewResponse(resp), nil
}

// checkTeamRuns reports every bad field of a team ListRuns request and
// returns its page size and where its token resumes.
func (s *RunService) checkTeamRuns(p auth.Principal, m *apiv1.ListRunsRequest) (int, *store.RunKey, error) {
	size, errs := checkRunFilter(m)
	switch {
	case m.GetTeam() == "" && p.Team == "":
		errs = append(errs, errors.New("team: required without job_id or dag_run_id for a caller of no team"))
	case m.GetTeam() != "" && !p.CanSee(m.GetTeam()):
		return 0, nil, notVisible("team", m.GetTeam())
	}
	var after *store.RunKey
	if tok := m.GetPageToken(); tok != "" {
		k, err := parseKeyToken(runPageKey(m), tok)
		if err != nil {
			errs = append(errs, err)
		}
		after = &k
	}
	if err := errors.Join(errs...); err != nil {
		return 0, nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	return size, after, nil
}

// keyToken returns the token of the page after k in the list key selects,
// bound to key as pageToken's are.
func keyToken(key proto.Message, k store.RunKey) string {
	b := fmt.Appendf(nil, "%d/%d/%s", k.Due.UnixMilli(), k.Attempt, k.RunID)
	b = append(pageKeyDigest(key), b...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseKeyToken returns the key of a token keyToken made for key.
func parseKeyToken(key proto.Message, tok string) (store.RunKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	digest := pageKeyDigest(key)
	if err != nil || len(b) < len(digest) {
		return store.RunKey{}, errors.New("page_token: not a token this service issued")
	}
	if string(b[:len(digest)]) != string(digest) {
		return store.RunKey{}, errors.New("page_token: not a token of this list (were the filters changed?)")
	}
	parts := strings.SplitN(string(b[len(digest):]), "/", 3)
	if len(parts) != 3 {
		return store.RunKey{}, errors.New("page_token: not a token this service issued")
	}
	ms, err1 := strconv.ParseInt(parts[0], 10, 64)
	attempt, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return store.RunKey{}, errors.New("page_token: not a token this service issued")
	}
	return store.RunKey{Due: time.UnixMilli(ms).UTC(), Attempt: attempt, RunID: parts[2]}, nil
}
