package promcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// Query is one PromQL expression and where it comes from.
type Query struct {
	// File is the dashboard or rule file.
	File string
	// Where names it in the file: the panel title, the recording rule's
	// series or the alert's name.
	Where string
	// Expr is the expression as written (with Grafana's variables).
	Expr string
}

func (q Query) String() string {
	return fmt.Sprintf("%s: %s: %s", filepath.Base(q.File), q.Where, q.Expr)
}

// DashboardQueries returns the queries of every panel (rows' nested panels
// included) of the Grafana dashboards matching glob.
func DashboardQueries(glob string) ([]Query, error) {
	files, err := filepath.Glob(glob)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no dashboard matches %s", glob)
	}
	var out []Query
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d struct {
			Panels []json.RawMessage `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", f, err)
		}
		qs, err := panelQueries(f, d.Panels)
		if err != nil {
			return nil, err
		}
		out = append(out, qs...)
	}
	return out, nil
}

func panelQueries(file string, panels []json.RawMessage) ([]Query, error) {
	var out []Query
	for _, raw := range panels {
		var p struct {
			Title   string                  `json:"title"`
			Targets []struct{ Expr string } `json:"targets"`
			Panels  []json.RawMessage       `json:"panels"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("dashboard %s: panel: %w", file, err)
		}
		for _, t := range p.Targets {
			out = append(out, Query{File: file, Where: p.Title, Expr: t.Expr})
		}
		nested, err := panelQueries(file, p.Panels)
		if err != nil {
			return nil, err
		}
		out = append(out, nested...)
	}
	return out, nil
}

// Rules is what the rule files define.
type Rules struct {
	// Queries are the expressions of every recording and alert rule.
	Queries []Query
	// Recorded are the series the recording rules write.
	Recorded []string
	// Alerts are the alert names.
	Alerts []string
}

// RuleQueries reads the Prometheus rule files matching glob.
func RuleQueries(glob string) (Rules, error) {
	files, err := filepath.Glob(glob)
	if err != nil {
		return Rules{}, err
	}
	if len(files) == 0 {
		return Rules{}, fmt.Errorf("no rule file matches %s", glob)
	}
	var r Rules
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return Rules{}, err
		}
		var doc struct {
			Groups []struct {
				Name  string `yaml:"name"`
				Rules []struct {
					Record string `yaml:"record"`
					Alert  string `yaml:"alert"`
					Expr   string `yaml:"expr"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return Rules{}, fmt.Errorf("rule file %s: %w", f, err)
		}
		for _, g := range doc.Groups {
			for _, rule := range g.Rules {
				where := rule.Record
				if rule.Alert != "" {
					where = rule.Alert
					r.Alerts = append(r.Alerts, rule.Alert)
				} else {
					r.Recorded = append(r.Recorded, rule.Record)
				}
				r.Queries = append(r.Queries, Query{File: f, Where: g.Name + "/" + where, Expr: rule.Expr})
			}
		}
	}
	return r, nil
}

// grafanaVars are Grafana's built-in variables and the dashboards' own
// (team, a regular expression as Grafana writes "All"), with values of the
// kind Grafana substitutes; longest names first so that $__rate_interval is
// not read as $__rate followed by text.
var grafanaVars = []struct{ name, value string }{
	{"${team}", ".*"}, {"$team", ".*"},
	{"${__rate_interval}", "1m"}, {"$__rate_interval", "1m"},
	{"${__interval}", "30s"}, {"$__interval", "30s"},
	{"${__range}", "1h"}, {"$__range", "1h"},
}

// Expand replaces Grafana's built-in variables in expr by sample values.
func Expand(expr string) string {
	for _, v := range grafanaVars {
		expr = strings.ReplaceAll(expr, v.name, v.value)
	}
	return expr
}

// Parse parses a query (after Expand) with Prometheus's parser.
func Parse(expr string) (parser.Expr, error) {
	return parser.NewParser(parser.Options{}).ParseExpr(Expand(expr))
}

// Metrics returns the sorted names of the series an expression selects.
// A selector without a metric name (only label matchers) is an error: the
// dashboards and rules always name what they read.
func Metrics(expr string) ([]string, error) {
	e, err := Parse(expr)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == "__name__" {
				name = m.Value
			}
		}
		if name == "" {
			bad = fmt.Errorf("selector %s names no metric", vs)
			return nil
		}
		seen[name] = true
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// Builtin are the series Prometheus itself makes: a target's up and the
// scrape_* series, and the ALERTS series of alert rules.
var Builtin = []string{"up", "ALERTS", "ALERTS_FOR_STATE",
	"scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling", "scrape_series_added"}

// IsBuiltin reports whether name is one of Builtin.
func IsBuiltin(name string) bool { return slices.Contains(Builtin, name) }
