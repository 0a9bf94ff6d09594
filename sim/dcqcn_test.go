package sim_test

import (
	"math"
	"testing"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/sim/topo"
	"github.com/mptx-dev/mptx/units"
)

type markSample struct {
	q      units.Bytes
	p      float64
	marked bool
}

type cnpTracer struct{ times map[uint32][]sim.Time }

func (c *cnpTracer) Trace(ev *sim.TraceEvent) {
	if ev.Kind == sim.TrCNPSent {
		c.times[ev.QPN] = append(c.times[ev.QPN], ev.At)
	}
}

// dcqcnResult is what the DCQCN incast tests measure over a window.
type dcqcnResult struct {
	rates    []float64 // per-flow goodput over the window, bit/s
	meanQ    float64   // time-average bottleneck queue over the window, bytes
	ecn      sim.ECNConfig
	marks    []markSample // every ECT packet leaving the bottleneck
	cnpTimes map[uint32][]sim.Time
	drops    uint64
	pauses   uint64
}

// dcqcnIncast runs n long flows into one receiver on a 100 Gb/s star with
// NIC DCQCN (the cc package's reaction point, defaults) and RED marking at
// the HPCC ns-3 thresholds, sender i starting at i·stagger, and measures
// over [from, to].
func dcqcnIncast(t *testing.T, n int, stagger, from, to sim.Time) dcqcnResult {
	t.Helper()
	w := sim.NewWorld(11)
	paper, err := cc.DCQCNProfile("paper", cc.PathInfo{LineRate: 100 * units.Gbps, BaseRTT: 10 * sim.Microsecond.Duration()})
	mustT(t, err)
	tr := &cnpTracer{times: map[uint32][]sim.Time{}}
	w.SetTracer(tr)
	tp, err := topo.Star(w, topo.StarConfig{
		Common: topo.Common{ECNByRate: true, NIC: sim.NICConfig{DCQCN: &paper}},
		Hosts:  n + 1,
	})
	mustT(t, err)
	bott := tp.Hosts[n].NIC(0).Port().Remote()
	res := dcqcnResult{cnpTimes: tr.times, ecn: *bott.ECN()}
	bott.OnMark = func(q units.Bytes, p float64, marked bool) {
		res.marks = append(res.marks, markSample{q, p, marked})
	}
	var rqs []*sim.QP
	for i := 0; i < n; i++ {
		w.RunUntil(sim.Start + sim.Time(i)*stagger)
		c, _, err := simqp.Connect(tp.Net, tp.Hosts[i], tp.Hosts[n], simqp.Options{})
		mustT(t, err)
		b := newBulk(w, c, units.GiB, units.MiB, 4)
		d := simqp.Drive(w, b)
		c.SetNotify(d.Notify)
		rqs = append(rqs, c.PeerQPs()[0])
	}
	w.RunUntil(from)
	rx0 := make([]uint64, n)
	for i, q := range rqs {
		rx0[i] = q.Counters().RxBytes
	}
	q0 := bott.Counters().QueueMean * float64(from-sim.Start)
	w.RunUntil(to)
	q1 := bott.Counters().QueueMean * float64(to-sim.Start)
	res.meanQ = (q1 - q0) / float64(to-from)
	for i, q := range rqs {
		res.rates = append(res.rates, float64(q.Counters().RxBytes-rx0[i])*8/(to-from).Seconds())
	}
	tot := totals(tp.Net)
	res.drops, res.pauses = tot.Drops, tot.PauseSent
	return res
}

