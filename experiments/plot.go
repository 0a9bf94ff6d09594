package experiments

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Figures are drawn with gonum/plot to one house style, chosen for print:
//
//   - Colour: Paul Tol's discrete rainbow (Tol, "Colour Schemes", SRON
//     technical note SRON/EPS/TN/09-002, fig. 22), which is designed to stay
//     distinct for readers with colour-vision deficiencies and gives a
//     separate, tuned set for every count of series up to 23; a figure with
//     n ≤ 12 series uses the set for n, more series reuse the 12-colour set.
//   - Dashes: every series also gets its own dash pattern (solid, dashed,
//     dotted, ...), so series stay apart in greyscale and where they
//     overlap exactly.
//   - Legends sit outside the data area, to its right.
//   - Axes span the data (zero included for quantities that start at
//     zero), with ticks at 1, 2 or 5 times a power of ten.
//   - Many series of the same kind (per-path throughput) are small
//     multiples, one panel each with shared axes, not one tangle.
//   - A completion-time CDF needs at least MinCDFSamples flows per policy;
//     with fewer, the figure is a dot plot of every flow.

// MinCDFSamples is the fewest completed flows per policy for which a CDF
// is drawn; below it a dot plot shows the flows themselves.
const MinCDFSamples = 20

// maxTraces bounds the series one time-series figure shows.
const maxTraces = 16

// PlotFormats are the image formats every figure is written in.
var PlotFormats = []string{"png", "svg"}

// tolRainbow is Tol's discrete rainbow; tolCuts[n-1] are the indices it
// uses for n colours (n = 1..12).
var tolRainbow = []string{
	"#E8ECFB", "#D9CCE3", "#D1BBD7", "#CAACCB", "#BA8DB4", "#AE76A3", "#AA6F9E", "#994F88", "#882E72", "#1965B0",
	"#437DBF", "#5289C7", "#6195CF", "#7BAFDE", "#4EB265", "#90C987", "#CAE0AB", "#F7F056", "#F7CB45", "#F6C141",
	"#F4A736", "#F1932D", "#EE8026", "#E8601C", "#E65518", "#DC050C", "#A5170E", "#72190E", "#42150A",
}

var tolCuts = [][]int{
	{9}, {9, 25}, {9, 17, 25}, {9, 14, 17, 25}, {9, 13, 14, 17, 25}, {9, 13, 14, 16, 17, 25},
	{8, 9, 13, 14, 16, 17, 25}, {8, 9, 13, 14, 16, 17, 22, 25}, {8, 9, 13, 14, 16, 17, 22, 25, 27},
	{8, 9, 13, 14, 16, 17, 20, 23, 25, 27}, {8, 9, 11, 13, 14, 16, 17, 20, 23, 25, 27},
	{2, 5, 8, 9, 11, 13, 14, 16, 17, 20, 23, 25},
}

// SeriesColor returns the colour of series i of n (as "#RRGGBB").
func SeriesColor(i, n int) string {
	cut := tolCuts[min(max(n, 1), len(tolCuts))-1]
	return tolRainbow[cut[i%len(cut)]]
}

func rgba(hex string) color.RGBA {
	v, _ := strconv.ParseUint(strings.TrimPrefix(hex, "#"), 16, 32)
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 255}
}

// dashPatterns are the dash patterns series cycle through, in points.
var dashPatterns = [][]vg.Length{nil, {6, 3}, {2, 2}, {8, 3, 2, 3}, {4, 4}, {8, 2, 2, 2, 2, 2}, {12, 4}}

// seriesStyle returns series i of n's line style.
func seriesStyle(i, n int) draw.LineStyle {
	// Colours repeat every 12 series; the dash advances then as well, so
	// the pair stays unique.
	d := dashPatterns[(i+i/len(tolCuts))%len(dashPatterns)]
	return draw.LineStyle{Color: rgba(SeriesColor(i, n)), Width: vg.Points(1.6), Dashes: d}
}

// Figure is one drawn figure: a name (the file name without extension),
// a caption, and the SVG and PNG renderings.
type Figure struct {
	Name, Title, Caption string
	SVG, PNG             []byte
}

// figure is a figure being composed: panels in a grid sharing one legend.
type figure struct {
	name, title, caption string
	panels               []*plot.Plot
	cols                 int
	legend               []legendItem
	w, h                 vg.Length
}

type legendItem struct {
	name  string
	style draw.LineStyle
	dots  bool
}

