package sim_test

import (
	"testing"

	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/sim/topo"
	"github.com/mptx-dev/mptx/units"
)

// TestLineRate: one flow on an idle path reaches line rate ×
// payload/(payload + headers).
//
// Derivation: the sender NIC sends back to back, so in steady state one
// 1 MiB WRITE WITH IMM occupies its wire for exactly wireTime(1 MiB): 256
// packets of 4096 payload + 62 header + 20 preamble/IFG bytes, plus one
// RETH (16) and one ImmDt (4). Between the first and the last completion
// the connection moves (N−1) messages in (N−1)·wireTime, so the goodput
// is 1 MiB / wireTime = rate × 4096/4178 × (1 − 20/1069588) — 98.04 % of
// the line rate. Store-and-forward and ACK delays shift both completion
// instants equally and cancel out.
func TestLineRate(t *testing.T) {
	for _, r := range []units.BitRate{25 * units.Gbps, 100 * units.Gbps, 400 * units.Gbps, 800 * units.Gbps} {
		w := sim.NewWorld(1)
		tp, err := topo.Star(w, topo.StarConfig{Common: topo.Common{HostRate: r}, Hosts: 2})
		mustT(t, err)
		c, _, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{})
		mustT(t, err)
		const size, seg = 64 * units.MiB, units.MiB
		b := newBulk(w, c, size, seg, 4)
		d := simqp.Drive(w, b)
		c.SetNotify(d.Notify)
		w.Run()
		if b.done != size {
			t.Fatalf("%v: delivered %v of %v", r, b.done, size)
		}
		got := float64(b.done-b.first) * 8 / (b.doneAt - b.firstAt).Seconds()
		want := float64(seg) * 8 / wireTime(seg, sim.DefaultMTU, r)
		t.Logf("%v: goodput %.4f Gb/s = %.4f%% of line rate; predicted %.4f Gb/s (%.4f%%)",
			r, got/1e9, 100*got/float64(r), want/1e9, 100*want/float64(r))
		if !within(got, want, 0.01) {
			t.Errorf("%v: goodput %.4f Gb/s, want %.4f Gb/s ± 1%%", r, got/1e9, want/1e9)
		}
	}
}
