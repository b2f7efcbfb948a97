package dag

import (
	"errors"
	"fmt"
	"slices"
)

// ErrIncompatible means a DAG's current definition cannot take over a run that
// started under an earlier one (see Compatible).
var ErrIncompatible = errors.New("the DAG's definition changed shape since the run started")

// Compatible says whether cur, a DAG's current definition, may take over a
// run that started under old (a resume reruns nodes with the current
// definition): the same owner team and the same nodes, each running the
// same job id and depending on the same nodes. What a node runs (an inline
// job's target, payload, retries, timeout) and the failure policy may
// differ; node order may too. Every difference in shape is reported, each
// naming its node, wrapped in ErrIncompatible.
func Compatible(old, cur *Graph) error {
	var errs []error
	if old.ownerTeam != cur.ownerTeam {
		errs = append(errs, fmt.Errorf("owner_team: %q now, %q when the run started", cur.ownerTeam, old.ownerTeam))
	}
	for i, n := range old.nodes {
		j, ok := cur.index[n.ID]
		if !ok {
			errs = append(errs, fmt.Errorf("node %q: removed from the DAG since the run started", n.ID))
			continue
		}
		if c := cur.nodes[j]; c.JobID != n.JobID {
			errs = append(errs, fmt.Errorf("node %q: runs job %q now, %q when the run started", n.ID, c.JobID, n.JobID))
		}
		was, now := old.parentIDs(i), cur.parentIDs(j)
		if !slices.Equal(was, now) {
			errs = append(errs, fmt.Errorf("node %q: depends on %q now, on %q when the run started", n.ID, now, was))
		}
	}
	for _, c := range cur.nodes {
		if _, ok := old.index[c.ID]; !ok {
			errs = append(errs, fmt.Errorf("node %q: added to the DAG since the run started", c.ID))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrIncompatible, errors.Join(errs...))
}

// parentIDs returns the ids of node i's parents, sorted.
func (g *Graph) parentIDs(i int) []string {
	ids := make([]string, 0, len(g.parents[i]))
	for _, p := range g.parents[i] {
		ids = append(ids, g.nodes[p].ID)
	}
	slices.Sort(ids)
	return ids
}
