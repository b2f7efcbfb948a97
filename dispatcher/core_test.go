package dispatcher

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

// The core's scenarios live in testdata/core, one file per behaviour, in
// cockroachdb/datadriven's format: a command with arguments, input lines,
// "----", and the expected output. Times are wall times of 2026-01-01 UTC
// ("10:00:05" or "10:00:05.250"). An entry line reads
// "job due [kind=retry] [run=job@ms] [attempt=2] [rev=N]". Rewrite the expected
// outputs after a deliberate change with: go test ./dispatcher -run TestCore -rewrite
//
// Commands:
//
//	init floor=T [lookahead=10s] [prepare=0s] [threshold=1s] [inflight=N] [backlog=N] [dedupe=2m]
//	poll now=T               -> load/fire/deadline lines
//	loaded now=T  <entries>  -> a page of the bucket being read
//	load-done
//	wake now=T offset=N <entry> -> "taken" or "ignored"
//	wake-invalid offset=N
//	insert now=T [late=true] <entry> -> "taken" or "ignored"
//	done [covered=T] <entries> -> firings carried out
//	failed retry=T <entries> -> firings to try again at T
//	watermark now=T          -> the watermark
//	commit                   -> the commit point
//	stats now=T              -> entries, in flight, oldest overdue
//	room now=T               -> "room" when the core takes another page
func TestCore(t *testing.T) {
	t.Parallel()
	datadriven.Walk(t, "testdata/core", func(t *testing.T, path string) {
		t.Parallel()
		var c *shardCore
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "init" && c == nil {
				t.Fatalf("%s: init first", d.Pos)
			}
			switch d.Cmd {
			case "init":
				cfg := coreConfig{
					Floor:            parseClock(t, arg(t, d, "floor", "")),
					Lookahead:        parseDuration(t, arg(t, d, "lookahead", "10s")),
					PrepareAhead:     parseDuration(t, arg(t, d, "prepare", "0s")),
					MisfireThreshold: parseDuration(t, arg(t, d, "threshold", "1s")),
					MaxInflight:      atoi(t, arg(t, d, "inflight", "100")),
					MaxBacklog:       atoi(t, arg(t, d, "backlog", "1000")),
					MaxHeld:          atoi(t, arg(t, d, "held", "100000")),
					DedupeWindow:     parseDuration(t, arg(t, d, "dedupe", "2m")),
				}
				c = newShardCore(cfg)
				return ""
			case "poll":
				return formatReady(c.Poll(now(t, d)))
			case "loaded":
				c.Loaded(now(t, d), entries(t, d.Input))
				return ""
			case "limits":
				c.SetLimits(atoi(t, arg(t, d, "inflight", "")), atoi(t, arg(t, d, "held", "")))
				return ""
			case "room":
				if c.Room(now(t, d)) {
					return "room"
				}
				return "full"
			case "load-done":
				c.LoadDone()
				return ""
			case "wake":
				es := entries(t, d.Input)
				require.Len(t, es, 1, d.Pos)
				return taken(c.Wake(now(t, d), es[0], int64(atoi(t, arg(t, d, "offset", ""))), 0))
			case "wake-invalid":
				c.WakeInvalid(int64(atoi(t, arg(t, d, "offset", ""))), 0)
				return ""
			case "insert":
				es := entries(t, d.Input)
				require.Len(t, es, 1, d.Pos)
				return taken(c.Insert(now(t, d), es[0], arg(t, d, "late", "false") == "true"))
			case "done":
				var covered time.Time
				if v := arg(t, d, "covered", "-"); v != "-" {
					covered = parseClock(t, v)
				}
				for _, e := range entries(t, d.Input) {
					c.Done(e, covered)
				}
				return ""
			case "failed":
				retry := parseClock(t, arg(t, d, "retry", ""))
				for _, e := range entries(t, d.Input) {
					c.Failed(e, retry)
				}
				return ""
			case "watermark":
				return clock(c.Watermark(now(t, d)))
			case "commit":
				o, _, ok := c.Commit()
				if !ok {
					return "none"
				}
				return fmt.Sprintf("offset %d", o)
			case "stats":
				s := c.Stats(now(t, d))
				return fmt.Sprintf("entries %d (chained %d), in flight %d, oldest overdue %s, remembered %d, chains %d, covered %d",
					s.Entries, s.Chained, s.Inflight, clock(s.OldestOverdue), s.Fired, s.Chains, s.Covered)
			}
			t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			return ""
		})
	})
}

