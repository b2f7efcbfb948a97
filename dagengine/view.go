package dagengine

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/store"
)

const viewTime = "2006-01-02T15:04:05.000Z"

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(viewTime)
}

// WriteRuns writes a table of DAG runs (ListDagRuns), newest first.
func WriteRuns(w io.Writer, runs []store.DagRun) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DAG RUN\tDUE\tSTATUS\tORIGIN\tNODES\tUPDATED")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, fmtTime(r.Due), r.Status, r.Origin, r.Summary, fmtTime(r.UpdatedAt))
	}
	return flush(w, tw, &b)
}

// flush writes what was formatted in b through tw to w.
func flush(w io.Writer, tw *tabwriter.Writer, b *bytes.Buffer) error {
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := b.WriteTo(w)
	return err
}

// WriteRun writes one DAG run: a header, then each node's state as a table
// in the order of the definition.
func WriteRun(w io.Writer, row store.DagRun, st dagrun.State, opts dag.Options) error {
	g, err := dag.Unmarshal(followed(row, st), opts)
	if err != nil {
		return fmt.Errorf("dag run %s: %w", row.ID, err)
	}
	status := statusOf(&st)
	var b bytes.Buffer
	fmt.Fprintf(&b, "DAG run   %s\n", row.ID)
	fmt.Fprintf(&b, "DAG       %s (policy %s)\n", row.DagID, g.Policy())
	fmt.Fprintf(&b, "Origin    %s\n", row.Origin)
	fmt.Fprintf(&b, "Due       %s\n", fmtTime(st.Due))
	fmt.Fprintf(&b, "Status    %s\n", status)
	fmt.Fprintf(&b, "Nodes     %s\n", summaryOf(&st))
	fmt.Fprintf(&b, "Started   %s\n", fmtTime(st.CreatedAt))
	fmt.Fprintf(&b, "Ended     %s\n", fmtTime(st.EndedAt))
	if st.Resumes > 0 {
		fmt.Fprintf(&b, "Resumes   %d\n", st.Resumes)
	}
	fmt.Fprintf(&b, "Version   %d\n\n", row.Version)

	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tJOB\tAFTER\tRUN ID\tATTEMPT\tSTARTED\tENDED\tREASON")
	for i, n := range st.Nodes {
		after := make([]string, 0, len(g.Parents(i)))
		for _, p := range g.Parents(i) {
			after = append(after, g.Node(p).ID)
		}
		run, attempt, reason := n.RunID(st.DagRunID), "-", n.Reason
		if run == "" {
			run = "-"
		}
		if n.Attempt > 0 {
			attempt = fmt.Sprint(n.Attempt)
		}
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.Phase, g.Node(i).JobID, list(after),
			run, attempt, fmtTime(n.StartedAt), fmtTime(n.EndedAt), reason)
	}
	return flush(w, tw, &b)
}

// list joins ids, eliding the middle of a long list.
func list(ids []string) string {
	switch {
	case len(ids) == 0:
		return "-"
	case len(ids) > 4:
		return fmt.Sprintf("%s,%s,...(%d more),%s", ids[0], ids[1], len(ids)-3, ids[len(ids)-1])
	}
	return strings.Join(ids, ",")
}

// RunSummary is a DAG run as a list of runs shows it, with the field names
// of the CLI's -o json and yaml.
type RunSummary struct {
	ID      string    `json:"id"`
	Due     time.Time `json:"due"`
	Status  string    `json:"status"`
	Origin  string    `json:"origin"`
	Nodes   string    `json:"nodes"`
	Updated time.Time `json:"updated"`
}

// SummarizeRuns is runs as WriteRuns shows them.
func SummarizeRuns(runs []store.DagRun) []RunSummary {
	out := make([]RunSummary, 0, len(runs))
	for _, r := range runs {
		out = append(out, RunSummary{ID: r.ID, Due: r.Due.UTC(), Status: r.Status, Origin: r.Origin, Nodes: r.Summary, Updated: r.UpdatedAt.UTC()})
	}
	return out
}

// RunDetail is one DAG run as WriteRun shows it, with the field names of
// the CLI's -o json and yaml.
type RunDetail struct {
	ID      string       `json:"id"`
	DagID   string       `json:"dagId"`
	Policy  string       `json:"policy"`
	Origin  string       `json:"origin"`
	Due     time.Time    `json:"due"`
	Status  string       `json:"status"`
	Summary string       `json:"summary"`
	Started *time.Time   `json:"started,omitempty"`
	Ended   *time.Time   `json:"ended,omitempty"`
	Resumes int          `json:"resumes,omitempty"`
	Version int64        `json:"version"`
	Nodes   []NodeDetail `json:"nodes"`
}

// NodeDetail is one node of a RunDetail.
type NodeDetail struct {
	ID      string     `json:"id"`
	State   string     `json:"state"`
	JobID   string     `json:"jobId"`
	After   []string   `json:"after,omitempty"`
	RunID   string     `json:"runId,omitempty"`
	Attempt int        `json:"attempt,omitempty"`
	Started *time.Time `json:"started,omitempty"`
	Ended   *time.Time `json:"ended,omitempty"`
	Reason  string     `json:"reason,omitempty"`
}

// DetailRun is row and its state as WriteRun shows them.
func DetailRun(row store.DagRun, st dagrun.State, opts dag.Options) (RunDetail, error) {
	g, err := dag.Unmarshal(row.Spec, opts)
	if err != nil {
		return RunDetail{}, fmt.Errorf("dag run %s: %w", row.ID, err)
	}
	d := RunDetail{ID: row.ID, DagID: row.DagID, Policy: fmt.Sprint(g.Policy()), Origin: row.Origin, Due: st.Due.UTC(),
		Status: fmt.Sprint(statusOf(&st)), Summary: summaryOf(&st), Started: timeOrNil(st.CreatedAt), Ended: timeOrNil(st.EndedAt),
		Resumes: st.Resumes, Version: row.Version}
	for i, n := range st.Nodes {
		nd := NodeDetail{ID: n.ID, State: fmt.Sprint(n.Phase), JobID: g.Node(i).JobID, RunID: n.RunID(st.DagRunID),
			Attempt: n.Attempt, Started: timeOrNil(n.StartedAt), Ended: timeOrNil(n.EndedAt), Reason: n.Reason}
		for _, p := range g.Parents(i) {
			nd.After = append(nd.After, g.Node(p).ID)
		}
		d.Nodes = append(d.Nodes, nd)
	}
	return d, nil
}

// timeOrNil is t in UTC, or nil for the zero time.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
