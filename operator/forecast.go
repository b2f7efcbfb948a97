package operator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sundialhq/sundial/discovery"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/schedule"
	"github.com/sundialhq/sundial/store"
)

// Due reads the schedule's minute buckets (store.Schedule).
type Due interface {
	ListBucket(ctx context.Context, bucket time.Time, shard int) iter.Seq2[store.DueEntry, error]
}

// Bounds of a forecast.
const (
	// MaxForecastHorizon is the longest forecast: one hour of buckets.
	MaxForecastHorizon = time.Hour
	// DefaultForecastEntries bounds the due entries one forecast reads.
	DefaultForecastEntries = 100_000
	// maxForecastOccurrences bounds the occurrences one forecast counts
	// (a job every second has 3,600 in an hour).
	maxForecastOccurrences = 5_000_000
	// forecastReaders is how many shards are read at once.
	forecastReaders = 8
)

// ErrBadForecast is returned for a query that asks for what no forecast
// gives.
var ErrBadForecast = errors.New("bad forecast query")

// ForecastGroup is what a forecast's rows are.
type ForecastGroup int

// Groups of a forecast.
const (
	ByShard ForecastGroup = iota
	ByTeam
	ByPool
)

// ForecastQuery asks for a forecast.
type ForecastQuery struct {
	// Horizon is how far ahead, a whole number of minutes from one minute
	// to MaxForecastHorizon.
	Horizon time.Duration
	// Group is what the rows are.
	Group ForecastGroup
	// Team, when set, counts only the runs of this team's jobs (a team's
	// principal); empty counts every team's (the cluster admin).
	Team string
	// MaxEntries bounds the due entries read; default
	// DefaultForecastEntries.
	MaxEntries int
}

// Forecast is the runs due per minute of the horizon.
type Forecast struct {
	// Start is the first minute: now truncated to the minute. Column i of
	// every row is the minute Start + i.
	Start time.Time
	// Minutes is each row's length.
	Minutes int
	// Rows holds the runs due per minute by shard, team or pool.
	Rows map[string][]int
	// Truncated: the forecast stopped at a bound (entries read or
	// occurrences counted), so its counts are a lower bound.
	Truncated bool
	// EntriesRead counts the due entries read.
	EntriesRead int
}

// tally is the pure core of a forecast: it counts occurrences into minute
// columns, and stops counting once it reaches its bound of occurrences.
type tally struct {
	start   time.Time
	minutes int
	rows    map[string][]int
	counted int
	limit   int
	full    bool
}

func newTally(start time.Time, minutes, limit int) *tally {
	return &tally{start: start, minutes: minutes, rows: map[string][]int{}, limit: limit}
}

// add counts runs at t in key's row; a time before the first minute counts
// in the first (an overdue entry fires now), one past the last is dropped.
func (t *tally) add(key string, at time.Time, runs int) {
	if t.counted >= t.limit {
		t.full = true
		return
	}
	t.counted++
	i := max(0, int(at.Sub(t.start)/time.Minute))
	if i >= t.minutes {
		return
	}
	row := t.rows[key]
	if row == nil {
		row = make([]int, t.minutes)
		t.rows[key] = row
	}
	row[i] += runs
}

// addSchedule counts a job's pending scheduled entry due at due and the
// later occurrences of its schedule up to the end of the forecast. An
// entry past due (before now) is not counted itself: it has fired, or
// fires late now; its later occurrences are.
func (t *tally) addSchedule(key string, due, now time.Time, s *schedule.Schedule, runs int) {
	if !due.Before(now) {
		t.add(key, due, runs)
	}
	if s == nil {
		return
	}
	end := t.start.Add(time.Duration(t.minutes) * time.Minute)
	for at, ok := s.Next(due); ok && at.Before(end) && !t.full; at, ok = s.Next(at) {
		if !at.Before(now) {
			t.add(key, at, runs)
		}
	}
}

// later reports whether scheduled entry a supersedes b: a newer revision,
// or the same revision due later.
func later(a, b store.DueEntry) bool {
	if a.Revision != b.Revision {
		return a.Revision > b.Revision
	}
	return a.Due.After(b.Due)
}

