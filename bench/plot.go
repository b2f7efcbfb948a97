package bench

import (
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// PlotOverTime draws the per-second p50, p95 and max trigger latency of
// every system against the seconds of the window.
func PlotOverTime(r *Report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: trigger latency by due second", r.Scenario)
	p.X.Label.Text = "due time, seconds since the start of the window"
	p.Y.Label.Text = "trigger latency (ms)"
	p.Legend.Top = true
	i := 0
	for _, s := range r.Systems {
		for _, q := range []struct {
			name string
			v    func(SeriesPoint) float64
			dash []vg.Length
		}{
			{"p50", func(sp SeriesPoint) float64 { return sp.P50Ms }, nil},
			{"p95", func(sp SeriesPoint) float64 { return sp.P95Ms }, []vg.Length{vg.Points(4), vg.Points(2)}},
			{"max", func(sp SeriesPoint) float64 { return sp.MaxMs }, []vg.Length{vg.Points(1), vg.Points(2)}},
		} {
			pts := make(plotter.XYs, len(s.Series))
			for k, sp := range s.Series {
				pts[k] = plotter.XY{X: float64(sp.Second), Y: q.v(sp)}
			}
			if len(pts) == 0 {
				continue
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return fmt.Errorf("plot: %w", err)
			}
			l.Color = palette[i%len(palette)]
			l.Dashes = q.dash
			p.Add(l)
			p.Legend.Add(s.Name+" "+q.name, l)
		}
		i++
	}
	if err := p.Save(7*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// spectrumTicks label the percentile axis, which is -log10(1 - q).
type spectrumTicks struct{}

func (spectrumTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range []struct {
		x     float64
		label string
	}{{0, "0%"}, {1, "90%"}, {2, "99%"}, {3, "99.9%"}, {4, "99.99%"}, {5, "99.999%"}} {
		if t.x >= lo-1e-9 && t.x <= hi+1e-9 {
			out = append(out, plot.Tick{Value: t.x, Label: t.label})
		}
	}
	return out
}

// PlotDistribution draws each system's trigger latency percentile spectrum
// from its HDR histogram (x: percentile on a log scale of 1/(1-q)).
func PlotDistribution(r *Report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: trigger latency distribution", r.Scenario)
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "trigger latency (ms)"
	p.X.Tick.Marker = spectrumTicks{}
	p.Legend.Top = true
	p.Legend.Left = true
	for i, s := range r.Systems {
		if s.hist == nil || s.hist.TotalCount() == 0 {
			continue
		}
		var pts plotter.XYs
		maxX := math.Log10(float64(s.hist.TotalCount()))
		for x := 0.0; x <= maxX+1e-9; x += 0.02 {
			q := 100 * (1 - math.Pow(10, -x))
			pts = append(pts, plotter.XY{X: x, Y: float64(s.hist.ValueAtQuantile(q)) / 1000})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	if err := p.Save(7*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// killColor tells process kills from backend kills on the timeline.
func killColor(kind string) color.Color {
	if kind == "backend" {
		return color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	}
	return color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
}

// PlotTimeline draws the first system's per-second trigger latency (p50,
// p99, max by due second, on a log scale) with every kill of the run as a
// vertical line at its second, labelled with its target: grey for a
// process, red for a backend.
func PlotTimeline(r *Report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: trigger latency by due second, kills marked", r.Scenario)
	p.X.Label.Text = "due time, seconds since the start of the window"
	p.Y.Label.Text = "trigger latency (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	if len(r.Systems) == 0 {
		return p.Save(12*vg.Inch, 5*vg.Inch, path)
	}
	s := r.Systems[0]
	// The log scale cannot show 0: a latency under 0.1 ms is drawn at 0.1.
	const floor = 0.1
	top := 1.0
	// Not red: red marks the backend kills. max is dashed so that p99
	// stays visible where the two coincide.
	for _, q := range []struct {
		name  string
		v     func(SeriesPoint) float64
		color color.Color
		dash  []vg.Length
	}{
		{"p50", func(sp SeriesPoint) float64 { return sp.P50Ms }, palette[0], nil},
		{"p99", func(sp SeriesPoint) float64 { return sp.P99Ms }, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, nil},
		{"max", func(sp SeriesPoint) float64 { return sp.MaxMs }, palette[2], []vg.Length{vg.Points(2), vg.Points(2)}},
	} {
		pts := make(plotter.XYs, len(s.Series))
		for k, sp := range s.Series {
			pts[k] = plotter.XY{X: float64(sp.Second), Y: math.Max(q.v(sp), floor)}
			top = math.Max(top, pts[k].Y)
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		l.Color = q.color
		l.Dashes = q.dash
		p.Add(l)
		p.Legend.Add(s.Name+" "+q.name, l)
	}
	from := r.Workload.WindowFrom
	var labels plotter.XYLabels
	for _, c := range s.Crash {
		x := c.KilledAt.Sub(from).Seconds()
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: floor}, {X: x, Y: top}})
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		l.Color = killColor(c.Kind)
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
		if c.Kind == "backend" {
			l.Width = vg.Points(1.5)
			l.Dashes = nil
		}
		p.Add(l)
		labels.XYs = append(labels.XYs, plotter.XY{X: x, Y: top})
		labels.Labels = append(labels.Labels, c.Process)
	}
	if len(labels.XYs) > 0 {
		lb, err := plotter.NewLabels(labels)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		for i := range lb.TextStyle {
			lb.TextStyle[i].Rotation = math.Pi / 2
			lb.TextStyle[i].XAlign = -1 // the label runs down from the top of its line
			lb.TextStyle[i].Font.Size = vg.Points(7)
		}
		p.Add(lb)
	}
	if err := p.Save(12*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// PlotCapacity draws the trigger p95 of each capacity step against the
// step's rate on a log scale, numbered in the order the steps ran, with
// the 1 s limit as a dashed line.
func PlotCapacity(r *Report, path string) error {
	c := r.Capacity
	p := plot.New()
	p.Title.Text = "capacity: trigger p95 per step"
	p.X.Label.Text = "offered triggers/s"
	p.Y.Label.Text = "trigger p95 (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	pts := make(plotter.XYs, len(c.Steps))
	labels := make([]string, len(c.Steps))
	maxRate := 0.0
	for i, st := range c.Steps {
		// A log scale has no zero: a step that measured nothing sits at 1 ms.
		pts[i] = plotter.XY{X: st.Rate, Y: math.Max(st.Trigger.P95Ms, 1)}
		labels[i] = fmt.Sprint(i + 1)
		maxRate = math.Max(maxRate, st.Rate)
	}
	if len(pts) == 0 {
		return nil
	}
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	sc.Color = palette[0]
	p.Add(sc)
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: pts, Labels: labels})
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	p.Add(lb)
	limit, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(CapacityP95.Milliseconds())}, {X: maxRate * 1.05, Y: float64(CapacityP95.Milliseconds())}})
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	limit.Color = palette[1]
	limit.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	p.Add(limit)
	p.Legend.Add("p95 of a step (numbered in order)", sc)
	p.Legend.Add("limit: 1 s", limit)
	// Room above the highest point and the limit for the labels, with the
	// legend below them.
	p.Y.Max = 3 * math.Max(p.Y.Max, float64(CapacityP95.Milliseconds()))
	p.Legend.Top = true
	if err := p.Save(7*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// PlotCPU draws the cores each measured process used in each sampling
// interval of the window, and the machine's busy cores, against the
// seconds of the window.
func PlotCPU(r *Report, u *CPUUsage, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: CPU during the measured window", r.Scenario)
	p.X.Label.Text = "seconds since the start of the window"
	p.Y.Label.Text = "cores used"
	p.Legend.Top = true
	p.Legend.Left = true
	line := func(name string, c color.Color, dash []vg.Length, v func(CPUPoint) float64) error {
		var pts plotter.XYs
		for _, pt := range u.Series {
			if y := v(pt); y >= 0 {
				pts = append(pts, plotter.XY{X: pt.Second, Y: y})
			}
		}
		if len(pts) == 0 {
			return nil
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		l.Color = c
		l.Dashes = dash
		p.Add(l)
		p.Legend.Add(name, l)
		return nil
	}
	black := color.RGBA{A: 0xff}
	if err := line("machine busy", black, []vg.Length{vg.Points(4), vg.Points(2)}, func(pt CPUPoint) float64 { return pt.MachineBusyCores }); err != nil {
		return err
	}
	colors := append(slices.Clone(palette), color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
		color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}, color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff})
	for i, pc := range u.Processes {
		var dash []vg.Length
		if i >= len(colors) {
			dash = []vg.Length{vg.Points(1), vg.Points(2)}
		}
		if err := line(pc.Name, colors[i%len(colors)], dash, func(pt CPUPoint) float64 { return pt.Cores[i] }); err != nil {
			return err
		}
	}
	p.Y.Min = 0
	p.Y.Max = math.Max(p.Y.Max, float64(u.Cores))
	if err := p.Save(9*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// PlotRunsPerSecond draws the runs of the window each system started in
// each second since the window's start (System.StartsPerSec): the
// throughput of each, the drain included.
func PlotRunsPerSecond(r *Report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: runs started per second", r.Scenario)
	p.X.Label.Text = "seconds since the start of the window"
	p.Y.Label.Text = "runs started"
	p.Legend.Top = true
	for i, s := range r.Systems {
		if len(s.StartsPerSec) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(s.StartsPerSec))
		for k, n := range s.StartsPerSec {
			pts[k] = plotter.XY{X: float64(k), Y: float64(n)}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		l.Color = palette[i%len(palette)]
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	if err := p.Save(7*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}