// TestDCQCNIncastFair: 8 flows join one 100 Gb/s bottleneck 1 ms apart;
// with NIC DCQCN they converge to a fair share and the queue settles in
// the RED band.
//
// With the paper's DCQCN (profile "paper": g = 1/256, 55 µs increase timer)
// the latecomers catch up within about 30 ms, so we measure over
// [40 ms, 50 ms].
//
// Fairness: DCQCN's multiplicative decrease is proportional to the rate
// and its increase is additive and rate independent, so flows converge to
// equal rates (AIMD, Chiu and Jain 1989); over a 10 ms window after the
// last join, Jain's index must be at least 0.95 and the flows together
// must keep the bottleneck busy (≥ 95 % of the 98.04 % goodput ceiling).
//
// Queue: at equilibrium the marking probability p(q) must produce just
// enough CNPs to offset the additive increase, which needs 0 < p < Pmax,
// i.e. Kmin < q̄ < Kmax (Zhu et al., SIGCOMM'15, §4 fluid model).
func TestDCQCNIncastFair(t *testing.T) {
	const n = 8
	r := dcqcnIncast(t, n, sim.Millisecond, 40*sim.Millisecond, 50*sim.Millisecond)
	j := jain(r.rates)
	var sum float64
	for _, x := range r.rates {
		sum += x
	}
	ceiling := 100e9 * 4096 / 4178
	t.Logf("rates (Gb/s): %.2f", func() []float64 {
		g := make([]float64, len(r.rates))
		for i, x := range r.rates {
			g[i] = x / 1e9
		}
		return g
	}())
	t.Logf("Jain %.4f, aggregate %.2f Gb/s (%.1f%% of ceiling), mean queue %.0f B (Kmin %v, Kmax %v), drops %d, pauses %d",
		j, sum/1e9, 100*sum/ceiling, r.meanQ, r.ecn.Kmin, r.ecn.Kmax, r.drops, r.pauses)
	if j < 0.95 {
		t.Errorf("Jain index %.4f, want >= 0.95", j)
	}
	if sum < 0.95*ceiling {
		t.Errorf("aggregate goodput %.2f Gb/s, want >= 95%% of %.2f", sum/1e9, ceiling/1e9)
	}
	if r.meanQ <= float64(r.ecn.Kmin) || r.meanQ >= float64(r.ecn.Kmax) {
		t.Errorf("mean queue %.0f B, want between Kmin %v and Kmax %v", r.meanQ, r.ecn.Kmin, r.ecn.Kmax)
	}
	if r.drops != 0 {
		t.Errorf("%d drops on a lossless fabric", r.drops)
	}
}

// TestCNPSpacing: the notification point sends at most one CNP per QP per
// 50 µs (DCQCN §3.2; mlx5 np_min_time_between_cnps). One sender without
// congestion control drives two QPs through a 50 Gb/s bottleneck whose
// queue PFC holds far above Kmax, so every data packet arrives CE-marked
// and the limiter alone spaces the CNPs. The bottleneck's output is
// smooth, and the NIC alternates the two QPs, so each QP's packets arrive
// every 2 × 668.8 ns: every gap must be at least 50 µs, and all but the
// ones spanning the start and the end at most 50 µs + 1.34 µs.
func TestCNPSpacing(t *testing.T) {
	w := sim.NewWorld(5)
	tr := &cnpTracer{times: map[uint32][]sim.Time{}}
	w.SetTracer(tr)
	tp, err := topo.Dumbbell(w, topo.DumbbellConfig{
		Common: topo.Common{Switch: sim.SwitchConfig{ECN: &sim.ECNConfig{Kmin: 10 * units.KB, Kmax: 100 * units.KB, Pmax: 1}}},
		Left:   1, Right: 1, BottleneckRate: 50 * units.Gbps,
	})
	mustT(t, err)
	c, _, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{QPs: 2})
	mustT(t, err)
	b := newBulk(w, c, 64*units.MiB, units.MiB, 8)
	d := simqp.Drive(w, b)
	c.SetNotify(d.Notify)
	w.Run()
	const interval = 50 * sim.Microsecond
	slack := sim.TxTime(50*units.Gbps, 2*(sim.DefaultMTU+sim.DataHeaders+sim.WireOverhead)) + sim.Nanosecond
	var total, gaps, tight int
	minGap, maxGap := sim.Forever, sim.Time(0)
	for qpn, ts := range tr.times {
		total += len(ts)
		for i := 1; i < len(ts); i++ {
			g := ts[i] - ts[i-1]
			if g < interval {
				t.Errorf("QP %#x: CNPs at %v and %v, %v apart; want >= %v", qpn, ts[i-1], ts[i], g, interval)
			}
			gaps++
			if g <= interval+slack {
				tight++
			}
			minGap, maxGap = min(minGap, g), max(maxGap, g)
		}
	}
	t.Logf("%d CNPs to %d QPs, gaps %v..%v, %d of %d within %v of the interval", total, len(tr.times), minGap, maxGap, tight, gaps, slack)
	if len(tr.times) != 2 || total < 2*100 {
		t.Fatalf("%d CNPs to %d QPs: the scenario did not load the CNP limiter", total, len(tr.times))
	}
	if tight < gaps-2*2 {
		t.Errorf("only %d of %d CNP gaps within %v of the interval with every packet marked", tight, gaps, slack)
	}
}