func (li legendItem) Thumbnail(c *draw.Canvas) {
	y := (c.Min.Y + c.Max.Y) / 2
	if li.dots {
		c.DrawGlyph(draw.GlyphStyle{Color: li.style.Color, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: y})
		return
	}
	halo := li.style
	halo.Color = color.NRGBA{A: 90}
	halo.Width += vg.Points(1.1)
	c.StrokeLine2(halo, c.Min.X, y, c.Max.X, y)
	c.StrokeLine2(li.style, c.Min.X, y, c.Max.X, y)
}

// render draws the figure in a format.
func (f *figure) render(format string) ([]byte, error) {
	c, err := draw.NewFormattedCanvas(f.w, f.h, format)
	if err != nil {
		return nil, err
	}
	dc := draw.New(c)
	// Title across the top.
	fnt := sansFont(12)
	title := draw.TextStyle{Color: color.Black, Font: fnt, Handler: plot.DefaultTextHandler, XAlign: draw.XCenter, YAlign: draw.YTop}
	if f.title != "" {
		dc.FillText(title, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: dc.Max.Y - vg.Points(4)}, f.title)
		dc = draw.Crop(dc, 0, 0, 0, -vg.Points(22))
	}
	// Legend to the right of the data.
	if len(f.legend) > 0 {
		leg := plot.NewLegend()
		leg.TextStyle.Font = sansFont(9)
		leg.Top, leg.Left = true, true
		leg.ThumbnailWidth = vg.Points(28)
		wide := vg.Length(0)
		for _, li := range f.legend {
			leg.Add(li.name, li)
			wide = max(wide, leg.TextStyle.Width(li.name))
		}
		lw := wide + leg.ThumbnailWidth + vg.Points(16)
		lc := draw.Crop(dc, dc.Max.X-dc.Min.X-lw, 0, 0, -vg.Points(6))
		leg.Draw(lc)
		dc = draw.Crop(dc, 0, -lw-vg.Points(12), 0, 0)
	}
	cols := max(f.cols, 1)
	rows := (len(f.panels) + cols - 1) / cols
	if rows <= 1 && cols == 1 {
		f.panels[0].Draw(dc)
	} else {
		grid := make([][]*plot.Plot, rows)
		for r := range grid {
			grid[r] = make([]*plot.Plot, cols)
			for k := range cols {
				if i := r*cols + k; i < len(f.panels) {
					grid[r][k] = f.panels[i]
				}
			}
		}
		tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(6), PadY: vg.Points(6), PadTop: vg.Points(2), PadBottom: vg.Points(2), PadLeft: vg.Points(2), PadRight: vg.Points(2)}
		canvases := plot.Align(grid, tiles, dc)
		for r := range grid {
			for k, p := range grid[r] {
				if p != nil {
					p.Draw(canvases[r][k])
				}
			}
		}
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// finish renders the figure in every format.
func (f *figure) finish() (Figure, error) {
	out := Figure{Name: f.name, Title: f.title, Caption: f.caption}
	var err error
	if out.SVG, err = f.render("svg"); err != nil {
		return out, err
	}
	out.PNG, err = f.render("png")
	return out, err
}

// sansFont is Liberation Sans (gonum/plot's bundled fonts) at size
// points: figures use a sans-serif face, as print figures do.
func sansFont(size float64) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: vg.Points(size)}
}

// newPanel is an empty panel in the house style.
func newPanel(title, xl, yl string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = sansFont(10)
	p.X.Label.Text = xl
	p.Y.Label.Text = yl
	p.X.Label.TextStyle.Font = sansFont(10)
	p.Y.Label.TextStyle.Font = sansFont(10)
	p.X.Tick.Label.Font = sansFont(9)
	p.Y.Tick.Label.Font = sansFont(9)
	p.X.Tick.Marker = niceTicks{}
	p.Y.Tick.Marker = niceTicks{}
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 225}
	grid.Horizontal.Color = color.Gray{Y: 225}
	p.Add(grid)
	return p
}

// niceTicks puts major ticks at 1, 2 or 5 times a power of ten, about six
// of them across the range, labelled with as few digits as tell them
// apart, and a minor tick between majors.
type niceTicks struct{}

