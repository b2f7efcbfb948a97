package loadgen

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// CronPeriod is the period of the cron jobs the workload defines: each is
// "S M * * * *" (seconds field first), firing once an hour at minute M,
// second S, and the 3,600 (M, S) pairs are dealt out evenly.
const CronPeriod = time.Hour

// MaxJobs bounds Workload.Jobs.
const MaxJobs = 1_000_000

// Mix is the share of each schedule kind among the jobs of a steady
// workload. The shares are non-negative and add up to 1.
type Mix struct {
	// Interval jobs ("every P", phases spread evenly over P) carry the rate
	// the other kinds leave.
	Interval float64 `json:"interval"`
	// Cron jobs fire hourly at a second of the hour of their own (see
	// CronPeriod).
	Cron float64 `json:"cron"`
	// At jobs are one-offs whose instants are spread evenly over the
	// measured window.
	At float64 `json:"at"`
}

// DefaultMix is mostly interval jobs, with some cron and one-off jobs.
var DefaultMix = Mix{Interval: 0.85, Cron: 0.10, At: 0.05}

// ParseMix reads "interval=0.85,cron=0.1,at=0.05". Kinds left out get 0.
func ParseMix(s string) (Mix, error) {
	var m Mix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return Mix{}, fmt.Errorf("mix %q: %q is not kind=share", s, part)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return Mix{}, fmt.Errorf("mix %q: share of %s: %w", s, k, err)
		}
		switch strings.TrimSpace(k) {
		case "interval":
			m.Interval = f
		case "cron":
			m.Cron = f
		case "at":
			m.At = f
		default:
			return Mix{}, fmt.Errorf("mix %q: kind %q: want interval, cron or at", s, k)
		}
	}
	return m, m.validate()
}

func (m Mix) validate() error {
	var errs []error
	for _, s := range []struct {
		k string
		v float64
	}{{"interval", m.Interval}, {"cron", m.Cron}, {"at", m.At}} {
		if s.v < 0 || math.IsNaN(s.v) {
			errs = append(errs, fmt.Errorf("mix: %s share %v: must not be negative", s.k, s.v))
		}
	}
	if sum := m.Interval + m.Cron + m.At; math.Abs(sum-1) > 1e-9 {
		errs = append(errs, fmt.Errorf("mix: shares add up to %v: must add up to 1", sum))
	}
	return errors.Join(errs...)
}

// Target says what the runs of the workload's jobs do. Exactly one field is
// set.
type Target struct {
	// URL of the counting downstream (HttpTarget, POST).
	URL string
	// Handler is the name of an in-process handler of the runners.
	Handler string
}

