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

// TestECMPCollisions: H flows hashed over S equal-cost uplinks collide as
// balls thrown into bins predict.
//
// With a uniform hash, each of H flows picks one of S uplinks
// independently, so the expected number of occupied uplinks is
// S·(1 − (1 − 1/S)^H) and the expected number of collisions (flows that
// share an uplink with an earlier one) is H minus that. Each trial builds
// a fresh two-leaf fabric (new switch seeds, new UDP source ports), sends
// one packet per flow from H hosts under leaf 0 to H hosts under leaf 1,
// and counts the uplinks of leaf 0 that carried data. Over T trials the
// mean must be within 4 standard errors of the expectation.
func TestECMPCollisions(t *testing.T) {
	trials := 300
	if testing.Short() || raceEnabled {
		trials = 100
	}
	for _, tc := range []struct{ H, S int }{{8, 8}, {16, 4}, {4, 16}, {32, 32}} {
		var sum, sum2 float64
		for trial := 0; trial < trials; trial++ {
			w := sim.NewWorld(uint64(1000*tc.H + tc.S*100000 + trial))
			tp, err := topo.LeafSpine(w, topo.LeafSpineConfig{Leaves: 2, Spines: tc.S, HostsPerLeaf: tc.H})
			mustT(t, err)
			for i := 0; i < tc.H; i++ {
				c, _, err := simqp.Connect(tp.Net, tp.Hosts[i], tp.Hosts[tc.H+i], simqp.Options{})
				mustT(t, err)
				if n, err := c.PostSend(0, []qp.SendWR{{ID: 1, Op: qp.OpWriteImm, Len: 4 * units.KiB}}); n != 1 || err != nil {
					t.Fatal(n, err)
				}
			}
			w.Run()
			occupied := 0
			for _, p := range tp.Leaves[0].Ports() {
				if p.Remote().Switch() != nil && p.Counters().TxData > 0 {
					occupied++
				}
			}
			coll := float64(tc.H - occupied)
			sum += coll
			sum2 += coll * coll
		}
		n := float64(trials)
		mean := sum / n
		sd := math.Sqrt(sum2/n - mean*mean)
		se := sd / math.Sqrt(n)
		H, S := float64(tc.H), float64(tc.S)
		want := H - S*(1-math.Pow(1-1/S, H))
		t.Logf("H=%d S=%d: mean collisions %.3f (sd %.3f), balls-into-bins %.3f ± %.3f", tc.H, tc.S, mean, sd, want, 4*se)
		if math.Abs(mean-want) > 4*se+1e-9 {
			t.Errorf("H=%d S=%d: mean collisions %.3f, want %.3f ± %.3f", tc.H, tc.S, mean, want, 4*se)
		}
	}
}

// TestSpray: in spraying mode one flow's packets spread uniformly over the
// uplinks: each of S uplinks carries a Binomial(N, 1/S) share of N
// packets, which must be within 5 standard deviations of N/S. With ECMP
// the same flow uses exactly one uplink.
func TestSpray(t *testing.T) {
	const S = 4
	for _, spray := range []bool{false, true} {
		w := sim.NewWorld(9)
		tp, err := topo.LeafSpine(w, topo.LeafSpineConfig{
			Common: topo.Common{Switch: sim.SwitchConfig{Spray: spray}, NIC: sim.NICConfig{AckTimeout: 8}},
			Leaves: 2, Spines: S, HostsPerLeaf: 1,
		})
		mustT(t, err)
		c, _, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{})
		mustT(t, err)
		size := 16 * units.MiB
		if testing.Short() || raceEnabled {
			size = 4 * units.MiB
		}
		b := newBulk(w, c, size, units.MiB, 4)
		d := simqp.Drive(w, b)
		c.SetNotify(d.Notify)
		w.Run()
		if b.done != size {
			t.Fatalf("spray=%v: delivered %v", spray, b.done)
		}
		var counts []float64
		var total float64
		for _, p := range tp.Leaves[0].Ports() {
			if p.Remote().Switch() != nil {
				x := float64(p.Counters().TxData)
				counts = append(counts, x)
				total += x
			}
		}
		used := 0
		for _, x := range counts {
			if x > 0 {
				used++
			}
		}
		q := c.QPs()[0].Counters()
		t.Logf("spray=%v: uplink data packets %v, OOS drops at the receiver %d, retransmits %d", spray, counts, c.PeerQPs()[0].Counters().OOSDrops, q.Retransmits)
		if !spray {
			if used != 1 {
				t.Errorf("ECMP spread one flow over %d uplinks, want 1", used)
			}
			continue
		}
		mean := total / S
		sd := math.Sqrt(total * (1.0 / S) * (1 - 1.0/S))
		for i, x := range counts {
			if math.Abs(x-mean) > 5*sd {
				t.Errorf("spray: uplink %d carried %.0f packets, want %.0f ± %.0f", i, x, mean, 5*sd)
			}
		}
	}
}