func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return []plot.Tick{{Value: lo, Label: fmtTick(lo, 1)}}
	}
	step := niceStep((hi - lo) / 6)
	var ts []plot.Tick
	first := math.Ceil(lo/step-1e-9) * step
	for k := 0; ; k++ {
		v := first + float64(k)*step
		if v > hi+step*1e-9 || k > 100 {
			break
		}
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ts = append(ts, plot.Tick{Value: v, Label: fmtTick(v, step)})
		if m := v + step/2; m < hi {
			ts = append(ts, plot.Tick{Value: m})
		}
	}
	if m := first - step/2; m > lo {
		ts = append(ts, plot.Tick{Value: m})
	}
	return ts
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// fmtTick formats a tick value with the decimals its step needs.
func fmtTick(v, step float64) string {
	d := 0
	if step < 1 {
		d = int(math.Ceil(-math.Log10(step) - 1e-9))
	}
	if math.Abs(v) >= 1e6 {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

// fitY sets the y axis to the data range, from zero when zero is
// meaningful (every value non-negative), with a little headroom.
func fitY(p *plot.Plot, lo, hi float64, fromZero bool) {
	if fromZero && lo >= 0 {
		lo = 0
	}
	if !(hi > lo) {
		hi = lo + 1
	}
	p.Y.Min, p.Y.Max = lo, hi+(hi-lo)*0.04
}

// WritePlots draws a scenario's figures into dir (PNG and SVG) and returns
// their file names, PNG first per figure.
func WritePlots(dir string, s *ScenarioSummary, results []*Result) ([]string, error) {
	figs, err := Figures(s, results)
	if err != nil {
		return nil, err
	}
	return SaveFigures(dir, figs)
}

// SaveFigures writes figures into dir as <name>.png and <name>.svg.
func SaveFigures(dir string, figs []Figure) ([]string, error) {
	var files []string
	for _, f := range figs {
		for _, x := range []struct {
			ext  string
			data []byte
		}{{"png", f.PNG}, {"svg", f.SVG}} {
			name := f.Name + "." + x.ext
			if err := os.WriteFile(filepath.Join(dir, name), x.data, 0o644); err != nil {
				return nil, fmt.Errorf("plot %s: %w", name, err)
			}
			files = append(files, name)
		}
	}
	return files, nil
}

// Figures draws a scenario's figures:
//
//   - sweep-<metric>-<param>: for a sweep, FCT p99 and PFC pauses (and the
//     objective's metric) against each swept parameter, one line per
//     policy through the means over seeds with a band over their 95%
//     intervals; one panel per value of the other parameters;
//   - fct-cdf: tensor completion-time CDF per policy (seeds pooled), or a
//     dot plot of every flow when a policy has fewer than MinCDFSamples;
//   - queue-compare: the deepest switch queue over time per policy;
//   - throughput-<policy>: per-path throughput, one small panel per path;
//   - queues-, rate-, window-<policy>: switch queues and per-path CC rate
//     and window over time.
//
// Time series come from each policy's lowest seed (at the first sweep
// point, for a sweep).
func Figures(s *ScenarioSummary, results []*Result) ([]Figure, error) {
	var figs []*figure
	figs = append(figs, sweepFigures(s)...)
	if f := fctFigure(s); f != nil {
		figs = append(figs, f)
	}
	first := firstSeedRuns(s, results)
	pols := firstPointPolicies(s)
	if f := queueCompare(s, pols, first); f != nil {
		figs = append(figs, f)
	}
	for _, pol := range pols {
		r := first[pol]
		if r == nil || r.Series == nil {
			continue
		}
		slug := Slug(pol)
		what := fmt.Sprintf("%s, seed %d", pol, r.Row.Seed)
		if len(s.Params) > 0 {
			what += ", " + pointLabel(r.Row.Params)
		}
		if tp := r.Series.Throughput; len(tp) > 0 {
			figs = append(figs, smallMultiples("throughput-"+slug, "Per-path throughput: "+what, "Gbit/s", tp, 1))
		}
		for _, ts := range []struct {
			name, what, unit string
			traces           []Trace
			scale            float64
		}{
			{"queues", "Deepest switch queues", "KiB", r.Series.Queues, 1.0 / 1024},
			{"rate", "CC rate per path", "Gbit/s", r.Series.Rate, 1},
			{"window", "CC window per path", "KiB", r.Series.Window, 1.0 / 1024},
		} {
			if len(ts.traces) == 0 {
				continue
			}
			figs = append(figs, timeFigure(ts.name+"-"+slug, ts.what+": "+what, ts.unit, ts.traces, ts.scale))
		}
	}
	var out []Figure
	for _, f := range figs {
		g, err := f.finish()
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", f.name, err)
		}
		out = append(out, g)
	}
	return out, nil
}

// Slug turns a label into a file-name part ("dcqcn 4qp" → "dcqcn-4qp").
func Slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	out := strings.TrimSuffix(b.String(), "-")
	if len(out) > 80 {
		out = out[:80]
	}
	return out
}

// firstPointPolicies lists the policies of the first sweep point, in order.
func firstPointPolicies(s *ScenarioSummary) []string {
	pts := s.Points()
	if len(pts) == 0 {
		return nil
	}
	var out []string
	for _, p := range pts[0] {
		out = append(out, p.Policy)
	}
	return out
}

