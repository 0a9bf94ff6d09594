package experiments

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// sweepMetrics are the metrics every sweep figure set shows.
var sweepMetrics = []string{"fct_p99_us", "pfc_pause_frames"}

// sweepFigures draws each sweep metric against each swept parameter.
func sweepFigures(s *ScenarioSummary) []*figure {
	if len(s.Params) == 0 {
		return nil
	}
	metrics := slices.Clone(sweepMetrics)
	if !slices.Contains(metrics, s.Objective.Metric) && s.Objective.Metric != "" {
		metrics = append(metrics, s.Objective.Metric)
	}
	var out []*figure
	for _, col := range metrics {
		m, ok := MetricByCol(col)
		if !ok {
			continue
		}
		for k := range s.Params {
			if f := sweepFigure(s, m, k); f != nil {
				out = append(out, f)
			}
		}
	}
	return out
}

// paramAxis returns how to show a parameter kind on an axis: a label
// suffix and a divisor for X.
func paramAxis(p Param, xs []float64) (string, float64) {
	switch p.Kind {
	case ParamSize:
		hi := slices.Max(xs)
		switch {
		case hi >= 1<<30:
			return " (GiB)", 1 << 30
		case hi >= 1<<20:
			return " (MiB)", 1 << 20
		case hi >= 1<<10:
			return " (KiB)", 1 << 10
		}
		return " (bytes)", 1
	case ParamRate:
		return " (Gbit/s)", 1
	case ParamDuration:
		return " (µs)", 1
	case ParamHosts:
		return " (hosts)", 1
	}
	return "", 1
}

// sweepFigure draws metric m against parameter k: one panel per
// combination of the other parameters' values, one line per policy
// through the means, with a band over the 95% intervals.
func sweepFigure(s *ScenarioSummary, m Metric, k int) *figure {
	param := s.Params[k]
	// Panels: the other parameters' values, in order of appearance.
	var panelKeys []string
	var pols []string
	var xs []float64
	others := func(p *PolicySummary) string {
		var parts []string
		for j, x := range p.Params {
			if j != k {
				parts = append(parts, x.Label+" = "+x.Display())
			}
		}
		return strings.Join(parts, ", ")
	}
	for i := range s.Policies {
		p := &s.Policies[i]
		if len(p.Params) != len(s.Params) {
			continue
		}
		if key := others(p); !slices.Contains(panelKeys, key) {
			panelKeys = append(panelKeys, key)
		}
		if !slices.Contains(pols, p.Policy) {
			pols = append(pols, p.Policy)
		}
		xs = append(xs, p.Params[k].X)
	}
	if len(xs) == 0 {
		return nil
	}
	suffix, div := paramAxis(param, xs)
	unit := m.Head
	name := "sweep-" + Slug(m.Col) + "-" + Slug(param.Name)
	f := &figure{name: name, title: fmt.Sprintf("%s vs %s", m.Head, param.Label), w: 8.5 * vg.Inch}
	f.caption = "Lines join the means over seeds; bands span their 95% confidence intervals (Student's t)."
	cols := min(len(panelKeys), 3)
	rows := (len(panelKeys) + cols - 1) / cols
	f.cols = cols
	f.h = 3.6 * vg.Inch
	if rows > 1 || cols > 1 {
		f.h = vg.Length(rows) * 2.6 * vg.Inch
	}
	xlo, xhi := slices.Min(xs)/div, slices.Max(xs)/div
	logX := param.Kind != ParamText && xlo > 0 && xhi/xlo >= 8
	vhi, vlo := 0.0, math.Inf(1)
	for _, key := range panelKeys {
		for i := range s.Policies {
			p := &s.Policies[i]
			if len(p.Params) == len(s.Params) && others(p) == key {
				st := p.Stat(m.Col)
				if st.N > 0 {
					vhi, vlo = max(vhi, st.Hi/m.Scale, st.Mean/m.Scale), min(vlo, st.Lo/m.Scale, st.Mean/m.Scale)
				}
			}
		}
	}
	for pi, key := range panelKeys {
		xl, yl := param.Label+suffix, unit
		if pi/cols != rows-1 {
			xl = ""
		}
		if pi%cols != 0 {
			yl = ""
		}
		p := newPanel(key, xl, yl)
		if logX {
			p.X.Scale = plot.LogScale{}
		}
		var ticks []plot.Tick
		for j, pol := range pols {
			style := seriesStyle(j, len(pols))
			var line, top, bot plotter.XYs
			for i := range s.Policies {
				ps := &s.Policies[i]
				if ps.Policy != pol || len(ps.Params) != len(s.Params) || others(ps) != key {
					continue
				}
				st := ps.Stat(m.Col)
				if st.N == 0 || math.IsNaN(st.Mean) {
					continue
				}
				x := ps.Params[k].X / div
				line = append(line, plotter.XY{X: x, Y: st.Mean / m.Scale})
				top = append(top, plotter.XY{X: x, Y: st.Hi / m.Scale})
				bot = append(bot, plotter.XY{X: x, Y: max(st.Lo/m.Scale, lowest(m))})
				if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == x }) {
					label := strconv.FormatFloat(x, 'g', 4, 64)
					if param.Kind == ParamText {
						label = ps.Params[k].Display()
					}
					ticks = append(ticks, plot.Tick{Value: x, Label: label})
				}
			}
			if len(line) == 0 {
				continue
			}
			sortXY(line)
			sortXY(top)
			sortXY(bot)
			if len(line) > 1 {
				band := append(slices.Clone(top), reverse(bot)...)
				if poly, err := plotter.NewPolygon(band); err == nil {
					c := style.Color.(color.RGBA)
					poly.Color = color.NRGBA{R: c.R, G: c.G, B: c.B, A: 46}
					poly.LineStyle.Width = 0
					p.Add(poly)
				}
			}
			addSeries(p, style, line)
			if sc, err := plotter.NewScatter(line); err == nil {
				sc.GlyphStyle = draw.GlyphStyle{Color: style.Color, Radius: vg.Points(2.2), Shape: draw.CircleGlyph{}}
				p.Add(sc)
			}
			if pi == 0 {
				f.legend = append(f.legend, legendItem{name: pol, style: style})
			}
		}
		if len(ticks) <= 12 {
			slices.SortFunc(ticks, func(a, b plot.Tick) int { return cmpFloat(a.Value, b.Value) })
			p.X.Tick.Marker = plot.ConstantTicks(ticks)
		}
		pad := (xhi - xlo) * 0.04
		if logX {
			p.X.Min, p.X.Max = xlo/1.08, xhi*1.08
		} else if xhi > xlo {
			p.X.Min, p.X.Max = xlo-pad, xhi+pad
		} else {
			p.X.Min, p.X.Max = xlo-1, xhi+1
		}
		fitY(p, vlo, vhi, !m.Higher)
		f.panels = append(f.panels, p)
	}
	return f
}

// lowest is the floor of a metric's band (counts and times cannot go
// below zero, whatever the t interval says).
func lowest(Metric) float64 { return 0 }

func sortXY(xy plotter.XYs) {
	slices.SortStableFunc(xy, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
}

func reverse(xy plotter.XYs) plotter.XYs {
	out := slices.Clone(xy)
	slices.Reverse(out)
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
