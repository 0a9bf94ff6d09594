package sim_test

import (
	"math"
	"testing"

	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/sim/topo"
	"github.com/mptx-dev/mptx/units"
)

// TestGoBackNLoss: go-back-N under 0.1 % random loss on a long path loses
// goodput as "one bandwidth-delay product per loss" predicts.
//
// Path: host → switch → switch → host at 100 Gb/s, 10 µs per cable; loss
// p = 0.001 on the middle cable's data direction. Derivation (renewal
// argument): the sender restarts from the lost packet when the NAK
// arrives. If packet k is lost, the receiver notices when k+1 arrives,
// T_rx = t_pkt + 3·(t_pkt + d) after k's transmission began (store and
// forward over three cables), and its NAK takes 3·(t_ack + d) back (ACKs
// travel in the empty control class). Meanwhile the sender kept
// transmitting back to back, so W = ⌈T_nak/t_pkt⌉ − 1 packets after k are
// wasted, and each loss costs W+1 retransmissions (k included). A round
// delivers K packets before its first loss, E[K] = (1−p)/p, and transmits
// E[K] + 1 + W, so goodput = G₀·(1−p)/(1 + p·W) with G₀ the loss-free
// goodput (TestLineRate). Losses among the wasted packets cost nothing
// extra. With 1 GiB (~262k packets, ~300 losses) the Poisson noise on the
// goodput is about 1 %, so we allow 3 %, and 10 % on retransmissions per
// loss.
func TestGoBackNLoss(t *testing.T) {
	const p = 0.001
	const d = 10 * sim.Microsecond
	size := units.GiB
	tol := 0.03
	if testing.Short() {
		size, tol = 256*units.MiB, 0.06
	}
	w := sim.NewWorld(3)
	tp, err := topo.Dumbbell(w, topo.DumbbellConfig{Common: topo.Common{Delay: d}, Left: 1, Right: 1})
	mustT(t, err)
	a, _ := tp.Bottleneck.Ends()
	mustT(t, a.SetLoss(p))
	c, _, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{})
	mustT(t, err)
	b := newBulk(w, c, size, 4*units.MiB, 8)
	dr := simqp.Drive(w, b)
	c.SetNotify(dr.Notify)
	w.Run()
	if b.done != size {
		t.Fatalf("delivered %v of %v", b.done, size)
	}
	r := tp.HostRate
	tPkt := sim.TxTime(r, sim.DefaultMTU+sim.DataHeaders+sim.WireOverhead)
	tAck := sim.TxTime(r, sim.AckSize+sim.WireOverhead)
	tRx := tPkt + 3*(tPkt+d)
	tNak := tRx + 3*(tAck+d)
	W := math.Ceil(float64(tNak)/float64(tPkt)) - 1
	g0 := float64(r) * sim.DefaultMTU / (sim.DefaultMTU + sim.DataHeaders + sim.WireOverhead)
	want := g0 * (1 - p) / (1 + p*W)
	got := float64(b.done-b.first) * 8 / (b.doneAt - b.firstAt).Seconds()
	q := c.QPs()[0].Counters()
	losses := a.Counters().LossDrops
	// Losses that hit the first transmission of a round are the ones that
	// cost a go-back; count them as the NAKs received plus timeouts.
	rounds := q.NAKsReceived + q.Timeouts
	perLoss := float64(q.Retransmits) / float64(rounds)
	t.Logf("W = %.0f packets; goodput %.3f Gb/s, predicted %.3f Gb/s (loss-free %.3f); %d losses, %d go-backs, %.1f retransmissions per go-back (predicted %.0f)",
		W, got/1e9, want/1e9, g0/1e9, losses, rounds, perLoss, W+1)
	if !within(got, want, tol) {
		t.Errorf("goodput %.3f Gb/s, want %.3f ± %.0f%%", got/1e9, want/1e9, 100*tol)
	}
	if !within(perLoss, W+1, 0.10) {
		t.Errorf("%.1f retransmissions per go-back, want %.0f ± 10%%", perLoss, W+1)
	}
}
