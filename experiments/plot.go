package experiments

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// maxTraces bounds the lines one time-series plot draws.
const maxTraces = 16

// PlotFormats are the image formats every plot is written in.
var PlotFormats = []string{"png", "svg"}

// WritePlots draws a scenario's plots into dir and returns their file
// names (relative to dir, PNG first):
//
//   - fct-cdf: tensor completion-time CDF per policy (seeds pooled);
//   - queue-compare: the deepest switch queue over time per policy;
//   - throughput-<policy>, queues-<policy>, rate-<policy>, window-<policy>:
//     per-path throughput, queue depths and per-path CC rate and window over
//     time, from each policy's first seed.
func WritePlots(dir string, s *ScenarioSummary, results []*Result) ([]string, error) {
	var files []string
	save := func(p *plot.Plot, name string) error {
		for _, ext := range PlotFormats {
			f := name + "." + ext
			if err := p.Save(8*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, f)); err != nil {
				return fmt.Errorf("plot %s: %w", f, err)
			}
			files = append(files, f)
		}
		return nil
	}
	if p := fctCDF(s); p != nil {
		if err := save(p, "fct-cdf"); err != nil {
			return nil, err
		}
	}
	first := firstSeedRuns(s, results)
	if p := queueCompare(s, first); p != nil {
		if err := save(p, "queue-compare"); err != nil {
			return nil, err
		}
	}
	for _, pol := range s.Policies {
		r := first[pol.Policy]
		if r == nil || r.Series == nil {
			continue
		}
		slug := Slug(pol.Policy)
		title := fmt.Sprintf("%s — %s (seed %d)", s.Scenario, pol.Policy, r.Row.Seed)
		for _, ts := range []struct {
			name, what, unit string
			traces           []Trace
		}{
			{"throughput", "per-path throughput", "Gbit/s", r.Series.Throughput},
			{"queues", "switch queue depth", "KiB", kib(r.Series.Queues)},
			{"rate", "CC rate per path", "Gbit/s", r.Series.Rate},
			{"window", "CC window per path", "KiB", kib(r.Series.Window)},
		} {
			if len(ts.traces) == 0 {
				continue
			}
			p := timePlot(title+": "+ts.what, ts.unit, ts.traces)
			if err := save(p, ts.name+"-"+slug); err != nil {
				return nil, err
			}
		}
	}
	return files, nil
}

// Slug turns a policy label into a file-name part ("dcqcn 4qp" → "dcqcn-4qp").
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
	return strings.TrimSuffix(b.String(), "-")
}

// firstSeedRuns picks, per policy, the run with the lowest seed.
func firstSeedRuns(s *ScenarioSummary, results []*Result) map[string]*Result {
	out := map[string]*Result{}
	for _, r := range results {
		if r.Row.Scenario != s.Scenario {
			continue
		}
		if cur := out[r.Row.Policy]; cur == nil || r.Row.Seed < cur.Row.Seed {
			out[r.Row.Policy] = r
		}
	}
	return out
}

func newPlot(title, xl, yl string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xl
	p.Y.Label.Text = yl
	p.X.Tick.Marker = compactTicks{plot.DefaultTicks{}}
	p.Y.Tick.Marker = compactTicks{plot.DefaultTicks{}}
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())
	return p
}

// compactTicks relabels ticks with the fewest digits that tell them apart
// ("2500", not "2500.00").
type compactTicks struct{ plot.Ticker }

func (c compactTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := c.Ticker.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 6, 64)
		}
	}
	return ts
}

// roomForLegend widens the x axis so a top-right legend of n entries sits
// beside the data rather than on it.
func roomForLegend(p *plot.Plot, n int) {
	if n == 0 || p.X.Max <= p.X.Min {
		return
	}
	p.X.Max += (p.X.Max - p.X.Min) * min(0.15+0.02*float64(n), 0.45)
}

func addLine(p *plot.Plot, i int, name string, xy plotter.XYs) {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return // no finite points: nothing to draw
	}
	l.Color = plotutil.Color(i)
	l.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
	l.Width = vg.Points(1.2)
	p.Add(l)
	p.Legend.Add(name, l)
}

func fctCDF(s *ScenarioSummary) *plot.Plot {
	lo, hi := math.Inf(1), 0.0
	for _, pol := range s.Policies {
		if n := len(pol.FCTsUs); n > 0 {
			lo, hi = min(lo, pol.FCTsUs[0]), max(hi, pol.FCTsUs[n-1])
		}
	}
	if hi == 0 {
		return nil
	}
	p := newPlot(s.Scenario+": tensor completion time", "completion time (µs)", "CDF")
	if lo > 0 && hi/lo > 50 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Y.Min, p.Y.Max = 0, 1
	for i, pol := range s.Policies {
		n := len(pol.FCTsUs)
		if n == 0 {
			continue
		}
		xy := make(plotter.XYs, 0, 2*n)
		for k, x := range pol.FCTsUs {
			xy = append(xy, plotter.XY{X: x, Y: float64(k) / float64(n)}, plotter.XY{X: x, Y: float64(k+1) / float64(n)})
		}
		addLine(p, i, pol.Policy, xy)
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(12)
	return p
}

func queueCompare(s *ScenarioSummary, first map[string]*Result) *plot.Plot {
	p := newPlot(s.Scenario+": deepest switch queue (first seed)", "time (µs)", "KiB")
	drawn := false
	for i, pol := range s.Policies {
		r := first[pol.Policy]
		if r == nil || r.Series == nil || len(r.Series.Queues) == 0 {
			continue
		}
		q := r.Series.Queues[0]
		addLine(p, i, pol.Policy, traceXY(q, 1.0/1024))
		drawn = true
	}
	if !drawn {
		return nil
	}
	roomForLegend(p, len(s.Policies))
	p.Legend.Left = false
	return p
}

func timePlot(title, unit string, traces []Trace) *plot.Plot {
	p := newPlot(title, "time (µs)", unit)
	for i, t := range traces[:min(len(traces), maxTraces)] {
		addLine(p, i, t.Name, traceXY(t, 1))
	}
	if len(traces) > maxTraces {
		p.Title.Text += fmt.Sprintf(" (first %d of %d)", maxTraces, len(traces))
	}
	roomForLegend(p, min(len(traces), maxTraces))
	p.Legend.Left = false
	return p
}

func traceXY(t Trace, scale float64) plotter.XYs {
	xy := make(plotter.XYs, 0, len(t.T))
	for i := range t.T {
		if v := t.V[i] * scale; !math.IsNaN(v) && !math.IsInf(v, 0) {
			xy = append(xy, plotter.XY{X: t.T[i], Y: v})
		}
	}
	return xy
}

func kib(ts []Trace) []Trace {
	out := make([]Trace, len(ts))
	for i, t := range ts {
		v := make([]float64, len(t.V))
		for k, x := range t.V {
			v[k] = x / 1024
		}
		out[i] = Trace{Name: t.Name, T: t.T, V: v}
	}
	return out
}