// Forecast counts the runs due in each minute of the next q.Horizon,
// grouped by shard, team or pool, from the due entries of the horizon's
// buckets: a job's latest scheduled entry (the pending one; those before
// it have fired) counts its occurrence and every later one of its
// schedule in the horizon, from the definition it carries, so no job is
// read for it; a retry, trigger or DAG entry not yet due counts once. Each
// occurrence counts the runs it starts, as PlanApply's load does. Entries
// of another team than q.Team are left out. It reads Shards × minutes
// buckets, forecastReaders shards at once, and at most q.MaxEntries
// entries.
func (o *Operator) Forecast(ctx context.Context, q ForecastQuery) (Forecast, error) {
	if err := o.need("forecast", map[string]bool{"Due": o.cfg.Due != nil, "Jobs": o.cfg.Jobs != nil, "Shards": o.cfg.Shards > 0}); err != nil {
		return Forecast{}, err
	}
	if q.Horizon < time.Minute || q.Horizon > MaxForecastHorizon {
		return Forecast{}, fmt.Errorf("%w: horizon %v: from 1m to %v", ErrBadForecast, q.Horizon, MaxForecastHorizon)
	}
	limit := cmp.Or(q.MaxEntries, DefaultForecastEntries)
	now := o.cfg.Now()
	start := store.BucketOf(now)
	minutes := int(q.Horizon / time.Minute)
	t := newTally(start, minutes, maxForecastOccurrences)
	var (
		mu   sync.Mutex
		read int
		jobs = map[string]forecastJob{} // jobs read for entries without a snapshot
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(forecastReaders)
	for shard := range o.cfg.Shards {
		g.Go(func() error {
			// A job's latest scheduled entry is the one pending: the
			// entries before it have fired and wait in their bucket for
			// its deletion.
			latest := map[string]store.DueEntry{}
			count := func(e store.DueEntry) error {
				spec, s, err := o.forecastSpec(gctx, e, &mu, jobs)
				if err != nil || spec == nil || (q.Team != "" && spec.GetOwnerTeam() != q.Team) {
					return err
				}
				runs, _ := runsPerOccurrence(spec, o.cfg.Members)
				key := forecastKey(q.Group, shard, spec)
				mu.Lock()
				defer mu.Unlock()
				if e.Kind == store.KindScheduled {
					t.addSchedule(key, e.Due, now, s, runs)
				} else {
					t.add(key, e.Due, runs)
				}
				return nil
			}
		read:
			for m := range minutes {
				for e, err := range o.cfg.Due.ListBucket(gctx, start.Add(time.Duration(m)*time.Minute), shard) {
					if err != nil {
						return fmt.Errorf("read bucket %d of shard %d: %w", m, shard, err)
					}
					mu.Lock()
					if read >= limit {
						t.full = true
						mu.Unlock()
						break read
					}
					read++
					mu.Unlock()
					switch {
					case e.Kind == store.KindScheduled:
						if l, ok := latest[e.JobID]; !ok || later(e, l) {
							latest[e.JobID] = e
						}
					case e.Due.Before(now):
						// A retry, trigger or DAG entry past due has fired.
					default:
						if err := count(e); err != nil {
							return err
						}
					}
				}
			}
			for _, e := range latest {
				if err := count(e); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Forecast{}, err
	}
	return Forecast{Start: start, Minutes: minutes, Rows: t.rows, Truncated: t.full, EntriesRead: read}, nil
}

// forecastJob is a job in force as a forecast read it: nil spec when it
// is gone.
type forecastJob struct {
	spec     *sundialv1.JobSpec
	accepted time.Time
}

// forecastSpec is the definition an entry runs and, for a scheduled entry,
// its schedule: from the snapshot the entry carries, else from the job in
// force (read once per job per forecast). A job gone since is nil.
func (o *Operator) forecastSpec(ctx context.Context, e store.DueEntry, mu *sync.Mutex, cache map[string]forecastJob) (*sundialv1.JobSpec, *schedule.Schedule, error) {
	if e.Kind == store.KindScheduled {
		if snap, err := store.DecodeSnapshot(e.Payload); err == nil {
			if spec, err := decodeSpec(snap.Spec); err == nil {
				return spec, compiled(spec, snap.UpdatedAt), nil
			}
		}
	}
	mu.Lock()
	j, seen := cache[e.JobID]
	mu.Unlock()
	if !seen {
		stored, err := o.cfg.Jobs.GetJob(ctx, e.JobID)
		switch {
		case errors.Is(err, store.ErrNotFound), err == nil && stored.Deleted:
		case err != nil:
			return nil, nil, fmt.Errorf("read job %q: %w", e.JobID, err)
		default:
			if spec, err := decodeSpec(stored.Spec); err == nil {
				j = forecastJob{spec: spec, accepted: stored.UpdatedAt}
			}
		}
		mu.Lock()
		cache[e.JobID] = j
		mu.Unlock()
	}
	if j.spec == nil || e.Kind != store.KindScheduled {
		return j.spec, nil, nil
	}
	return j.spec, compiled(j.spec, j.accepted), nil
}

// forecastKey is the row an entry counts in.
func forecastKey(g ForecastGroup, shard int, spec *sundialv1.JobSpec) string {
	switch g {
	case ByTeam:
		return spec.GetOwnerTeam()
	case ByPool:
		return cmp.Or(spec.GetPool(), discovery.DefaultPool)
	}
	return strconv.Itoa(shard)
}