// firstSeedRuns picks, per policy, the run with the lowest seed at the
// first sweep point.
func firstSeedRuns(s *ScenarioSummary, results []*Result) map[string]*Result {
	out := map[string]*Result{}
	first := ""
	if pts := s.Points(); len(pts) > 0 {
		first = pts[0][0].Point()
	}
	for _, r := range results {
		if r.Row.Scenario != s.Scenario || paramsKey(r.Row.Params) != first {
			continue
		}
		if cur := out[r.Row.Policy]; cur == nil || r.Row.Seed < cur.Row.Seed {
			out[r.Row.Policy] = r
		}
	}
	return out
}

// addSeries draws a line over a faint dark halo of the same dashes, so the
// palette's light colours (Tol's yellow) read on white.
func addSeries(p *plot.Plot, style draw.LineStyle, xy plotter.XYs) {
	if len(xy) == 0 {
		return
	}
	halo, err := plotter.NewLine(xy)
	if err != nil {
		return // no finite points: nothing to draw
	}
	halo.LineStyle = style
	halo.LineStyle.Color = color.NRGBA{A: 90}
	halo.LineStyle.Width = style.Width + vg.Points(1.1)
	l, _ := plotter.NewLine(xy)
	l.LineStyle = style
	p.Add(halo, l)
}

