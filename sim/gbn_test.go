package sim_test

import (
	"math"
	"testing"

	"github.com/mptx-dev/mptx/qp"
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

// lossSwitch sets a port's loss probability when it fires.
type lossSwitch struct {
	p    *sim.Port
	prob float64
}

func (l lossSwitch) Fire(sim.Time) { _ = l.p.SetLoss(l.prob) }

// TestLateAckBeyondGoBack: an acknowledgement that arrives after a
// timeout's go-back-N and covers everything posted leaves the requester
// nothing to send; it must leave the NIC's arbiter rather than build a
// packet past the last posted one from a stale send-queue entry
// (regression: the link-failure suite's retransmission count depended on
// the send queue's allocated size).
//
// One 128 KiB write (32 packets, about 11.2 µs at 100 Gb/s) on a
// dumbbell with 1 µs cables; every ACK is lost for the first 20 µs (the
// last one leaves the responder at about 15 µs), so the receiver has all
// 32 packets but the sender times out at 32.8 µs (exponent 3), goes back
// to PSN 0 and retransmits. The first duplicate draws an ACK for PSN 32,
// which arrives about 7.5 µs later, while the retransmission (11.2 µs) is
// mid-message: the sender must stop there. Exactly 32 packets reach the
// receiver in order, and the write completes once.
func TestLateAckBeyondGoBack(t *testing.T) {
	w := sim.NewWorld(1)
	tp, err := topo.Dumbbell(w, topo.DumbbellConfig{Common: topo.Common{NIC: sim.NICConfig{AckTimeout: 3}}, Left: 1, Right: 1})
	mustT(t, err)
	_, back := tp.Bottleneck.Ends()
	mustT(t, back.SetLoss(1))
	w.At(20*sim.Microsecond, lossSwitch{back, 0})
	c, _, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{})
	mustT(t, err)
	const size = 128 * units.KiB
	if n, err := c.PostSend(0, []qp.SendWR{{ID: 1, Op: qp.OpWriteImm, Len: size}}); n != 1 || err != nil {
		t.Fatalf("PostSend: %d, %v", n, err)
	}
	w.Run()
	q, r := c.QPs()[0].Counters(), c.PeerQPs()[0].Counters()
	t.Logf("requester %+v", q)
	t.Logf("responder %+v", r)
	if q.Timeouts != 1 {
		t.Errorf("%d timeouts, want 1 (the scenario needs the go-back)", q.Timeouts)
	}
	if r.Duplicates == 0 {
		t.Errorf("no duplicates at the responder: the scenario needs a retransmission")
	}
	want := uint64(size / sim.DefaultMTU)
	if r.RxPackets != want || r.RxBytes != uint64(size) {
		t.Errorf("responder accepted %d packets, %d bytes; want %d, %d", r.RxPackets, r.RxBytes, want, size)
	}
	if q.WRsDone != 1 || q.AckedBytes != uint64(size) || c.QPs()[0].Outstanding() != 0 {
		t.Errorf("requester: %d WRs done, %d bytes acknowledged, %d outstanding; want 1, %d, 0", q.WRsDone, q.AckedBytes, c.QPs()[0].Outstanding(), size)
	}
	if q.Retransmits >= want {
		t.Errorf("%d retransmissions: the late ACK should have cut the go-back short of %d", q.Retransmits, want)
	}
}
