package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// DagWorkload is the DAGs of a chaos run: Count DAGs, each a chain of
// Nodes inline jobs (n0 -> n1 -> ...) calling the counting downstream,
// firing every Every from Start, their phases spread evenly over Every.
// Their node runs carry the node run id as idempotency key, so the
// downstream counts their effects with the jobs'.
type DagWorkload struct {
	// Prefix starts every DAG id ("<prefix>.dag-<i>").
	Prefix string
	Count  int
	Nodes  int
	Every  time.Duration
	// Start is the first due time of DAG 0; DAG i starts i×Every/Count
	// later.
	Start time.Time
	// URL of the counting downstream.
	URL string
}

// Validate reports every bad field.
func (w DagWorkload) Validate() error {
	var errs []error
	if w.Prefix == "" {
		errs = append(errs, errors.New("dag workload: prefix: required"))
	}
	if w.Count < 1 || w.Nodes < 1 || w.Nodes > 20 {
		errs = append(errs, fmt.Errorf("dag workload: count %d, nodes %d: need at least one DAG and 1 to 20 nodes", w.Count, w.Nodes))
	}
	if w.Every < time.Second || w.Every%time.Millisecond != 0 {
		errs = append(errs, fmt.Errorf("dag workload: every %s: at least 1s, whole milliseconds", w.Every))
	}
	if w.URL == "" || w.Start.IsZero() {
		errs = append(errs, errors.New("dag workload: url and start: required"))
	}
	return errors.Join(errs...)
}

// DagID is the id of DAG i.
func (w DagWorkload) DagID(i int) string {
	return dagTeam + "." + w.Prefix + ".dag-" + strconv.Itoa(i)
}

// dagTeam owns the workload's DAGs: ids are <owner_team>.<name>.
const dagTeam = "loadgen"

// first is the first due time of DAG i.
func (w DagWorkload) first(i int) time.Time {
	phase := time.Duration(int64(i) * w.Every.Milliseconds() / int64(w.Count) * int64(time.Millisecond))
	return w.Start.Truncate(time.Millisecond).Add(phase)
}

// Spec is the definition of DAG i: missed occurrences all fire (FIRE_ALL),
// so an occurrence missed while a backend was down is run late, not lost.
func (w DagWorkload) Spec(i int) *sundialv1.DagSpec {
	spec := &sundialv1.DagSpec{
		Id: w.DagID(i), OwnerTeam: dagTeam, Labels: map[string]string{"loadgen": w.Prefix},
		Description: "chaos bench DAG",
		Schedule: &sundialv1.Schedule{TimeZone: "UTC", MisfirePolicy: sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ALL,
			Kind: &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: durationpb.New(w.Every),
				Anchor: &sundialv1.Interval_Start{Start: timestamppb.New(w.first(i))}}}},
	}
	for n := range w.Nodes {
		node := &sundialv1.DagNode{Id: "n" + strconv.Itoa(n), Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
			Timeout: durationpb.New(10 * time.Second),
			Target:  &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{Method: "POST", Url: w.URL}}},
		}}}
		if n > 0 {
			node.Parents = []string{"n" + strconv.Itoa(n-1)}
		}
		spec.Nodes = append(spec.Nodes, node)
	}
	return spec
}

// Expected returns the ids of the DAG runs due in [from, to), by DAG.
func (w DagWorkload) Expected(from, to time.Time) map[string][]string {
	out := map[string][]string{}
	for i := range w.Count {
		id := w.DagID(i)
		out[id] = nil
		for t := w.first(i); t.Before(to); t = t.Add(w.Every) {
			if !t.Before(from) {
				out[id] = append(out[id], id+"@"+strconv.FormatInt(t.UnixMilli(), 10))
			}
		}
	}
	return out
}

// Apply produces every DAG definition to sundial.jobs, as `sundial dag
// apply` does (keyed by id, header sundial-kind: dag), and waits for
// Kafka's acknowledgement.
func (w DagWorkload) Apply(ctx context.Context, brokers []string, names topics.Names) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(names.Jobs()))
	if err != nil {
		return fmt.Errorf("dags: %w", err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, 0, w.Count)
	for i := range w.Count {
		v, err := sundialv1.EncodingProtobuf.Marshal(w.Spec(i))
		if err != nil {
			return fmt.Errorf("dags: %s: %w", w.DagID(i), err)
		}
		recs = append(recs, &kgo.Record{Key: []byte(w.DagID(i)), Value: v, Headers: []kgo.RecordHeader{
			{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindDag)},
			{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeProtobuf)},
		}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("dags: produce: %w", err)
	}
	return nil
}

// dagStore is what the bench reads of DAGs.
type dagStore interface {
	GetDag(ctx context.Context, id string) (store.Dag, error)
	ListDagRuns(ctx context.Context, dagID string, limit int) ([]store.DagRun, error)
}

