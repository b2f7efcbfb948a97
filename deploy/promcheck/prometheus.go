package promcheck

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Target is one process for Prometheus to scrape.
type Target struct {
	// Addr is host:port of the process's /metrics.
	Addr string
	// Labels are added to its series; Sundial's dashboards and rules expect
	// component (registry, dispatcher, runner, dagengine...).
	Labels map[string]string
}

// Config configures a Prometheus started by Start.
type Config struct {
	// Binary is the prometheus executable. Default "prometheus" (PATH).
	Binary string
	// Dir holds the generated configuration, the data and the log
	// (prometheus.log). Required; the caller removes it.
	Dir string
	// Job is the scrape job's name. Default "sundial", what the dashboards
	// and rules select.
	Job string
	// Targets are scraped by the job.
	Targets []Target
	// RuleFiles are loaded as they are (globs allowed).
	RuleFiles []string
	// ScrapeInterval and EvaluationInterval default to 1s: short, so that
	// rates and alerts settle within a test.
	ScrapeInterval     time.Duration
	EvaluationInterval time.Duration
	// StartTimeout bounds the wait for Prometheus to be ready. Default 1m.
	StartTimeout time.Duration
}

// Prometheus is a running Prometheus process.
type Prometheus struct {
	// URL is the base of its HTTP API, http://127.0.0.1:port.
	URL     string
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	client  *http.Client
}

