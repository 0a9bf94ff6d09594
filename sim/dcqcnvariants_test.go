package sim_test

import (
	"flag"
	"fmt"
	"image/color"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/sim/topo"
	"github.com/mptx-dev/mptx/units"
)

// figure, when set, makes TestDCQCNVariants draw docs/dcqcn.md's figure:
//
//	go test ./sim -run TestDCQCNVariants -figure ../docs/dcqcn-variants.png
var figure = flag.String("figure", "", "write the DCQCN variants figure (PNG) to this file")

// dcqcnVariant is one reaction-point configuration of the figure.
type dcqcnVariant struct {
	name string
	cfg  func(cc.PathInfo) cc.DCQCNConfig
}

func dcqcnVariants() []dcqcnVariant {
	prof := func(name string, edit func(*cc.DCQCNConfig)) func(cc.PathInfo) cc.DCQCNConfig {
		return func(p cc.PathInfo) cc.DCQCNConfig {
			c, err := cc.DCQCNProfile(name, p)
			if err != nil {
				panic(err)
			}
			if edit != nil {
				edit(&c)
			}
			return c
		}
	}
	return []dcqcnVariant{
		{"paper", prof("paper", nil)},
		{"paper, no target clamp", prof("paper", func(c *cc.DCQCNConfig) { c.Clamp = cc.DCQCNClampAfterTimer })},
		{"paper, timer-only stages", prof("paper", func(c *cc.DCQCNConfig) { c.Increase, c.ByteCounter = cc.DCQCNIncreaseTimer, -1 })},
		{"paper, periodic cuts", prof("paper", func(c *cc.DCQCNConfig) { c.Decrease = cc.DCQCNDecreasePeriodic })},
		{"ns3 (RdmaHw)", prof("ns3", nil)},
		{"connectx (default)", prof("connectx", nil)},
	}
}

// variantIncast runs 16 long flows into one 100 Gb/s port with every
// sender's NIC running v, and samples sender 0's rate Rc and target Rt
// and the aggregate goodput every 10 µs for 5 ms.
func variantIncast(t *testing.T, v dcqcnVariant) (ts, rc, rt []float64, goodput float64) {
	t.Helper()
	const n = 16
	w := sim.NewWorld(7)
	path := cc.PathInfo{LineRate: 100 * units.Gbps, BaseRTT: 8 * time.Microsecond}
	cfg := v.cfg(path)
	tp, err := topo.Star(w, topo.StarConfig{
		Common: topo.Common{ECNByRate: true, Switch: sim.SwitchConfig{Buffer: 32 * units.MiB}, NIC: sim.NICConfig{DCQCN: &cfg}},
		Hosts:  n + 1,
	})
	mustT(t, err)
	var q0 *sim.QP
	var rq []*sim.QP
	for i := 0; i < n; i++ {
		c, _, err := simqp.Connect(tp.Net, tp.Hosts[i], tp.Hosts[n], simqp.Options{})
		mustT(t, err)
		b := newBulk(w, c, units.GiB, units.MiB, 4)
		d := simqp.Drive(w, b)
		c.SetNotify(d.Notify)
		if i == 0 {
			q0 = c.QPs()[0]
		}
		rq = append(rq, c.PeerQPs()[0])
	}
	const step, end = 10 * sim.Microsecond, 5 * sim.Millisecond
	for now := sim.Start + step; now <= sim.Start+end; now += step {
		w.RunUntil(now)
		d := q0.CC().(*cc.DCQCN)
		ts = append(ts, float64(now-sim.Start)/float64(sim.Microsecond))
		rc = append(rc, float64(d.Rate())/1e9)
		rt = append(rt, float64(d.TargetRate())/1e9)
	}
	var rx uint64
	for _, q := range rq {
		rx += q.Counters().RxBytes
	}
	return ts, rc, rt, float64(rx) * 8 / end.Seconds() / 1e9
}

// TestDCQCNVariants runs each reaction-point variant in a 16→1 incast (the
// same notification point for all: a CNP per QP at most every 50 µs) and
// checks the differences docs/dcqcn.md explains. With Rt ← Rc on every cut
// (the paper) a burst of cuts drags the target down with the rate, so the
// first fast recovery after the burst ends far below the pre-congestion
// rate; without the clamp the target stays where the burst began and the
// same recovery climbs back towards it. With timer-only stages (no byte
// counter) hyper increase comes after F+1 timer periods, instead of
// waiting for a 10 MB byte counter a flow at a few Gb/s takes tens of ms
// to fill.
func TestDCQCNVariants(t *testing.T) {
	vs := dcqcnVariants()
	type run struct {
		ts, rc, rt []float64
		goodput    float64
	}
	runs := make([]run, len(vs))
	for i, v := range vs {
		ts, rc, rt, g := variantIncast(t, v)
		runs[i] = run{ts, rc, rt, g}
		minRt := rt[0]
		for _, x := range rt {
			minRt = min(minRt, x)
		}
		t.Logf("%-26s goodput %6.2f Gb/s, sender 0 at 5 ms: Rc %6.2f Rt %6.2f Gb/s, lowest Rt %6.2f", v.name, g, rc[len(rc)-1], rt[len(rt)-1], minRt)
	}
	lowest := func(xs []float64) float64 {
		m := xs[0]
		for _, x := range xs {
			m = min(m, x)
		}
		return m
	}
	if p, nc := lowest(runs[0].rt), lowest(runs[1].rt); !(nc > 2*p) {
		t.Errorf("lowest target rate: paper %.2f Gb/s, no clamp %.2f; want the unclamped target at least twice the clamped one", p, nc)
	}
	if p, tm := runs[0].goodput, runs[2].goodput; !(tm > p+20) {
		t.Errorf("goodput: paper %.1f Gb/s, timer-only stages %.1f; want the timer-only stages at least 20 Gb/s ahead", p, tm)
	}
	if *figure == "" {
		return
	}
	p := plot.New()
	p.Title.Text = "DCQCN variants: sender 0's rate in a 16→1 incast at 100 Gb/s"
	p.X.Label.Text = "time (µs)"
	p.Y.Label.Text = "Rc (Gbit/s)"
	p.Legend.Top = true
	colors := []color.RGBA{{0, 0, 0, 255}, {213, 94, 0, 255}, {0, 114, 178, 255}, {0, 158, 115, 255}, {204, 121, 167, 255}, {230, 159, 0, 255}}
	for i, r := range runs {
		pts := make(plotter.XYs, len(r.ts))
		for k := range r.ts {
			pts[k].X, pts[k].Y = r.ts[k], r.rc[k]
		}
		l, err := plotter.NewLine(pts)
		mustT(t, err)
		l.Color = colors[i%len(colors)]
		l.Width = vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (%.0f Gb/s)", vs[i].name, runs[i].goodput), l)
	}
	fair := plotter.NewFunction(func(float64) float64 { return 100.0 / 16 * 4096 / 4178 })
	fair.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	fair.Color = color.RGBA{128, 128, 128, 255}
	p.Add(fair)
	p.Legend.Add("fair share", fair)
	p.Y.Min, p.Y.Max = 0, 100
	mustT(t, p.Save(9*vg.Inch, 5*vg.Inch, *figure))
}
