package sim_test

import (
	"testing"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/sim/topo"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// engineConn is one mptx connection (the real driver and multipath engine)
// on the simulator.
type engineConn struct {
	conn   *simqp.Conn
	snd    *mptx.Sender
	rcv    *mptx.Receiver
	sd     *simqp.Driver
	doneAt vtime.Time
	err    error
	rdone  bool
}

func newEngineConn(t *testing.T, w *sim.World, net *sim.Network, src, dst *sim.Host, paths int, eng multipath.Config) *engineConn {
	t.Helper()
	conn, recv, err := simqp.Connect(net, src, dst, simqp.Options{QPs: paths})
	mustT(t, err)
	e := &engineConn{conn: conn}
	e.snd, err = mptx.NewSender(conn, mptx.SenderConfig{Engine: eng, OnDone: func(_ multipath.TransferID, now vtime.Time, err error) {
		e.doneAt, e.err = now, err
	}})
	mustT(t, err)
	e.rcv, err = mptx.NewReceiver(recv, mptx.ReceiverConfig{OnDone: func(_ multipath.TransferID, _ vtime.Time, err error) {
		e.rdone = err == nil
	}})
	mustT(t, err)
	e.sd = simqp.Drive(w, e.snd)
	conn.SetNotify(e.sd.Notify)
	rd := simqp.Drive(w, e.rcv)
	recv.SetNotify(rd.Notify)
	return e
}

// submit starts a transfer of size bytes now.
func (e *engineConn) submit(t *testing.T, w *sim.World, id multipath.TransferID, size units.Bytes) {
	t.Helper()
	slot, plan, err := e.snd.Submit(w.Now().VTime(), multipath.TransferSpec{ID: id, Size: size})
	mustT(t, err)
	mustT(t, e.rcv.Expect(slot, id, plan, 0))
	e.sd.Notify()
}

type qpErrTracer struct{ at map[uint32]sim.Time }

func (q *qpErrTracer) Trace(ev *sim.TraceEvent) {
	if _, seen := q.at[ev.QPN]; ev.Kind == sim.TrQPError && !seen {
		q.at[ev.QPN] = ev.At // the first error: later ones are failed probes after resets
	}
}

// TestEngineLinkFailure: the real multipath engine and driver (mptx.Sender
// and mptx.Receiver, software DCQCN, unchanged) ship a 256 MiB tensor over
// 8 QPs when a spine uplink fails. The QPs that cross it reach retry
// exhaustion (retry count + 1) × 4.096 µs × 2^8 = 8.39 ms after their
// first unacknowledged packet: at the failure (minus up to a base RTT)
// for a busy path, or at its next post for one the engine's pacer left
// idle at that instant, so we allow [−RTT, +250 µs]. The engine takes
// those paths out of use, requeues their chunks and finishes the tensor
// on the others, which the receiver confirms chunk by chunk.
func TestEngineLinkFailure(t *testing.T) {
	w := sim.NewWorld(21)
	tr := &qpErrTracer{at: map[uint32]sim.Time{}}
	w.SetTracer(tr)
	const timeoutExp, retries = 8, 7
	tp, err := topo.LeafSpine(w, topo.LeafSpineConfig{
		Common: topo.Common{ECNByRate: true, NIC: sim.NICConfig{AckTimeout: timeoutExp, RetryCount: retries}},
		Leaves: 2, Spines: 4, HostsPerLeaf: 1, UplinkRate: 100 * units.Gbps,
	})
	mustT(t, err)
	const paths = 8
	e := newEngineConn(t, w, tp.Net, tp.Hosts[0], tp.Hosts[1], paths, multipath.Config{CC: "dcqcn", Seed: 1})
	var cable *sim.Cable
	for _, p := range tp.Net.PathOf(e.conn.QPs()[0]) {
		if p.Switch() == tp.Leaves[0] {
			cable = p.Cable()
		}
	}
	affected := make([]bool, paths)
	var nAff int
	for i := 0; i < paths; i++ {
		for _, ps := range [][]*sim.Port{tp.Net.PathOf(e.conn.QPs()[i]), tp.Net.PathOf(e.conn.PeerQPs()[i])} {
			for _, p := range ps {
				affected[i] = affected[i] || p.Cable() == cable
			}
		}
		if affected[i] {
			nAff++
		}
	}
	if nAff == 0 || nAff == paths {
		t.Fatalf("%d of %d paths cross the failed cable; need some of each", nAff, paths)
	}
	const size = 256 * units.MiB
	e.submit(t, w, 1, size)
	tf := 300 * sim.Microsecond
	cable.SetDown(tf)
	w.RunUntil(2 * sim.Second)

	if e.err != nil || e.doneAt == 0 || !e.rdone {
		t.Fatalf("transfer: sender done at %v err %v, receiver done %v", e.doneAt, e.err, e.rdone)
	}
	rto := sim.AckTimeoutDuration(timeoutExp)
	rtt := tp.Net.BaseRTT(e.conn.QPs()[0])
	want := tf + (retries+1)*rto
	var lastErr sim.Time
	for i := 0; i < paths; i++ {
		q := e.conn.QPs()[i]
		st := e.snd.Engine().Stats(i)
		if !affected[i] {
			if q.Err() || st.Downs != 0 {
				t.Errorf("path %d does not cross the failed cable but failed (QP error %v, engine downs %d)", i, q.Err(), st.Downs)
			}
			continue
		}
		at, ok := tr.at[q.QPN()]
		if !ok {
			t.Errorf("path %d crosses the failed cable but its QP never failed", i)
			continue
		}
		lastErr = max(lastErr, at)
		t.Logf("path %d: QP error at failure + %v (predicted %v, -%v/+250us); engine: %v, %d downs, %d requeues",
			i, at-tf, want-tf, rtt, st.State, st.Downs, st.Requeues)
		if at < want-rtt || at > want+250*sim.Microsecond {
			t.Errorf("path %d: retry exhaustion at %v, want in [%v, %v]", i, at, want-rtt, want+250*sim.Microsecond)
		}
		if st.Downs == 0 {
			t.Errorf("path %d: engine never took the failed path out of use", i)
		}
	}
	done := sim.FromVTime(e.doneAt)
	t.Logf("%d of %d paths failed; tensor done at %v (last QP error %v)", nAff, paths, done, lastErr)
	if done <= lastErr {
		t.Errorf("tensor done at %v, before the failed paths' chunks could be redone (%v)", done, lastErr)
	}
}

// TestEngineSoftwareDCQCNFair: the incast of TestDCQCNIncastFair with
// the congestion control in software: each sender is the real mptx driver
// with the cc package's DCQCN per path, fed by the simulator's CNP
// counters (read every 50 µs) and pacing each path; the NICs run no
// congestion control. The same AIMD argument gives a fair share, reached
// later than with NIC DCQCN because the driver reacts to counter readings
// rather than to each CNP: over [90 ms, 100 ms] Jain's index must be at
// least 0.95 and the bottleneck at least 90 % busy. The queue settles at
// the foot of the RED ramp: DCQCN's equilibrium marking probability is a
// fraction of a percent, so q̄ ≈ Kmin; we require 0.85·Kmin < q̄ < Kmax
// (software pacing smooths arrivals, so the queue sits a little under
// Kmin between marks).
func TestEngineSoftwareDCQCNFair(t *testing.T) {
	const n = 8
	w := sim.NewWorld(11)
	tp, err := topo.Star(w, topo.StarConfig{Common: topo.Common{ECNByRate: true}, Hosts: n + 1})
	mustT(t, err)
	bott := tp.Hosts[n].NIC(0).Port().Remote()
	ecn := bott.ECN()
	var es []*engineConn
	for i := 0; i < n; i++ {
		w.RunUntil(sim.Start + sim.Time(i)*sim.Millisecond)
		e := newEngineConn(t, w, tp.Net, tp.Hosts[i], tp.Hosts[n], 1, multipath.Config{CC: "dcqcn", Seed: uint64(i + 1)})
		e.submit(t, w, multipath.TransferID(i+1), 4*units.GiB)
		es = append(es, e)
	}
	from, to := 90*sim.Millisecond, 100*sim.Millisecond
	w.RunUntil(from)
	rx0 := make([]uint64, n)
	for i, e := range es {
		rx0[i] = e.conn.PeerQPs()[0].Counters().RxBytes
	}
	q0 := bott.Counters().QueueMean * float64(from-sim.Start)
	w.RunUntil(to)
	q1 := bott.Counters().QueueMean * float64(to-sim.Start)
	meanQ := (q1 - q0) / float64(to-from)
	rates := make([]float64, n)
	var sum float64
	for i, e := range es {
		rates[i] = float64(e.conn.PeerQPs()[0].Counters().RxBytes-rx0[i]) * 8 / (to - from).Seconds()
		sum += rates[i]
	}
	var cnps uint64
	for _, e := range es {
		cnps += e.conn.QPs()[0].Counters().CNPsReceived
	}
	j := jain(rates)
	ceiling := 100e9 * 4096 / 4178
	g := make([]float64, n)
	for i, x := range rates {
		g[i] = x / 1e9
	}
	t.Logf("software DCQCN: rates %.2f Gb/s; Jain %.4f; aggregate %.1f%% of ceiling; mean queue %.0f B (Kmin %v, Kmax %v); %d CNPs",
		g, j, 100*sum/ceiling, meanQ, ecn.Kmin, ecn.Kmax, cnps)
	if cnps == 0 {
		t.Fatal("no CNPs: the software CC saw no congestion signal")
	}
	if j < 0.95 {
		t.Errorf("Jain index %.4f, want >= 0.95", j)
	}
	if sum < 0.90*ceiling {
		t.Errorf("aggregate %.2f Gb/s, want >= 90%% of %.2f", sum/1e9, ceiling/1e9)
	}
	if meanQ <= 0.85*float64(ecn.Kmin) || meanQ >= float64(ecn.Kmax) {
		t.Errorf("mean queue %.0f B, want between 0.85·Kmin %v and Kmax %v", meanQ, ecn.Kmin, ecn.Kmax)
	}
}

// TestEngineLinkRecovers: a spine uplink fails and comes back mid-transfer.
// The QPs crossing it hit retry exhaustion; the engine requeues their
// chunks, quarantines the paths and keeps probing with backoff, asking the
// driver to reset each errored queue pair first (qp.Resetter →
// sim.QP.Reset). Probes fail while the link is down; once it is up, a probe
// succeeds, the path is back in use and carries chunks again before the
// tensor finishes, and every byte still arrives.
func TestEngineLinkRecovers(t *testing.T) {
	w := sim.NewWorld(22)
	const timeoutExp, retries = 5, 3 // 131 µs × 4 = 524 µs to retry exhaustion
	tp, err := topo.LeafSpine(w, topo.LeafSpineConfig{
		Common: topo.Common{ECNByRate: true, NIC: sim.NICConfig{AckTimeout: timeoutExp, RetryCount: retries}},
		Leaves: 2, Spines: 4, HostsPerLeaf: 1, UplinkRate: 100 * units.Gbps,
	})
	mustT(t, err)
	const paths = 8
	e := newEngineConn(t, w, tp.Net, tp.Hosts[0], tp.Hosts[1], paths, multipath.Config{CC: "dcqcn", Seed: 1})
	var cable *sim.Cable
	for _, p := range tp.Net.PathOf(e.conn.QPs()[0]) {
		if p.Switch() == tp.Leaves[0] {
			cable = p.Cable()
		}
	}
	affected := map[int]bool{}
	for i := 0; i < paths; i++ {
		for _, ps := range [][]*sim.Port{tp.Net.PathOf(e.conn.QPs()[i]), tp.Net.PathOf(e.conn.PeerQPs()[i])} {
			for _, p := range ps {
				if p.Cable() == cable {
					affected[i] = true
				}
			}
		}
	}
	if len(affected) == 0 || len(affected) == paths {
		t.Fatalf("%d of %d paths cross the cable; need some of each", len(affected), paths)
	}
	size := units.Bytes(1 * units.GiB)
	if testing.Short() || raceEnabled {
		size = 512 * units.MiB
	}
	e.submit(t, w, 1, size)
	down, up := 300*sim.Microsecond, 4*sim.Millisecond
	cable.SetDown(down)
	cable.SetUp(up)
	w.RunUntil(up)
	atUp := make([]units.Bytes, paths)
	for i := range atUp {
		atUp[i] = e.snd.Engine().Stats(i).Bytes
	}
	w.RunUntil(5 * sim.Second)
	if e.err != nil || e.doneAt == 0 || !e.rdone {
		t.Fatalf("transfer: sender done at %v err %v, receiver done %v", e.doneAt, e.err, e.rdone)
	}
	if e.doneAt.Duration() <= up.VTime().Duration() {
		t.Fatalf("tensor done at %v, before the link came back at %v: make it larger", e.doneAt, up.VTime())
	}
	for i := range affected {
		st := e.snd.Engine().Stats(i)
		after := st.Bytes - atUp[i]
		t.Logf("path %d: %v, %d downs, %d probes, %v carried after the link came back", i, st.State, st.Downs, st.Probes, after)
		if st.Downs == 0 {
			t.Errorf("path %d crosses the failed cable but was never taken out of use", i)
		}
		if st.State != multipath.PathUp || after == 0 {
			t.Errorf("path %d: state %v with %v carried after recovery; want it back up and carrying chunks", i, st.State, after)
		}
	}
	if r := e.snd.Stats().Resets; r == 0 {
		t.Errorf("the driver never reset a queue pair")
	}
}