// WaitStored waits until the DAG engines stored every definition.
func (w DagWorkload) WaitStored(ctx context.Context, st dagStore) error {
	for i := 0; i < w.Count; {
		_, err := st.GetDag(ctx, w.DagID(i))
		switch {
		case err == nil:
			i++
			continue
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("dags: read %s: %w", w.DagID(i), err)
		}
		if !sleepUntil(ctx, time.Now().Add(200*time.Millisecond)) {
			return fmt.Errorf("dags: %d of %d definitions stored: %w", i, w.Count, ctx.Err())
		}
	}
	return nil
}

// DagCounts is what became of the DAG runs due in the window.
type DagCounts struct {
	DAGs     int   `json:"dags"`
	Nodes    int   `json:"nodes_per_dag"`
	EveryMs  int64 `json:"every_ms"`
	Expected int   `json:"expected"`
	// Succeeded: expected runs that ended with every node succeeded.
	Succeeded int `json:"succeeded"`
	// Failed: expected runs that ended otherwise (failed, timed out).
	Failed int `json:"failed"`
	// Lost: expected runs missing or still running after the drain.
	Lost int `json:"lost"`
	// Unexpected: runs due in the window the workload did not schedule.
	Unexpected int `json:"unexpected"`
	// EngineLag is how many records of sundial.events the DAG engines'
	// group had not yet committed when the counting ended (-1: unknown):
	// the engines read every run event, so a lag there delays every DAG
	// run's next node.
	EngineLag int64 `json:"engine_events_lag"`
	// Examples of runs that were lost, failed or unexpected, with status.
	Examples []string `json:"examples,omitempty"`
}

// CountDagRuns compares the stored runs (any due time) with the expected
// run ids of one DAG each, due in [from, to). It is pure.
func CountDagRuns(expected map[string][]string, stored map[string][]store.DagRun, from, to time.Time) DagCounts {
	var c DagCounts
	example := func(s string) {
		if len(c.Examples) < 10 {
			c.Examples = append(c.Examples, s)
		}
	}
	ids := make([]string, 0, len(expected))
	for id := range expected {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, dag := range ids {
		byID := map[string]store.DagRun{}
		for _, r := range stored[dag] {
			byID[r.ID] = r
		}
		want := map[string]bool{}
		for _, id := range expected[dag] {
			want[id] = true
			c.Expected++
			r, ok := byID[id]
			switch {
			case !ok:
				c.Lost++
				example(id + ": never started")
			case r.Active:
				c.Lost++
				example(fmt.Sprintf("%s: still %s after the drain (%s)", id, r.Status, r.Summary))
			case r.Status == "succeeded":
				c.Succeeded++
			default:
				c.Failed++
				example(fmt.Sprintf("%s: %s (%s)", id, r.Status, r.Summary))
			}
		}
		for _, r := range stored[dag] {
			if !want[r.ID] && !r.Due.Before(from) && r.Due.Before(to) {
				c.Unexpected++
				example(fmt.Sprintf("%s: not scheduled by the workload (%s)", r.ID, r.Status))
			}
		}
	}
	return c
}

// ReadDagRuns reads the stored runs of every DAG of the workload.
func (w DagWorkload) ReadDagRuns(ctx context.Context, st dagStore, perDag int) (map[string][]store.DagRun, error) {
	out := map[string][]store.DagRun{}
	for i := range w.Count {
		runs, err := st.ListDagRuns(ctx, w.DagID(i), perDag)
		if err != nil {
			return nil, fmt.Errorf("dags: list runs of %s: %w", w.DagID(i), err)
		}
		out[w.DagID(i)] = runs
	}
	return out, nil
}

// String is one line about the DAG runs.
func (c DagCounts) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d expected, %d succeeded, %d failed, %d lost, %d unexpected; DAG engines' lag on sundial.events at the end: %d records",
		c.Expected, c.Succeeded, c.Failed, c.Lost, c.Unexpected, c.EngineLag)
	return b.String()
}

// groupLag is the records of topic the consumer group has not committed,
// summed over the partitions.
func groupLag(ctx context.Context, brokers []string, group, topic string) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	lags, err := kadm.NewClient(cl).Lag(ctx, group)
	if err != nil {
		return 0, fmt.Errorf("lag of %s: %w", group, err)
	}
	l, ok := lags[group]
	if !ok {
		return 0, fmt.Errorf("lag of %s: no answer", group)
	}
	if err := l.Error(); err != nil {
		return 0, fmt.Errorf("lag of %s: %w", group, err)
	}
	var n int64
	for _, p := range l.Lag[topic] {
		n += p.Lag
	}
	return n, nil
}