// fctFigure is the completion-time CDF, or a dot plot when a policy has
// too few flows for a CDF to mean anything.
func fctFigure(s *ScenarioSummary) *figure {
	pols := firstPointPolicies(s)
	pts := s.Points()
	if len(pts) == 0 {
		return nil
	}
	lo, hi, fewest := math.Inf(1), 0.0, math.MaxInt
	for _, p := range pts[0] {
		if n := len(p.FCTsUs); n > 0 {
			lo, hi = min(lo, p.FCTsUs[0]), max(hi, p.FCTsUs[n-1])
			fewest = min(fewest, n)
		}
	}
	if hi == 0 {
		return nil
	}
	where := ""
	if len(s.Params) > 0 {
		where = ", " + pointLabel(pts[0][0].Params)
	}
	n := len(pols)
	f := &figure{name: "fct-cdf", w: 8.5 * vg.Inch, h: 4.5 * vg.Inch}
	if fewest < MinCDFSamples {
		f.title = "Tensor completion times, every flow" + where
		f.caption = fmt.Sprintf("Each dot is one completed tensor flow (all seeds); a policy has only %d, below the %d a CDF needs.", fewest, MinCDFSamples)
		p := newPanel("", "completion time (µs)", "")
		names := make([]string, n)
		for i, pol := range pts[0] {
			st := seriesStyle(i, n)
			names[n-1-i] = pol.Policy
			var xy plotter.XYs
			for k, x := range pol.FCTsUs {
				// Spread equal values a little so none hides another.
				jitter := (float64(k%5) - 2) * 0.06
				xy = append(xy, plotter.XY{X: x, Y: float64(n-1-i) + jitter})
			}
			if sc, err := plotter.NewScatter(xy); err == nil {
				sc.GlyphStyle = draw.GlyphStyle{Color: st.Color, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
				p.Add(sc)
			}
			f.legend = append(f.legend, legendItem{name: pol.Policy, style: st, dots: true})
		}
		p.NominalY(names...)
		p.Y.Tick.Marker = plot.ConstantTicks(nominalTicks(names))
		span := hi - lo
		p.X.Min, p.X.Max = max(lo-span*0.04, 0), hi+span*0.04
		f.h = vg.Points(float64(90 + 22*n))
		f.panels = []*plot.Plot{p}
		return f
	}
	f.title = "Tensor completion time CDF" + where
	f.caption = "Completed tensor flows of every seed, pooled."
	p := newPanel("", "completion time (µs)", "fraction of flows")
	if lo > 0 && hi/lo > 50 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	for i, pol := range pts[0] {
		st := seriesStyle(i, n)
		k := len(pol.FCTsUs)
		if k == 0 {
			continue
		}
		xy := make(plotter.XYs, 0, 2*k)
		for j, x := range pol.FCTsUs {
			xy = append(xy, plotter.XY{X: x, Y: float64(j) / float64(k)}, plotter.XY{X: x, Y: float64(j+1) / float64(k)})
		}
		addSeries(p, st, xy)
		f.legend = append(f.legend, legendItem{name: pol.Policy, style: st})
	}
	p.X.Min, p.X.Max = lo, hi
	p.Y.Min, p.Y.Max = 0, 1
	f.panels = []*plot.Plot{p}
	return f
}

func nominalTicks(names []string) []plot.Tick {
	ts := make([]plot.Tick, len(names))
	for i, n := range names {
		ts[i] = plot.Tick{Value: float64(i), Label: n}
	}
	return ts
}

func queueCompare(s *ScenarioSummary, pols []string, first map[string]*Result) *figure {
	f := &figure{name: "queue-compare", title: "Deepest switch queue over time (lowest seed)", w: 8.5 * vg.Inch, h: 4.5 * vg.Inch}
	p := newPanel("", "time (µs)", "queue (KiB)")
	tlo, thi, vhi := math.Inf(1), math.Inf(-1), 0.0
	for i, pol := range pols {
		r := first[pol]
		if r == nil || r.Series == nil || len(r.Series.Queues) == 0 {
			continue
		}
		q := r.Series.Queues[0]
		xy := traceXY(q, 1.0/1024)
		for _, pt := range xy {
			tlo, thi, vhi = min(tlo, pt.X), max(thi, pt.X), max(vhi, pt.Y)
		}
		st := seriesStyle(i, len(pols))
		addSeries(p, st, xy)
		f.legend = append(f.legend, legendItem{name: pol, style: st})
	}
	if len(f.legend) == 0 || !(thi > tlo) {
		return nil
	}
	p.X.Min, p.X.Max = tlo, thi
	fitY(p, 0, vhi, true)
	f.panels = []*plot.Plot{p}
	return f
}

// timeFigure draws up to maxTraces time series in one panel.
func timeFigure(name, title, unit string, traces []Trace, scale float64) *figure {
	n := min(len(traces), maxTraces)
	if len(traces) > maxTraces {
		title += fmt.Sprintf(" (first %d of %d)", maxTraces, len(traces))
	}
	f := &figure{name: name, title: title, w: 8.5 * vg.Inch, h: 4.5 * vg.Inch}
	p := newPanel("", "time (µs)", unit)
	tlo, thi, vlo, vhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for i, t := range traces[:n] {
		xy := traceXY(t, scale)
		for _, pt := range xy {
			tlo, thi, vlo, vhi = min(tlo, pt.X), max(thi, pt.X), min(vlo, pt.Y), max(vhi, pt.Y)
		}
		st := seriesStyle(i, n)
		addSeries(p, st, xy)
		f.legend = append(f.legend, legendItem{name: t.Name, style: st})
	}
	if thi > tlo {
		p.X.Min, p.X.Max = tlo, thi
	}
	if vhi >= vlo {
		fitY(p, vlo, vhi, true)
	}
	f.panels = []*plot.Plot{p}
	return f
}

// smallMultiples draws each trace in its own panel, with shared axes.
func smallMultiples(name, title, unit string, traces []Trace, scale float64) *figure {
	n := min(len(traces), maxTraces)
	if len(traces) > maxTraces {
		title += fmt.Sprintf(" (first %d of %d paths)", maxTraces, len(traces))
	}
	cols := min(n, 4)
	rows := (n + cols - 1) / cols
	f := &figure{name: name, title: title, cols: cols, w: 8.5 * vg.Inch, h: vg.Length(max(rows, 1)) * 1.7 * vg.Inch}
	if rows == 1 {
		f.h = 2.8 * vg.Inch
	}
	tlo, thi, vhi := math.Inf(1), math.Inf(-1), 0.0
	xys := make([]plotter.XYs, n)
	for i, t := range traces[:n] {
		xys[i] = traceXY(t, scale)
		for _, pt := range xys[i] {
			tlo, thi, vhi = min(tlo, pt.X), max(thi, pt.X), max(vhi, pt.Y)
		}
	}
	for i, t := range traces[:n] {
		xl, yl := "", ""
		if i/cols == rows-1 {
			xl = "time (µs)"
		}
		if i%cols == 0 {
			yl = unit
		}
		p := newPanel(t.Name, xl, yl)
		addSeries(p, seriesStyle(0, 1), xys[i])
		if thi > tlo {
			p.X.Min, p.X.Max = tlo, thi
		}
		fitY(p, 0, vhi, true)
		f.panels = append(f.panels, p)
	}
	return f
}

func traceXY(t Trace, scale float64) plotter.XYs {
	xy := make(plotter.XYs, 0, len(t.T))
	for i := range t.T {
		if v := t.V[i] * scale; !math.IsNaN(v) && !math.IsInf(v, 0) && !math.IsNaN(t.T[i]) && !math.IsInf(t.T[i], 0) {
			xy = append(xy, plotter.XY{X: t.T[i], Y: v})
		}
	}
	return xy
}