// Workload describes the jobs a load generator defines and which runs it
// therefore expects. It is pure: the same Workload gives the same job
// definitions and the same expected runs.
type Workload struct {
	// Prefix starts every job id ("<prefix>-<index>"): unique per run, so a
	// run never counts another run's events. 1 to 64 characters from
	// [A-Za-z0-9._:-]. Required.
	Prefix string
	// Jobs is the number of job definitions, 1 to MaxJobs.
	Jobs int
	// Rate is the planned triggers/s of a steady workload. Required unless
	// HerdAt is set.
	Rate float64
	// Start is the start of the measured window: the one-off jobs of a
	// steady workload are spread over [Start, Start+Duration). Required for
	// a steady workload with At jobs.
	Start time.Time
	// Duration is the length of the measured window.
	Duration time.Duration
	// NotBefore, when set, anchors each interval job with a start instead
	// of an offset: its first grid point at or after NotBefore. The grid is
	// the same (epoch + offset + k*period), but nothing fires before
	// NotBefore, so a large workload can be registered without the jobs
	// registered first already firing. Zero: offset anchors.
	NotBefore time.Time
	// Mix of schedule kinds of a steady workload. Default DefaultMix.
	Mix Mix
	// HerdAt, when set, makes a herd: every job is a one-off due at this
	// instant (millisecond precision), and Rate and Mix are not used.
	HerdAt time.Time
	// Splay, for a herd, asks for its runs to be spread over this window
	// after the herd's instant (JobSpec.splay, at most jobspec.MaxSplay).
	// Splay applies to recurring schedules only, so a splayed herd is of
	// cron jobs that fall due once, at HerdAt rounded up to a whole second
	// (a six-field expression naming its second, minute, hour, day and
	// month), instead of one-offs.
	Splay time.Duration
	// Target of every job. Required.
	Target Target
	// Team is the owner_team of the jobs. Default "loadgen".
	Team string
	// PayloadBytes is the size of each job's payload, carried in every run
	// record. Default 64.
	PayloadBytes int
	// Misfire is every job's misfire policy; unspecified leaves the
	// schedule's default (FIRE_ONCE). A workload that counts every missed
	// occurrence as lost, across backend outages, needs FIRE_ALL: FIRE_ONCE
	// drops all but the latest occurrence missed during an outage by design.
	Misfire sundialv1.MisfirePolicy
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// Plan is a validated workload with the numbers derived from it.
type Plan struct {
	Workload
	// Counts of jobs per kind. Jobs are numbered interval jobs first, then
	// cron, then at: [0, IntervalJobs) are interval jobs, and so on.
	IntervalJobs, CronJobs, AtJobs int
	// Period of the interval jobs, whole milliseconds.
	Period time.Duration
	// PlannedRate is the triggers/s the jobs produce: IntervalJobs/Period +
	// CronJobs/CronPeriod + AtJobs/Duration (herd: 0).
	PlannedRate float64
}

// NewPlan validates w, fills its defaults and derives the plan. It reports
// every bad field.
func NewPlan(w Workload) (*Plan, error) {
	if w.Team == "" {
		w.Team = "loadgen"
	}
	if w.PayloadBytes == 0 {
		w.PayloadBytes = 64
	}
	if w.Mix == (Mix{}) {
		w.Mix = DefaultMix
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("workload: "+format, args...)) }
	if !prefixRE.MatchString(w.Prefix) {
		bad("prefix %q: want 1 to 64 characters from [A-Za-z0-9._:-]", w.Prefix)
	}
	if w.Jobs < 1 || w.Jobs > MaxJobs {
		bad("jobs %d: must be in [1, %d]", w.Jobs, MaxJobs)
	}
	if (w.Target.URL == "") == (w.Target.Handler == "") {
		bad("target: set exactly one of URL and Handler")
	}
	if w.PayloadBytes < 0 || w.PayloadBytes > 64<<10 {
		bad("payload bytes %d: must be in [0, 65536]", w.PayloadBytes)
	}
	p := &Plan{Workload: w}
	if !w.HerdAt.IsZero() {
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		p.HerdAt = w.HerdAt.Truncate(time.Millisecond).UTC()
		p.AtJobs = w.Jobs
		if w.Splay > 0 {
			if err := checkSplay(w.Splay); err != nil {
				return nil, err
			}
			// A cron fires on whole seconds.
			if t := p.HerdAt.Truncate(time.Second); !t.Equal(p.HerdAt) {
				p.HerdAt = t.Add(time.Second)
			}
		}
		return p, nil
	}
	if w.Splay != 0 {
		bad("splay %s: only a herd is splayed", w.Splay)
	}
	if err := w.Mix.validate(); err != nil {
		errs = append(errs, fmt.Errorf("workload: %w", err))
	}
	if !(w.Rate > 0) {
		bad("rate %v: must be positive", w.Rate)
	}
	if w.Duration < time.Second {
		bad("duration %s: must be at least 1s", w.Duration)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p.CronJobs = int(math.Round(float64(w.Jobs) * w.Mix.Cron))
	p.AtJobs = int(math.Round(float64(w.Jobs) * w.Mix.At))
	if p.CronJobs+p.AtJobs > w.Jobs {
		p.AtJobs = w.Jobs - p.CronJobs
	}
	p.IntervalJobs = w.Jobs - p.CronJobs - p.AtJobs
	if p.AtJobs > 0 && w.Start.IsZero() {
		bad("start: required when the mix has at jobs")
	}
	other := float64(p.CronJobs)/CronPeriod.Seconds() + float64(p.AtJobs)/w.Duration.Seconds()
	if p.IntervalJobs > 0 {
		left := w.Rate - other
		if left <= 0 {
			bad("rate %v/s: the cron and at jobs alone make %.1f/s; lower their share or raise the rate", w.Rate, other)
		} else {
			p.Period = time.Duration(math.Round(float64(p.IntervalJobs)/left*1000)) * time.Millisecond
			if p.Period < time.Second {
				bad("rate %v/s with %d interval jobs needs a period of %s: intervals are at least 1s; define more jobs", w.Rate, p.IntervalJobs, p.Period)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p.PlannedRate = other
	if p.IntervalJobs > 0 {
		p.PlannedRate += float64(p.IntervalJobs) / p.Period.Seconds()
	}
	return p, nil
}

// Herd reports whether the plan is a herd.
func (p *Plan) Herd() bool { return !p.HerdAt.IsZero() }

// JobID is the id of job i.
func (p *Plan) JobID(i int) string { return p.idPrefix() + strconv.Itoa(i) }

// idPrefix starts every job id of the workload: ids are
// <owner_team>.<name>, so the team comes first.
func (p *Plan) idPrefix() string { return p.Team + "." + p.Prefix + "-" }

// RunKey identifies a run of the workload compactly: the job's index and the
// due time in unix milliseconds.
type RunKey struct {
	Job   uint32 `json:"job"`
	DueMs int64  `json:"due_ms"`
}

// ParseRunID reads a run id of this workload ("<prefix>-<i>@<ms>"); ok is
// false for the runs of other jobs.
func (p *Plan) ParseRunID(runID string) (RunKey, bool) {
	rest, ok := strings.CutPrefix(runID, p.idPrefix())
	if !ok {
		return RunKey{}, false
	}
	idx, ms, ok := strings.Cut(rest, "@")
	if !ok {
		return RunKey{}, false
	}
	i, err := strconv.ParseUint(idx, 10, 32)
	if err != nil || int(i) >= p.Jobs {
		return RunKey{}, false
	}
	due, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return RunKey{}, false
	}
	return RunKey{Job: uint32(i), DueMs: due}, true
}

// Kind names the schedule kind of job i: "interval", "cron" or "at".
func (p *Plan) Kind(i int) string {
	switch {
	case i < p.IntervalJobs:
		return "interval"
	case i < p.IntervalJobs+p.CronJobs:
		return "cron"
	}
	return "at"
}

// intervalOffset is the phase of interval job i: the jobs are spread evenly
// over the period.
func (p *Plan) intervalOffset(i int) time.Duration {
	ms := p.Period.Milliseconds()
	return time.Duration(int64(i)*ms/int64(p.IntervalJobs)) * time.Millisecond
}

// intervalStart is the first due time of interval job i, unix ms: its
// first grid point at or after NotBefore (the minimum when NotBefore is
// zero).
func (p *Plan) intervalStart(i int) int64 {
	if p.NotBefore.IsZero() {
		return math.MinInt64
	}
	per, off := p.Period.Milliseconds(), p.intervalOffset(i).Milliseconds()
	return off + ceilDiv(p.NotBefore.UnixMilli()-off, per)*per
}

// cronPhase is the second of the hour cron job c (counted among the cron
// jobs) fires at.
func cronPhase(c int) int { return c % 3600 }

// atTime is the instant of at job a (counted among the at jobs).
func (p *Plan) atTime(a int) time.Time {
	if p.Herd() {
		return p.HerdAt
	}
	off := time.Duration(int64(a) * p.Duration.Milliseconds() / int64(p.AtJobs))
	return p.Start.Truncate(time.Millisecond).Add(off * time.Millisecond).UTC()
}

// Spec returns the definition of job i.
func (p *Plan) Spec(i int) *sundialv1.JobSpec {
	spec := &sundialv1.JobSpec{
		Id:          p.JobID(i),
		OwnerTeam:   p.Team,
		Labels:      map[string]string{"loadgen": p.Prefix},
		Payload:     payload(i, p.PayloadBytes),
		Timeout:     durationpb.New(10 * time.Second),
		Description: "load generator job",
	}
	if p.Target.URL != "" {
		spec.Target = &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{Method: "POST", Url: p.Target.URL}}}
	} else {
		spec.Target = &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: p.Target.Handler}}}
	}
	switch {
	case i < p.IntervalJobs:
		iv := &sundialv1.Interval{Every: durationpb.New(p.Period)}
		if p.NotBefore.IsZero() {
			iv.Anchor = &sundialv1.Interval_Offset{Offset: durationpb.New(p.intervalOffset(i))}
		} else {
			iv.Anchor = &sundialv1.Interval_Start{Start: timestamppb.New(time.UnixMilli(p.intervalStart(i)))}
		}
		spec.Schedule = &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_Interval{Interval: iv}}
	case i < p.IntervalJobs+p.CronJobs:
		ph := cronPhase(i - p.IntervalJobs)
		spec.Schedule = &sundialv1.Schedule{
			TimeZone: "UTC",
			Kind:     &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: fmt.Sprintf("%d %d * * * *", ph%60, ph/60)}},
			Dst: &sundialv1.DstPolicy{
				Nonexistent: sundialv1.NonexistentTimePolicy_NONEXISTENT_TIME_POLICY_SKIP,
				Ambiguous:   sundialv1.AmbiguousTimePolicy_AMBIGUOUS_TIME_POLICY_FIRST,
			},
		}
	case p.Herd() && p.Splay > 0:
		// Once a year, at the herd's instant; splayed.
		t := p.HerdAt
		spec.Schedule = &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{
			Expression: fmt.Sprintf("%d %d %d %d %d *", t.Second(), t.Minute(), t.Hour(), t.Day(), int(t.Month())),
		}}}
		spec.Splay = durationpb.New(p.Splay)
	default:
		spec.Schedule = &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_At{At: &sundialv1.At{
			Time: timestamppb.New(p.atTime(i - p.IntervalJobs - p.CronJobs)),
		}}}
	}
	spec.Schedule.MisfirePolicy = p.Misfire
	return spec
}