var day = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func parseClock(t *testing.T, s string) time.Time {
	t.Helper()
	for _, layout := range []string{"15:04:05.000", "15:04:05", "15:04"} {
		if c, err := time.Parse(layout, s); err == nil {
			return day.Add(c.Sub(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)))
		}
	}
	t.Fatalf("bad time %q", s)
	return time.Time{}
}

func clock(t time.Time) string {
	switch {
	case t.IsZero():
		return "none"
	case t.Second() == 0 && t.Nanosecond() == 0:
		return t.Format("15:04")
	case t.Nanosecond() == 0:
		return t.Format("15:04:05")
	}
	return t.Format("15:04:05.000")
}

func parseDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	require.NoError(t, err)
	return d
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "number %q", s)
	return n
}

func arg(t *testing.T, d *datadriven.TestData, name, def string) string {
	t.Helper()
	for _, a := range d.CmdArgs {
		if a.Key == name {
			return a.Vals[0]
		}
	}
	if def == "" {
		t.Fatalf("%s: %s: argument %s required", d.Pos, d.Cmd, name)
	}
	return def
}

func now(t *testing.T, d *datadriven.TestData) time.Time {
	return parseClock(t, arg(t, d, "now", ""))
}

func taken(ok bool) string {
	if ok {
		return "taken"
	}
	return "ignored"
}

// entries parses "job due [kind=k] [run=id] [attempt=n]" lines.
func entries(t *testing.T, input string) []store.DueEntry {
	t.Helper()
	var out []store.DueEntry
	for line := range strings.Lines(input) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		require.GreaterOrEqual(t, len(f), 2, "entry line %q", line)
		due := parseClock(t, f[1])
		e := store.DueEntry{Due: due, JobID: f[0], Kind: store.KindScheduled, RunID: store.RunID(f[0], due), Attempt: 1}
		for _, opt := range f[2:] {
			k, v, _ := strings.Cut(opt, "=")
			switch k {
			case "kind":
				e.Kind = store.Kind(v)
			case "run":
				e.RunID = v
			case "attempt":
				e.Attempt = atoi(t, v)
			case "rev":
				e.Revision = int64(atoi(t, v))
			default:
				t.Fatalf("entry option %q", opt)
			}
		}
		out = append(out, e)
	}
	return out
}

func formatEntry(e store.DueEntry) string {
	s := e.JobID + " " + clock(e.Due)
	if e.Kind != store.KindScheduled {
		s += " kind=" + string(e.Kind)
	}
	if e.Attempt != 1 {
		s += " attempt=" + strconv.Itoa(e.Attempt)
	}
	return s
}

func formatReady(r ready) string {
	var b strings.Builder
	if !r.Load.IsZero() {
		fmt.Fprintf(&b, "load %s\n", clock(r.Load))
	}
	for _, d := range r.Dropped {
		fmt.Fprintf(&b, "drop %s (%s)\n", formatEntry(d.Entry), d.Reason)
	}
	for _, f := range r.Fire {
		b.WriteString("fire " + formatEntry(f.Entry))
		if !f.At.Equal(f.Entry.Due) {
			b.WriteString(" at=" + clock(f.At))
		}
		if f.Late {
			b.WriteString(" late")
		}
		if f.Failures > 0 {
			fmt.Fprintf(&b, " failures=%d", f.Failures)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "deadline %s", clock(r.Deadline))
	return b.String()
}