// TestREDCurveInSim: the switch's marking decisions follow the RED curve.
// One 100 Gb/s sender feeds a 50 Gb/s bottleneck, so the bottleneck queue
// grows by one packet per packet sent, sweeping [0, XOFF] uniformly, and
// drains the same way when the flow ends; PFC (static XOFF 24 MB) holds
// it at the top in between. RED is set to Kmin 1 MB, Kmax 21 MB, Pmax 0.9
// so that the sweep covers the whole curve. Every ECT packet leaving the
// bottleneck is a Bernoulli trial with success probability p(q) for the
// queue q it leaves behind: see checkRED.
func TestREDCurveInSim(t *testing.T) {
	ecn := &sim.ECNConfig{Kmin: 1 * units.MB, Kmax: 21 * units.MB, Pmax: 0.9}
	var marks []markSample
	for seed := uint64(1); seed <= 2; seed++ {
		w := sim.NewWorld(seed)
		tp, err := topo.Dumbbell(w, topo.DumbbellConfig{
			Common: topo.Common{Switch: sim.SwitchConfig{
				ECN: ecn,
				PFC: sim.PFCConfig{XOff: 24 * units.MB, XOn: 23 * units.MB},
			}},
			Left: 1, Right: 1, BottleneckRate: 50 * units.Gbps,
		})
		mustT(t, err)
		a, _ := tp.Bottleneck.Ends()
		a.OnMark = func(q units.Bytes, p float64, marked bool) { marks = append(marks, markSample{q, p, marked}) }
		c, _, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{})
		mustT(t, err)
		b := newBulk(w, c, 64*units.MiB, units.MiB, 32)
		d := simqp.Drive(w, b)
		c.SetNotify(d.Notify)
		w.Run()
		if b.done != 64*units.MiB {
			t.Fatalf("delivered %v of 64MiB", b.done)
		}
	}
	checkRED(t, *ecn, marks)
}

func checkRED(t *testing.T, ecn sim.ECNConfig, marks []markSample) {
	t.Helper()
	const bins = 10
	var n [bins]int
	var m, psum [bins]float64
	var totP, totVar, totM float64
	var below, above, inBand int
	for _, s := range marks {
		if math.Abs(s.p-ecn.Prob(s.q)) > 1e-12 {
			t.Fatalf("hook reported p = %v at q = %v, RED gives %v", s.p, s.q, ecn.Prob(s.q))
		}
		switch {
		case s.q <= ecn.Kmin:
			below++
			if s.marked {
				t.Fatalf("packet marked at q = %v <= Kmin %v", s.q, ecn.Kmin)
			}
			continue
		case s.q > ecn.Kmax:
			above++
			if !s.marked {
				t.Fatalf("packet unmarked at q = %v > Kmax %v", s.q, ecn.Kmax)
			}
			continue
		}
		inBand++
		b := min(int(s.p/ecn.Pmax*bins), bins-1)
		n[b]++
		psum[b] += s.p
		totP += s.p
		totVar += s.p * (1 - s.p)
		if s.marked {
			m[b]++
			totM++
		}
	}
	used := 0
	for b := 0; b < bins; b++ {
		if n[b] < 300 {
			continue
		}
		used++
		pb := psum[b] / float64(n[b])
		got := m[b] / float64(n[b])
		se := math.Sqrt(pb * (1 - pb) / float64(n[b]))
		t.Logf("bin %d: %6d packets, marked %.4f, RED %.4f (±%.4f)", b, n[b], got, pb, 4*se)
		if math.Abs(got-pb) > 4*se {
			t.Errorf("bin %d: marked fraction %.4f, RED curve %.4f ± %.4f", b, got, pb, 4*se)
		}
	}
	t.Logf("%d packets below Kmin, %d in band, %d above Kmax; marks %.0f, expected %.1f ± %.1f", below, inBand, above, totM, totP, 4*math.Sqrt(totVar))
	if math.Abs(totM-totP) > 4*math.Sqrt(totVar) {
		t.Errorf("total marks %.0f, expected %.1f ± %.1f", totM, totP, 4*math.Sqrt(totVar))
	}
	if used < 8 {
		t.Errorf("only %d RED bins had >= 300 packets; the scenario does not sweep the curve", used)
	}
}