// payload is a deterministic filler of n bytes.
func payload(i, n int) []byte {
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	x := uint32(i)*2654435761 + 1
	for k := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[k] = 'a' + byte(x%26)
	}
	return b
}

// Expected yields every run the workload's schedules make due in
// [from, to), computed here from the workload's own arithmetic (not with the
// scheduler's schedule package, so a bug there shows up as lost or
// unexpected runs instead of being repeated here).
func (p *Plan) Expected(from, to time.Time) iter.Seq[RunKey] {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	return func(yield func(RunKey) bool) {
		if p.IntervalJobs > 0 {
			per := p.Period.Milliseconds()
			for i := range p.IntervalJobs {
				off := p.intervalOffset(i).Milliseconds()
				// The first k with off + k*per >= lo and >= the job's start.
				k := ceilDiv(max(lo, p.intervalStart(i))-off, per)
				for t := off + k*per; t < hi; t += per {
					if !yield(RunKey{Job: uint32(i), DueMs: t}) {
						return
					}
				}
			}
		}
		hour := CronPeriod.Milliseconds()
		for c := range p.CronJobs {
			off := int64(cronPhase(c)) * 1000
			k := ceilDiv(lo-off, hour)
			for t := off + k*hour; t < hi; t += hour {
				if !yield(RunKey{Job: uint32(p.IntervalJobs + c), DueMs: t}) {
					return
				}
			}
		}
		for a := range p.AtJobs {
			if t := p.atTime(a).UnixMilli(); t >= lo && t < hi {
				if !yield(RunKey{Job: uint32(p.IntervalJobs + p.CronJobs + a), DueMs: t}) {
					return
				}
			}
		}
	}
}

