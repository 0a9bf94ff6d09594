package sim_test

import (
	"testing"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/sim/topo"
	"github.com/mptx-dev/mptx/units"
)

// TestLinkFailure: a spine uplink fails mid-transfer. The QPs whose data
// or ACKs cross it stop making progress; each hits retry exhaustion
// exactly (retry count + 1) ACK timeouts after its last acknowledgement,
// i.e. 8 × 4.096 µs × 2^8 = 8.39 ms after the failure, within one base
// RTT (the last ACKs were in flight when the cable went down) — and the
// transfer still finishes on the surviving paths, which take over the
// failed work requests.
func TestLinkFailure(t *testing.T) {
	w := sim.NewWorld(21)
	const timeoutExp, retries = 8, 7
	tp, err := topo.LeafSpine(w, topo.LeafSpineConfig{
		Common: topo.Common{NIC: sim.NICConfig{AckTimeout: timeoutExp, RetryCount: retries}},
		Leaves: 2, Spines: 4, HostsPerLeaf: 1, UplinkRate: 100 * units.Gbps,
	})
	mustT(t, err)
	const paths = 8
	c, _, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{QPs: paths})
	mustT(t, err)
	// Fail the uplink carrying path 0's data.
	var cable *sim.Cable
	for _, p := range tp.Net.PathOf(c.QPs()[0]) {
		if p.Switch() == tp.Leaves[0] {
			cable = p.Cable()
		}
	}
	uses := func(ps []*sim.Port) bool {
		for _, p := range ps {
			if p.Cable() == cable {
				return true
			}
		}
		return false
	}
	affected := make([]bool, paths)
	var nAff int
	for i := 0; i < paths; i++ {
		affected[i] = uses(tp.Net.PathOf(c.QPs()[i])) || uses(tp.Net.PathOf(c.PeerQPs()[i]))
		if affected[i] {
			nAff++
		}
	}
	if nAff == 0 || nAff == paths {
		t.Fatalf("%d of %d paths cross the failed cable; the scenario needs some of each", nAff, paths)
	}
	const size = 256 * units.MiB
	b := newBulk(w, c, size, units.MiB, 2)
	d := simqp.Drive(w, b)
	c.SetNotify(d.Notify)
	tf := 300 * sim.Microsecond
	cable.SetDown(tf)
	w.Run()

	rto := sim.AckTimeoutDuration(timeoutExp)
	rtt := tp.Net.BaseRTT(c.QPs()[0])
	want := tf + (retries+1)*rto
	for i := 0; i < paths; i++ {
		q := c.QPs()[i]
		if !affected[i] {
			if b.dead[i] || q.Err() {
				t.Errorf("path %d does not cross the failed cable but failed", i)
			}
			continue
		}
		if !q.Err() || !b.dead[i] {
			t.Errorf("path %d crosses the failed cable but did not fail", i)
			continue
		}
		got := b.failAt[i]
		t.Logf("path %d: retry exhaustion at %v (failure + %v); predicted failure + %v ± %v; %d timeouts",
			i, got, got-tf, want-tf, rtt, q.Counters().Timeouts)
		if got < want-rtt || got > want+rtt {
			t.Errorf("path %d: retry exhaustion at %v, want %v ± %v", i, got, want, rtt)
		}
		if q.Counters().Timeouts != retries+1 {
			t.Errorf("path %d: %d timeouts, want %d", i, q.Counters().Timeouts, retries+1)
		}
	}
	if b.done != size {
		t.Fatalf("delivered %v of %v after the failure", b.done, size)
	}
	t.Logf("%d of %d paths failed; %v delivered by %v", nAff, paths, b.done, b.doneAt)
	if _, err := c.PostSend(0, []qp.SendWR{{ID: 1, Op: qp.OpWrite, Len: 1}}); err == nil {
		t.Error("PostSend on a QP in the error state succeeded")
	}
}