// Start writes a configuration scraping cfg.Targets, starts Prometheus on a
// free port of 127.0.0.1 and waits until it is ready.
func Start(ctx context.Context, cfg Config) (*Prometheus, error) {
	if cfg.Dir == "" {
		return nil, errors.New("promcheck: Dir is required")
	}
	cfg.Binary = cmp.Or(cfg.Binary, "prometheus")
	cfg.Job = cmp.Or(cfg.Job, "sundial")
	cfg.ScrapeInterval = cmp.Or(cfg.ScrapeInterval, time.Second)
	cfg.EvaluationInterval = cmp.Or(cfg.EvaluationInterval, time.Second)
	cfg.StartTimeout = cmp.Or(cfg.StartTimeout, time.Minute)
	bin, err := exec.LookPath(cfg.Binary)
	if err != nil {
		return nil, fmt.Errorf("promcheck: %s not found (Debian: apt-get install prometheus): %w", cfg.Binary, err)
	}
	confPath := filepath.Join(cfg.Dir, "prometheus.yml")
	if err := writeConfig(confPath, cfg); err != nil {
		return nil, err
	}
	port, err := freePort(ctx)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(cfg.Dir, "prometheus.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	// The process outlives ctx, which bounds the start only; Stop ends it.
	cmd := exec.CommandContext(context.WithoutCancel(ctx), bin,
		"--config.file="+confPath,
		"--storage.tsdb.path="+filepath.Join(cfg.Dir, "data"),
		"--web.listen-address="+listen,
		"--web.enable-lifecycle",
		"--log.level=info",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Prometheus dies with the process that started it, even when that one
	// is killed before it can call Stop (a test binary's timeout).
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("promcheck: start %s: %w", bin, err)
	}
	p := &Prometheus{URL: "http://" + listen, LogPath: logPath, cmd: cmd, exited: make(chan struct{}), client: &http.Client{Timeout: 10 * time.Second}}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()

	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	for {
		if ready, _ := p.get(ctx, "/-/ready"); ready {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("promcheck: prometheus exited before it was ready (%w); log:\n%s",
				cmp.Or(p.waitErr, errors.New("exit status 0")), p.LogTail(30))
		case <-ctx.Done():
			p.Stop()
			return nil, fmt.Errorf("promcheck: prometheus not ready within %s; log:\n%s", cfg.StartTimeout, p.LogTail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func writeConfig(path string, cfg Config) error {
	type staticConfig struct {
		Targets []string          `yaml:"targets"`
		Labels  map[string]string `yaml:"labels,omitempty"`
	}
	var static []staticConfig
	for _, t := range cfg.Targets {
		static = append(static, staticConfig{Targets: []string{t.Addr}, Labels: t.Labels})
	}
	conf := map[string]any{
		"global": map[string]any{
			"scrape_interval":     cfg.ScrapeInterval.String(),
			"scrape_timeout":      cfg.ScrapeInterval.String(),
			"evaluation_interval": cfg.EvaluationInterval.String(),
		},
		"rule_files": cfg.RuleFiles,
		"scrape_configs": []map[string]any{{
			"job_name":       cfg.Job,
			"static_configs": static,
		}},
	}
	b, err := yaml.Marshal(conf)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func freePort(ctx context.Context) (int, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Stop kills Prometheus and waits for it to exit. Idempotent.
func (p *Prometheus) Stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// LogTail returns the last n lines of Prometheus's log.
func (p *Prometheus) LogTail(n int) string {
	b, _ := os.ReadFile(p.LogPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (p *Prometheus) get(ctx context.Context, path string) (bool, []byte) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return false, nil
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return false, nil
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK, b
}

// api calls a GET endpoint of the HTTP API and decodes its data field.
func (p *Prometheus) api(ctx context.Context, path string, params url.Values, data any) error {
	u := p.URL + path
	if params != nil {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	var env struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("prometheus %s: status %d: %s", path, resp.StatusCode, bytes.TrimSpace(body))
	}
	if env.Status != "success" {
		return fmt.Errorf("prometheus %s: %s: %s", path, env.ErrorType, env.Error)
	}
	return json.Unmarshal(env.Data, data)
}

// Result is the answer to an instant query.
type Result struct {
	// Type is vector, matrix, scalar or string.
	Type string
	// Series is how many series a vector or matrix holds; 1 for a scalar.
	Series int
	// Values are the sample values of a vector, in the order returned.
	Values []string
}

// HasData reports whether the query returned something.
func (r Result) HasData() bool { return r.Series > 0 }

// Query runs an instant query now (Grafana's variables expanded).
func (p *Prometheus) Query(ctx context.Context, expr string) (Result, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.api(ctx, "/api/v1/query", url.Values{"query": {Expand(expr)}}, &data); err != nil {
		return Result{}, err
	}
	r := Result{Type: data.ResultType}
	switch data.ResultType {
	case "vector", "matrix":
		var series []struct {
			Value []any `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &series); err != nil {
			return Result{}, err
		}
		r.Series = len(series)
		for _, s := range series {
			if len(s.Value) == 2 {
				r.Values = append(r.Values, fmt.Sprint(s.Value[1]))
			}
		}
	default:
		r.Series = 1
	}
	return r, nil
}

// QueryResult is the outcome of one query of CheckQueries.
type QueryResult struct {
	Query  Query
	Result Result
	Err    error
}

// CheckQueries runs every query and returns their results in order.
func (p *Prometheus) CheckQueries(ctx context.Context, qs []Query) []QueryResult {
	out := make([]QueryResult, 0, len(qs))
	for _, q := range qs {
		r, err := p.Query(ctx, q.Expr)
		out = append(out, QueryResult{Query: q, Result: r, Err: err})
	}
	return out
}

// TargetState is the scrape state of one target.
type TargetState struct {
	ScrapeURL string            `json:"scrapeUrl"`
	Labels    map[string]string `json:"labels"`
	Health    string            `json:"health"` // up, down, unknown
	LastError string            `json:"lastError"`
}

// Targets returns the active targets.
func (p *Prometheus) Targets(ctx context.Context) ([]TargetState, error) {
	var data struct {
		ActiveTargets []TargetState `json:"activeTargets"`
	}
	if err := p.api(ctx, "/api/v1/targets", url.Values{"state": {"active"}}, &data); err != nil {
		return nil, err
	}
	return data.ActiveTargets, nil
}

// WaitTargetsUp waits until every active target has been scraped
// successfully, or returns the targets that are not up when ctx ends.
func (p *Prometheus) WaitTargetsUp(ctx context.Context) error {
	for {
		ts, err := p.Targets(ctx)
		var down []string
		if err == nil {
			for _, t := range ts {
				if t.Health != "up" {
					down = append(down, fmt.Sprintf("%s (%s %s)", t.ScrapeURL, t.Health, t.LastError))
				}
			}
			if len(down) == 0 && len(ts) > 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("promcheck: targets not up: %v: %w", down, errors.Join(ctx.Err(), err))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Alert is an alert Prometheus holds: pending or firing.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	Value       string            `json:"value"`
	// ActiveAt is when the alert's condition started to hold (it became
	// pending).
	ActiveAt time.Time `json:"activeAt"`
}

// Name is the alert's name.
func (a Alert) Name() string { return a.Labels["alertname"] }

// Alerts returns the pending and firing alerts.
func (p *Prometheus) Alerts(ctx context.Context) ([]Alert, error) {
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	if err := p.api(ctx, "/api/v1/alerts", nil, &data); err != nil {
		return nil, err
	}
	return data.Alerts, nil
}

// WaitAlert waits until the alert called name is in state ("firing" or
// "pending"), or, with state "inactive", until no alert of that name is
// pending or firing.
func (p *Prometheus) WaitAlert(ctx context.Context, name, state string) error {
	var last []Alert
	for {
		alerts, err := p.Alerts(ctx)
		if err == nil {
			last = alerts
			found := false
			for _, a := range alerts {
				if a.Name() != name {
					continue
				}
				found = true
				if a.State == state {
					return nil
				}
			}
			if state == "inactive" && !found {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("promcheck: alert %s not %s: alerts now %v: %w", name, state, last, errors.Join(ctx.Err(), err))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// RuleState is the health of one loaded rule.
type RuleState struct {
	Group     string
	Name      string
	Type      string // recording or alerting
	Health    string // ok, err, unknown
	LastError string
}

// Rules returns every loaded rule with its health.
func (p *Prometheus) Rules(ctx context.Context) ([]RuleState, error) {
	var data struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Name      string `json:"name"`
				Type      string `json:"type"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.api(ctx, "/api/v1/rules", nil, &data); err != nil {
		return nil, err
	}
	var out []RuleState
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			out = append(out, RuleState{Group: g.Name, Name: r.Name, Type: r.Type, Health: r.Health, LastError: r.LastError})
		}
	}
	return out, nil
}
