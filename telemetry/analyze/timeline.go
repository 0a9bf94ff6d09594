package analyze

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/mptx-dev/mptx/telemetry/schema"
)

// TimelineFormats lists the image formats Timeline writes.
var TimelineFormats = []string{"png", "svg"}

// Timeline colours.
var (
	colAcked     = color.RGBA{R: 0x4c, G: 0x78, B: 0xa8, A: 0xff} // blue
	colStraggler = color.RGBA{R: 0xf5, G: 0x85, B: 0x18, A: 0xff} // orange
	colRequeued  = color.RGBA{R: 0xe4, G: 0x57, B: 0x56, A: 0xff} // red
	colOther     = color.RGBA{R: 0xba, G: 0xb0, B: 0xac, A: 0xff} // grey: abandoned, superseded
	colCritical  = color.Black
)

// Timeline draws t as a per-path Gantt chart: one row per path, one bar
// per chunk attempt from its start to its end (overlapping attempts on a
// path get lanes within the row, at most maxLanes), coloured by outcome,
// stragglers in orange and the critical chunk's final attempt outlined.
// format is png or svg; width and height are in inches (0 means 10 wide by
// one per path plus one high), bounded by MaxImageSide and MaxImageArea;
// at most MaxImageRows paths and MaxImageBars attempts are drawn, larger
// input is an error.
func Timeline(w io.Writer, t *Transfer, format string, widthIn, heightIn float64) error {
	if !slices.Contains(TimelineFormats, format) {
		return fmt.Errorf("analyze: timeline format %q: valid: png, svg", format)
	}
	if len(t.Attempts) == 0 {
		return fmt.Errorf("analyze: transfer %d has no chunk spans to draw", t.ID)
	}
	if len(t.Attempts) > MaxImageBars {
		return fmt.Errorf("analyze: transfer %d has %d chunk attempts: a PNG/SVG timeline draws at most %d (use the HTML timeline, up to %d)", t.ID, len(t.Attempts), MaxImageBars, MaxHTMLBars)
	}
	rows := map[int]struct{}{}
	for _, a := range t.Attempts {
		rows[a.Path] = struct{}{}
	}
	width, height, err := checkImageSize(widthIn, heightIn, len(rows))
	if err != nil {
		return err
	}
	g := newGantt(t)
	p := plot.New()
	p.Title.Text = fmt.Sprintf("mptx transfer %d: %s in %v (%s)", t.ID, FormatBytes(t.Bytes), round(t.Completion), t.Outcome)
	p.X.Label.Text = "time since transfer start (" + g.unitName + ")"
	p.Y.Label.Text = "path"
	p.X.Min = 0
	p.Add(g)
	ticks := make([]plot.Tick, len(g.rows))
	for i, r := range g.rows {
		label := fmt.Sprintf("%d", r.path)
		for _, ps := range t.PerPath {
			if ps.Path == r.path && ps.Device != "" {
				label += " " + ps.Device
			}
		}
		ticks[i] = plot.Tick{Value: float64(i), Label: label}
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = -0.6, float64(len(g.rows))-0.4
	for _, e := range []struct {
		name string
		c    color.Color
	}{{"acked", colAcked}, {"straggler", colStraggler}, {"requeued", colRequeued}, {"abandoned/superseded", colOther}} {
		p.Legend.Add(e.name, swatch{e.c})
	}
	p.Legend.Add("critical chunk", outlined{})
	p.Legend.Top = true
	wt, err := p.WriterTo(width, height, format)
	if err != nil {
		return fmt.Errorf("analyze: timeline: %w", err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("analyze: timeline: %w", err)
	}
	return nil
}

// maxLanes bounds the lanes of a row (attempts overlapping on one path):
// past it, attempts share the last lane.
const maxLanes = 32

type ganttRow struct {
	path  int
	lanes int
}

type ganttBar struct {
	row, lane  int
	start, end float64
	col        color.Color
	critical   bool
}

// gantt is a plot.Plotter drawing the bars.
type gantt struct {
	rows     []ganttRow
	bars     []ganttBar
	xmax     float64
	unitName string
}

func newGantt(t *Transfer) *gantt {
	g := &gantt{}
	unit := time.Microsecond
	g.unitName = "µs"
	if t.Completion >= 10*time.Millisecond {
		unit, g.unitName = time.Millisecond, "ms"
	}
	straggler := map[[3]int64]bool{}
	for _, s := range t.Stragglers {
		straggler[[3]int64{s.Chunk, int64(s.Path), int64(s.Attempt)}] = true
	}
	rowOf := map[int]int{}
	var paths []int
	for _, a := range t.Attempts {
		if _, ok := rowOf[a.Path]; !ok {
			rowOf[a.Path] = 0
			paths = append(paths, a.Path)
		}
	}
	slices.Sort(paths)
	for i, p := range paths {
		rowOf[p] = i
		g.rows = append(g.rows, ganttRow{path: p})
	}
	// Greedy interval partitioning into lanes per path.
	laneEnds := make([][]time.Duration, len(paths))
	atts := slices.Clone(t.Attempts)
	slices.SortStableFunc(atts, func(x, y Attempt) int { return cmp.Compare(x.Start, y.Start) })
	for _, a := range atts {
		r := rowOf[a.Path]
		lane := -1
		for l, end := range laneEnds[r] {
			if end <= a.Start {
				lane = l
				break
			}
		}
		if lane < 0 && len(laneEnds[r]) < maxLanes {
			lane = len(laneEnds[r])
			laneEnds[r] = append(laneEnds[r], 0)
		}
		if lane < 0 { // as many lanes as a row holds: overlap in the last
			lane = maxLanes - 1
		}
		laneEnds[r][lane] = a.End
		col := colOther
		switch {
		case a.Outcome == schema.OutcomeAcked && straggler[[3]int64{a.Chunk, int64(a.Path), int64(a.Try)}]:
			col = colStraggler
		case a.Outcome == schema.OutcomeAcked:
			col = colAcked
		case a.Outcome == schema.OutcomeRequeued:
			col = colRequeued
		}
		crit := t.Critical != nil && a.Chunk == t.Critical.Chunk && a.Path == t.Critical.Path &&
			a.Outcome == schema.OutcomeAcked && a.End == t.Critical.Finish
		b := ganttBar{row: r, lane: lane, start: float64(a.Start) / float64(unit), end: float64(a.End) / float64(unit), col: col, critical: crit}
		g.bars = append(g.bars, b)
		g.xmax = max(g.xmax, b.end)
	}
	for r := range g.rows {
		g.rows[r].lanes = max(1, len(laneEnds[r]))
	}
	g.xmax = max(g.xmax, float64(t.Completion)/float64(unit))
	return g
}

func (g *gantt) DataRange() (xmin, xmax, ymin, ymax float64) {
	// 20% headroom on the right keeps the legend off the bars.
	return 0, max(g.xmax*1.2, 1e-9), -0.5, float64(len(g.rows)) - 0.5
}

func (g *gantt) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	const rowHeight = 0.8 // of the unit row spacing
	outline := draw.LineStyle{Color: colCritical, Width: vg.Points(1.5)}
	edge := draw.LineStyle{Color: color.White, Width: vg.Points(0.3)}
	for _, b := range g.bars {
		lanes := float64(g.rows[b.row].lanes)
		h := rowHeight / lanes
		y0 := float64(b.row) - rowHeight/2 + float64(b.lane)*h
		x0, x1 := trX(b.start), trX(b.end)
		if x1-x0 < 0.5 {
			x1 = x0 + 0.5
		}
		ya, yb := trY(y0+0.05*h), trY(y0+0.95*h)
		pts := []vg.Point{{X: x0, Y: ya}, {X: x1, Y: ya}, {X: x1, Y: yb}, {X: x0, Y: yb}}
		c.FillPolygon(b.col, pts)
		sty := edge
		if b.critical {
			sty = outline
		}
		c.StrokeLines(sty, append(pts, pts[0]))
	}
}

// swatch is a legend thumbnail: a filled box.
type swatch struct{ c color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}}
	c.FillPolygon(s.c, pts)
}

// outlined is the legend thumbnail for the critical chunk: an outline.
type outlined struct{}

func (outlined) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Min.Y}}
	c.StrokeLines(draw.LineStyle{Color: colCritical, Width: vg.Points(1.5)}, pts)
}
