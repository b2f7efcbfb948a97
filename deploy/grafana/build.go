package grafana

import "strings"

// builder lays panels out left to right in rows of the 24-column grid.
type builder struct {
	d          *Dashboard
	x, y, rowH int
	nextID     int
}

func newDashboard(uid, title, description string) *builder {
	return &builder{d: &Dashboard{
		UID:           uid,
		Title:         title,
		Description:   description,
		Tags:          []string{"sundial"},
		Editable:      true,
		GraphTooltip:  1, // shared crosshair
		Refresh:       "30s",
		SchemaVersion: 39,
		Version:       1,
		Time:          TimeRange{From: "now-1h", To: "now"},
		Templating: Templating{List: []Variable{{
			Name: "datasource", Label: "Prometheus", Type: "datasource", Query: "prometheus",
			Current: map[string]any{},
		}}},
		Annotations: Annotations{List: []any{}},
		Links: []Link{{
			Title: "Sundial", Type: "dashboards", Tags: []string{"sundial"},
			AsDropdown: true, IncludeVars: true, KeepTime: true,
		}},
	}}
}

// teamVariable adds the team variable: every owning team the dispatchers
// have written runs for, several or all at once.
func (b *builder) teamVariable() {
	query := "label_values(sundial_dispatcher_team_runs_total, team)"
	b.d.Templating.List = append(b.d.Templating.List, Variable{
		Name: "team", Label: "Team", Type: "query", Datasource: &promDS,
		Query: query, Definition: query, Refresh: 2, Multi: true, IncludeAll: true, AllValue: ".*", Sort: 1,
		Current: map[string]any{"text": "All", "value": "$__all"},
	})
}

// withExemplars asks Grafana to show a query's exemplars.
func withExemplars(t Target) Target {
	t.Exemplar = true
	return t
}

func (b *builder) id() int {
	b.nextID++
	return b.nextID
}

// row starts a new row with a title.
func (b *builder) row(title string) {
	b.newline()
	collapsed := false
	b.d.Panels = append(b.d.Panels, &Panel{
		ID: b.id(), Type: "row", Title: title, Collapsed: &collapsed,
		GridPos: GridPos{H: 1, W: 24, X: 0, Y: b.y},
	})
	b.y++
}

func (b *builder) newline() {
	if b.x > 0 {
		b.y += b.rowH
	}
	b.x, b.rowH = 0, 0
}

// add places p, w columns wide and h high, after the previous panel, or on
// the next line when it does not fit.
func (b *builder) add(w, h int, p *Panel) {
	if b.x+w > 24 {
		b.newline()
	}
	p.ID = b.id()
	p.GridPos = GridPos{H: h, W: w, X: b.x, Y: b.y}
	b.d.Panels = append(b.d.Panels, p)
	b.x += w
	b.rowH = max(b.rowH, h)
}

func (b *builder) done() *Dashboard {
	b.newline()
	return b.d
}

// q is a range query with a legend.
func q(expr, legend string) Target {
	return Target{Datasource: &promDS, Expr: strings.TrimSpace(expr), LegendFormat: legend, Range: true}
}

// withRefIDs names a panel's queries A, B, C...
func withRefIDs(ts []Target) []Target {
	for i := range ts {
		ts[i].RefID = string(rune('A' + i))
	}
	return ts
}

// ts is a time-series panel.
func ts(title, unit, description string, targets ...Target) *Panel {
	return &Panel{
		Type: "timeseries", Title: title, Description: description, Datasource: &promDS,
		Targets: withRefIDs(targets),
		FieldConfig: &FieldConfig{Defaults: FieldDefaults{
			Unit: unit,
			Custom: map[string]any{
				"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
				"spanNulls": false,
			},
			Color: map[string]any{"mode": "palette-classic"},
		}, Overrides: []any{}},
		Options: map[string]any{
			"legend":  map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": true},
			"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
		},
	}
}

// latency is a time-series panel in seconds with the 1 s objective drawn as
// a red line.
func latency(title, description string, targets ...Target) *Panel {
	p := ts(title, "s", description, targets...)
	one := 1.0
	p.FieldConfig.Defaults.Thresholds = &Thresholds{Mode: "absolute", Steps: []Step{{Color: "green"}, {Color: "red", Value: &one}}}
	p.FieldConfig.Defaults.Custom["thresholdsStyle"] = map[string]any{"mode": "line"}
	p.FieldConfig.Defaults.Custom["scaleDistribution"] = map[string]any{"type": "log", "log": 10}
	return p
}

// stat is a single-value panel; steps colour the value (nil: plain).
func stat(title, unit, description string, steps []Step, targets ...Target) *Panel {
	for i := range targets {
		targets[i].Instant, targets[i].Range = true, false
	}
	th := &Thresholds{Mode: "absolute", Steps: []Step{{Color: "text"}}}
	if steps != nil {
		th.Steps = steps
	}
	return &Panel{
		Type: "stat", Title: title, Description: description, Datasource: &promDS,
		Targets:     withRefIDs(targets),
		FieldConfig: &FieldConfig{Defaults: FieldDefaults{Unit: unit, Thresholds: th, Color: map[string]any{"mode": "thresholds"}}, Overrides: []any{}},
		Options: map[string]any{
			"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
			"colorMode":     "value", "graphMode": "area", "justifyMode": "auto", "textMode": "auto",
			"orientation": "auto",
		},
	}
}

// states is a state timeline with value mappings.
func states(title, description string, mappings map[string][2]string, targets ...Target) *Panel {
	opts := map[string]any{}
	for v, m := range mappings {
		opts[v] = map[string]any{"text": m[0], "color": m[1]}
	}
	return &Panel{
		Type: "state-timeline", Title: title, Description: description, Datasource: &promDS,
		Targets: withRefIDs(targets),
		FieldConfig: &FieldConfig{Defaults: FieldDefaults{
			Mappings:   []any{map[string]any{"type": "value", "options": opts}},
			Color:      map[string]any{"mode": "thresholds"},
			Thresholds: &Thresholds{Mode: "absolute", Steps: []Step{{Color: "green"}}},
		}, Overrides: []any{}},
		Options: map[string]any{"showValue": "auto", "mergeValues": true, "rowHeight": 0.9},
	}
}

func f(v float64) *float64 { return &v }

// Threshold steps used by several stats.
var (
	// greenAtZero: zero is good, anything above is bad.
	greenAtZero = []Step{{Color: "green"}, {Color: "red", Value: f(1e-9)}}
	// objective: at least 99 % is good.
	objective = []Step{{Color: "red"}, {Color: "orange", Value: f(0.95)}, {Color: "green", Value: f(0.99)}}
)
