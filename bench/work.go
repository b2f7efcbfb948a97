package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sundialhq/sundial/internal/telemetry"
)

// ComponentWork is the backend work of one component of the pipeline per
// run of the measured window, counted by its clients' hooks
// (telemetry.WorkCounter): requests sent, not an estimate read off the
// code.
type ComponentWork struct {
	Component string               `json:"component"`
	Total     telemetry.Work       `json:"total"`
	PerRun    telemetry.WorkPerRun `json:"per_run"`
}

// workSource is a pipeline whose components' work can be read.
type workSource interface {
	Work(ctx context.Context) (map[string]telemetry.Work, error)
}

// workPerRun divides the work done between before and after among runs,
// by component (in name order), with the sum of all as "all" last. A
// component whose counts went down was restarted in between (a killed
// subprocess): its work is what it counted since.
func workPerRun(before, after map[string]telemetry.Work, runs float64) []ComponentWork {
	names := make([]string, 0, len(after))
	for n := range after {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []ComponentWork
	var all telemetry.Work
	for _, n := range names {
		d := after[n].Sub(before[n])
		if negative(d) {
			d = after[n]
		}
		all = all.Add(d)
		out = append(out, ComponentWork{Component: n, Total: d, PerRun: d.Per(runs)})
	}
	if len(out) > 1 {
		out = append(out, ComponentWork{Component: "all", Total: all, PerRun: all.Per(runs)})
	}
	return out
}

// scrapeWork reads sundial_backend_requests_total from a process's
// /metrics.
func scrapeWork(ctx context.Context, url string) (telemetry.Work, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return telemetry.Work{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return telemetry.Work{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return telemetry.Work{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	series, err := parseWorkSeries(resp.Body)
	if err != nil {
		return telemetry.Work{}, fmt.Errorf("GET %s: %w", url, err)
	}
	if len(series) == 0 {
		return telemetry.Work{}, fmt.Errorf("GET %s: no %s series", url, telemetry.WorkMetricName)
	}
	return telemetry.WorkFromSeries(series)
}

// parseWorkSeries reads the lines of sundial_backend_requests_total of a
// Prometheus text exposition (label order as the client library writes
// them, any order accepted).
func parseWorkSeries(r io.Reader) ([]telemetry.WorkSeries, error) {
	var out []telemetry.WorkSeries
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	prefix := telemetry.WorkMetricName + "{"
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		s := telemetry.WorkSeries{}
		for l := range strings.SplitSeq(labels, ",") {
			k, v, _ := strings.Cut(l, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "backend":
				s.Backend = v
			case "kind":
				s.Kind = v
			}
		}
		f, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		s.Value = f
		out = append(out, s)
	}
	return out, sc.Err()
}

// negative says whether any count of w is below zero.
func negative(w telemetry.Work) bool {
	for _, v := range []int64{w.CassandraReads, w.CassandraWrites, w.CassandraLWT, w.CassandraBatches, w.CassandraBatchRows,
		w.KafkaProduceRequests, w.KafkaRecords, w.KafkaBatches, w.KafkaFetchRequests, w.KafkaOtherRequests,
		w.RedisRoundTrips, w.RedisCommands} {
		if v < 0 {
			return true
		}
	}
	return false
}
