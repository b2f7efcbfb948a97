package grafana

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Dashboard is the part of Grafana's dashboard model Sundial uses.
type Dashboard struct {
	UID           string      `json:"uid"`
	Title         string      `json:"title"`
	Description   string      `json:"description,omitempty"`
	Tags          []string    `json:"tags"`
	Editable      bool        `json:"editable"`
	GraphTooltip  int         `json:"graphTooltip"`
	Refresh       string      `json:"refresh"`
	SchemaVersion int         `json:"schemaVersion"`
	Version       int         `json:"version"`
	Time          TimeRange   `json:"time"`
	Timezone      string      `json:"timezone"`
	Templating    Templating  `json:"templating"`
	Annotations   Annotations `json:"annotations"`
	Links         []Link      `json:"links"`
	Panels        []*Panel    `json:"panels"`
}

// TimeRange is the dashboard's default time range.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Templating holds the dashboard's variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a dashboard variable: the Prometheus data source on every
// dashboard, and the team (a query of the team label) on the overview.
type Variable struct {
	Name       string         `json:"name"`
	Label      string         `json:"label"`
	Type       string         `json:"type"`
	Query      string         `json:"query"`
	Current    map[string]any `json:"current"`
	Hide       int            `json:"hide"`
	Datasource *Datasource    `json:"datasource,omitempty"`
	Definition string         `json:"definition,omitempty"`
	Refresh    int            `json:"refresh,omitempty"`
	Multi      bool           `json:"multi,omitempty"`
	IncludeAll bool           `json:"includeAll,omitempty"`
	AllValue   string         `json:"allValue,omitempty"`
	Sort       int            `json:"sort,omitempty"`
}

// Annotations are the dashboard's annotation queries.
type Annotations struct {
	List []any `json:"list"`
}

// Link links to the other Sundial dashboards by tag.
type Link struct {
	Title       string   `json:"title"`
	Type        string   `json:"type"`
	Tags        []string `json:"tags"`
	AsDropdown  bool     `json:"asDropdown"`
	IncludeVars bool     `json:"includeVars"`
	KeepTime    bool     `json:"keepTime"`
}

// Panel is a row, a time series, a stat or a state timeline.
type Panel struct {
	ID          int          `json:"id"`
	Type        string       `json:"type"`
	Title       string       `json:"title"`
	Description string       `json:"description,omitempty"`
	GridPos     GridPos      `json:"gridPos"`
	Datasource  *Datasource  `json:"datasource,omitempty"`
	Targets     []Target     `json:"targets,omitempty"`
	FieldConfig *FieldConfig `json:"fieldConfig,omitempty"`
	Options     any          `json:"options,omitempty"`
	Collapsed   *bool        `json:"collapsed,omitempty"`
	Panels      []*Panel     `json:"panels,omitempty"` // of a collapsed row
}

// GridPos places a panel on the 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Datasource names the data source of a panel or query.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Target is one PromQL query of a panel.
type Target struct {
	RefID        string      `json:"refId"`
	Datasource   *Datasource `json:"datasource"`
	Expr         string      `json:"expr"`
	LegendFormat string      `json:"legendFormat"`
	Instant      bool        `json:"instant,omitempty"`
	Range        bool        `json:"range"`
	Exemplar     bool        `json:"exemplar,omitempty"`
}

// FieldConfig sets units, thresholds and value mappings.
type FieldConfig struct {
	Defaults  FieldDefaults `json:"defaults"`
	Overrides []any         `json:"overrides"`
}

// FieldDefaults are the field settings of every series of a panel.
type FieldDefaults struct {
	Unit       string         `json:"unit,omitempty"`
	Decimals   *int           `json:"decimals,omitempty"`
	Min        *float64       `json:"min,omitempty"`
	Max        *float64       `json:"max,omitempty"`
	Thresholds *Thresholds    `json:"thresholds,omitempty"`
	Mappings   []any          `json:"mappings,omitempty"`
	Custom     map[string]any `json:"custom,omitempty"`
	Color      map[string]any `json:"color,omitempty"`
}

// Thresholds colour values by steps.
type Thresholds struct {
	Mode  string `json:"mode"`
	Steps []Step `json:"steps"`
}

// Step is one threshold step; a nil Value is the base step.
type Step struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}

// promDS is the data source of every panel: the dashboard's variable.
var promDS = Datasource{Type: "prometheus", UID: "${datasource}"}

// JSON renders the dashboard as Grafana imports it, indented, with a final
// newline.
func (d *Dashboard) JSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.UID, err)
	}
	return buf.Bytes(), nil
}

// Queries returns every PromQL expression of the dashboard's panels, with
// the title of the panel it belongs to.
func (d *Dashboard) Queries() []Query {
	var out []Query
	var walk func(ps []*Panel)
	walk = func(ps []*Panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, Query{Panel: p.Title, Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// Query is one PromQL expression of a dashboard.
type Query struct {
	Panel string
	Expr  string
}