// NextDue is job i's first due time at or after t, in unix ms; false when
// it has none (a one-off due before t).
func (p *Plan) NextDue(i int, t time.Time) (int64, bool) {
	lo := t.UnixMilli()
	switch {
	case i < p.IntervalJobs:
		per, off := p.Period.Milliseconds(), p.intervalOffset(i).Milliseconds()
		return off + ceilDiv(max(lo, p.intervalStart(i))-off, per)*per, true
	case i < p.IntervalJobs+p.CronJobs:
		hour, off := CronPeriod.Milliseconds(), int64(cronPhase(i-p.IntervalJobs))*1000
		return off + ceilDiv(lo-off, hour)*hour, true
	}
	at := p.atTime(i - p.IntervalJobs - p.CronJobs).UnixMilli()
	return at, at >= lo
}

// ceilDiv is the ceiling of a/b for b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a > 0) {
		q++
	}
	return q
}

// checkSplay checks a herd's splay window: whole milliseconds up to
// jobspec.MaxSplay, as JobSpec.splay.
func checkSplay(d time.Duration) error {
	if d%time.Millisecond != 0 || d > jobspec.MaxSplay {
		return fmt.Errorf("workload: splay %s: must be whole milliseconds up to %s", d, jobspec.MaxSplay)
	}
	return nil
}
