package sim_test

import (
	"testing"

	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/sim/topo"
	"github.com/mptx-dev/mptx/units"
)

// incast runs n senders to one receiver on a star and returns the
// topology and the drivers.
func incast(t *testing.T, n int, size units.Bytes, common topo.Common) (*sim.World, *topo.Topology, []*bulk, []*simqp.Conn) {
	t.Helper()
	w := sim.NewWorld(7)
	tp, err := topo.Star(w, topo.StarConfig{Common: common, Hosts: n + 1})
	mustT(t, err)
	var bs []*bulk
	var cs []*simqp.Conn
	for i := 0; i < n; i++ {
		c, _, err := simqp.Connect(tp.Net, tp.Hosts[i], tp.Hosts[n], simqp.Options{})
		mustT(t, err)
		b := newBulk(w, c, size, units.MiB, 4)
		d := simqp.Drive(w, b)
		c.SetNotify(d.Notify)
		bs = append(bs, b)
		cs = append(cs, c)
	}
	return w, tp, bs, cs
}

// TestIncastPFC: 8:1 incast on a lossless switch, no congestion control.
//
// PFC must keep the fabric lossless: zero drops anywhere (the headroom is
// sized from the link's bandwidth-delay product, see PFCConfig.Headroom).
// Eight line-rate senders into one line-rate port exceed its share of
// the buffer within microseconds, so the switch must pause the senders.
// The bottleneck stays busy throughout: the receiver gets 8·16 MiB at
// rate × 4096/4178 (TestLineRate's efficiency), so the whole transfer
// takes 8·wireTime(16 MiB) plus about one base RTT; we allow 1 %.
func TestIncastPFC(t *testing.T) {
	const n, size = 8, 16 * units.MiB
	w, tp, bs, cs := incast(t, n, size, topo.Common{})
	w.Run()
	var end sim.Time
	for i, b := range bs {
		if b.done != size {
			t.Fatalf("sender %d delivered %v of %v", i, b.done, size)
		}
		end = max(end, b.doneAt)
	}
	tot := totals(tp.Net)
	if tot.Drops+tot.LinkDrops+tot.LossDrops+tot.NoRoute != 0 {
		t.Errorf("lossless incast dropped packets: %+v", tot)
	}
	var retx uint64
	for _, c := range cs {
		retx += c.QPs()[0].Counters().Retransmits
	}
	if retx != 0 {
		t.Errorf("lossless incast retransmitted %d packets, want 0", retx)
	}
	if tot.PauseSent == 0 || tot.PauseRecv == 0 {
		t.Errorf("no PFC pauses under 8:1 incast (sent %d, received %d)", tot.PauseSent, tot.PauseRecv)
	}
	var pausedSenders int
	for i := 0; i < n; i++ {
		c := tp.Hosts[i].NIC(0).Port().Counters()
		if c.PauseRecv > 0 && c.PausedTime > 0 {
			pausedSenders++
		}
	}
	bott := tp.Hosts[n].NIC(0).Port().Remote()
	want := float64(n) * wireTime(size, sim.DefaultMTU, tp.HostRate)
	got := (end - sim.Start).Seconds()
	util := want / got
	t.Logf("8:1 incast: %v in %v, bottleneck utilisation %.4f, pauses sent %d, senders paused %d/%d, bottleneck queue max %v mean %.0f B",
		units.Bytes(n)*size, end-sim.Start, util, tot.PauseSent, pausedSenders, n, bott.Counters().QueueMax, bott.Counters().QueueMean)
	if util < 0.99 || util > 1.0001 {
		t.Errorf("bottleneck utilisation %.4f, want within [0.99, 1]", util)
	}
	if pausedSenders != n {
		t.Errorf("%d of %d senders were paused, want all", pausedSenders, n)
	}
}

// TestIncastLossy: the same incast on a lossy switch with a small buffer
// (256 KiB, dynamic drop-tail). The queue overflows, so packets are dropped
// and go-back-N retransmits them; every byte still arrives.
func TestIncastLossy(t *testing.T) {
	const n, size = 8, 4 * units.MiB
	w, tp, bs, cs := incast(t, n, size, topo.Common{
		Switch: sim.SwitchConfig{Lossy: true, Buffer: 256 * units.KiB},
		NIC:    sim.NICConfig{AckTimeout: 8},
	})
	w.Run()
	for i, b := range bs {
		if b.done != size {
			t.Fatalf("sender %d delivered %v of %v", i, b.done, size)
		}
	}
	tot := totals(tp.Net)
	var retx, naks uint64
	for _, c := range cs {
		q := c.QPs()[0].Counters()
		retx += q.Retransmits
		naks += q.NAKsReceived
	}
	t.Logf("lossy incast: drops %d, retransmits %d, NAKs %d, pauses %d", tot.Drops, retx, naks, tot.PauseSent)
	if tot.Drops == 0 {
		t.Error("no drops with a 256 KiB lossy buffer under 8:1 incast")
	}
	if retx == 0 || naks == 0 {
		t.Errorf("retransmits %d, NAKs %d: want go-back-N recovery", retx, naks)
	}
	if tot.PauseSent != 0 {
		t.Errorf("lossy switch sent %d PFC pauses, want 0", tot.PauseSent)
	}
}
