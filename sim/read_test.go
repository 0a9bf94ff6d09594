package sim_test

import (
	"testing"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/sim/topo"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// puller is bulk's READ twin: it reads size bytes of an exposed range in
// READs of seg bytes, up to depth outstanding per path, and records when
// the last one completed. It stops a path at its first error.
type puller struct {
	c      *simqp.Conn
	e      qp.Exposure
	size   units.Bytes
	seg    units.Bytes
	depth  int
	next   units.Bytes
	out    []int
	dead   []bool
	done   units.Bytes
	doneAt sim.Time
	errs   []qp.Status
	buf    []qp.Completion
	wr     [1]qp.SendWR
}

func newPuller(c *simqp.Conn, e qp.Exposure, size, seg units.Bytes, depth int) *puller {
	n := len(c.Paths())
	return &puller{c: c, e: e, size: size, seg: seg, depth: depth, out: make([]int, n), dead: make([]bool, n), buf: make([]qp.Completion, 64)}
}

func (b *puller) Step(now vtime.Time) vtime.Time {
	for {
		k, _ := b.c.Poll(b.buf)
		for _, c := range b.buf[:k] {
			b.out[c.Path]--
			if c.Status != qp.StatusOK {
				b.dead[c.Path] = true
				b.errs = append(b.errs, c.Status)
				continue
			}
			if c.Op != qp.OpRead {
				panic("puller: completion of a " + c.Op.String())
			}
			b.done += c.Bytes
			if b.done >= b.size {
				b.doneAt = sim.FromVTime(c.At)
			}
		}
		if k < len(b.buf) {
			break
		}
	}
	for p := range b.out {
		for !b.dead[p] && b.out[p] < b.depth && b.next < b.size {
			l := min(b.seg, b.size-b.next)
			b.wr[0] = qp.SendWR{ID: uint64(b.next), Op: qp.OpRead, Local: b.next, Remote: units.Bytes(b.e.Addr) + b.next%b.e.Len, Len: l, RKey: b.e.Key}
			if k, err := b.c.PostSend(p, b.wr[:]); k != 1 || err != nil {
				b.dead[p] = true
				break
			}
			b.next += l
			b.out[p]++
		}
	}
	return 0
}

// pull connects requester to responder with paths QPs, exposes size
// bytes at the responder and starts a puller.
func pull(t *testing.T, w *sim.World, net *sim.Network, requester, responder *sim.Host, paths int, size, seg units.Bytes, depth int) (*puller, *simqp.Conn, *simqp.Receiver) {
	t.Helper()
	c, r, err := simqp.Connect(net, requester, responder, simqp.Options{QPs: paths})
	mustT(t, err)
	e, err := r.ExposeRange(size, qp.AccessRead)
	mustT(t, err)
	b := newPuller(c, e, size, seg, depth)
	d := simqp.Drive(w, b)
	c.SetNotify(d.Notify)
	return b, c, r
}

// readWire is the wire time of one READ of n bytes: its responses, every
// packet with 62 bytes of headers and 20 of preamble and gap, the first
// and the last also an AETH (one AETH when it is a single packet).
func readWire(n, mtu units.Bytes, r units.BitRate) float64 {
	pkts := (n + mtu - 1) / mtu
	aeth := units.Bytes(2 * sim.AETHHeader)
	if pkts == 1 {
		aeth = sim.AETHHeader
	}
	return float64(n+pkts*(sim.DataHeaders+sim.WireOverhead)+aeth) * 8 / float64(r)
}

// TestReadLineRate: a 256 MiB pull in 4 MiB READs, 4 outstanding, on an
// idle dumbbell runs at the responses' wire efficiency (4096 of every 4178
// bytes) within 1 %, and the requester's only traffic is the READ
// requests.
func TestReadLineRate(t *testing.T) {
	w := sim.NewWorld(1)
	tp, err := topo.Dumbbell(w, topo.DumbbellConfig{Left: 1, Right: 1})
	mustT(t, err)
	const size, seg = 256 * units.MiB, 4 * units.MiB
	b, c, _ := pull(t, w, tp.Net, tp.Hosts[0], tp.Hosts[1], 1, size, seg, 4)
	w.Run()
	if b.done != size || len(b.errs) > 0 {
		t.Fatalf("pulled %v of %v; errors %v", b.done, size, b.errs)
	}
	want := float64(size/seg) * readWire(seg, sim.DefaultMTU, tp.HostRate)
	got := (b.doneAt - sim.Start).Seconds()
	if !within(got, want, 0.01) {
		t.Errorf("pull took %v, want the responses' wire time %.6fs ± 1%%", b.doneAt-sim.Start, want)
	}
	q := c.QPs()[0].Counters()
	if q.TxPackets != uint64(size/seg) || q.TxBytes != 0 || q.Retransmits != 0 {
		t.Errorf("requester sent %d packets, %d payload bytes, %d retransmissions; want %d READ requests and nothing else", q.TxPackets, q.TxBytes, q.Retransmits, size/seg)
	}
	r := c.PeerQPs()[0].Counters()
	if r.TxBytes != uint64(size) || q.RxBytes != uint64(size) {
		t.Errorf("responder sent %d response bytes, requester accepted %d; want %d both", r.TxBytes, q.RxBytes, size)
	}
	t.Logf("256 MiB pulled in %v (%.2f Gb/s)", b.doneAt-sim.Start, float64(size)*8/got/1e9)
}

// TestReadResponseLoss: 0.1 % random loss on the responses' way makes the
// requester ask again from the first missing response (go-back-N for
// reads); every READ completes, and the responder executes the repeated
// requests.
func TestReadResponseLoss(t *testing.T) {
	w := sim.NewWorld(3)
	tp, err := topo.Dumbbell(w, topo.DumbbellConfig{Common: topo.Common{Delay: 5 * sim.Microsecond}, Left: 1, Right: 1})
	mustT(t, err)
	_, right := tp.Bottleneck.Ends() // right → left carries the responses
	mustT(t, right.SetLoss(0.001))
	const size = 128 * units.MiB
	b, c, _ := pull(t, w, tp.Net, tp.Hosts[0], tp.Hosts[1], 1, size, units.MiB, 4)
	w.Run()
	if b.done != size || len(b.errs) > 0 {
		t.Fatalf("pulled %v of %v under response loss; errors %v", b.done, size, b.errs)
	}
	q, r := c.QPs()[0].Counters(), c.PeerQPs()[0].Counters()
	if right.Counters().LossDrops == 0 || q.Retransmits == 0 || r.Duplicates == 0 {
		t.Errorf("losses %d, re-requests %d, repeated requests executed %d; want all > 0", right.Counters().LossDrops, q.Retransmits, r.Duplicates)
	}
	t.Logf("%d responses lost; %d re-requests, %d timeouts; responder executed %d repeated requests", right.Counters().LossDrops, q.Retransmits, q.Timeouts, r.Duplicates)
}

// TestReadMaxRdAtomic: the requester keeps at most MaxRdAtomic READs
// outstanding. Sixteen 64 KiB READs on a path with a 40 µs round trip
// take one round trip each with a limit of 1, and about one round trip
// in all with the default 16.
func TestReadMaxRdAtomic(t *testing.T) {
	run := func(limit int) sim.Time {
		w := sim.NewWorld(1)
		tp, err := topo.Dumbbell(w, topo.DumbbellConfig{Common: topo.Common{Delay: 10 * sim.Microsecond, NIC: sim.NICConfig{MaxRdAtomic: limit}}, Left: 1, Right: 1})
		mustT(t, err)
		b, c, _ := pull(t, w, tp.Net, tp.Hosts[0], tp.Hosts[1], 1, 16*64*units.KiB, 64*units.KiB, 16)
		if got := c.Caps().MaxReadWR; limit != 0 && got != limit {
			t.Errorf("Caps().MaxReadWR = %d, want %d", got, limit)
		}
		w.Run()
		if b.done != 16*64*units.KiB {
			t.Fatalf("limit %d: pulled %v", limit, b.done)
		}
		return b.doneAt - sim.Start
	}
	one, many := run(1), run(0)
	rtt := 6 * 10 * sim.Microsecond // three cables each way
	ser := sim.Time(16 * readWire(64*units.KiB, sim.DefaultMTU, 100*units.Gbps) * float64(sim.Second))
	if one < 16*rtt+ser {
		t.Errorf("with max_rd_atomic 1, 16 READs took %v; want at least 16 round trips and the serialisation (%v)", one, 16*rtt+ser)
	}
	if many > (rtt+ser)*11/10 {
		t.Errorf("with 16 outstanding, 16 READs took %v; want one round trip and the serialisation (%v) within 10%%", many, rtt+ser)
	}
	t.Logf("16 × 64 KiB READs: %v with max_rd_atomic 1, %v with 16", one, many)
}

// TestReadResetFences: a QP reset while READ responses are on their way
// flushes the READs, and the old responses that still arrive are
// discarded as duplicates: nothing of them completes afterwards. The path
// then reads again.
func TestReadResetFences(t *testing.T) {
	w := sim.NewWorld(1)
	tp, err := topo.Dumbbell(w, topo.DumbbellConfig{Common: topo.Common{Delay: 20 * sim.Microsecond}, Left: 1, Right: 1})
	mustT(t, err)
	c, r, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{})
	mustT(t, err)
	e, err := r.ExposeRange(16*units.MiB, qp.AccessRead)
	mustT(t, err)
	var got []qp.Completion
	buf := make([]qp.Completion, 16)
	c.SetNotify(func() {})
	wrs := []qp.SendWR{{ID: 1, Op: qp.OpRead, Remote: units.Bytes(e.Addr), Len: 4 * units.MiB, RKey: e.Key},
		{ID: 2, Op: qp.OpRead, Remote: units.Bytes(e.Addr), Len: 4 * units.MiB, RKey: e.Key}}
	if k, err := c.PostSend(0, wrs); k != 2 || err != nil {
		t.Fatal(k, err)
	}
	w.RunUntil(sim.Start + 150*sim.Microsecond) // responses are streaming
	if rx := c.QPs()[0].Counters().RxPackets; rx == 0 {
		t.Fatalf("no response arrived before the reset; the scenario lost its point")
	}
	mustT(t, c.Reset(0))
	k, _ := c.Poll(buf)
	got = append(got, buf[:k]...)
	for _, x := range got {
		if x.Status != qp.StatusFlushed {
			t.Errorf("READ %d outstanding at the reset completed %v; want flushed", x.ID, x.Status)
		}
	}
	before := c.QPs()[0].Counters()
	wrs = []qp.SendWR{{ID: 3, Op: qp.OpRead, Remote: units.Bytes(e.Addr), Len: 64 * units.KiB, RKey: e.Key}}
	if k, err := c.PostSend(0, wrs); k != 1 || err != nil {
		t.Fatal(k, err)
	}
	w.Run()
	k, _ = c.Poll(buf)
	if k != 1 || buf[0].ID != 3 || buf[0].Status != qp.StatusOK {
		t.Fatalf("after the reset: completions %v; want READ 3 ok and nothing of 1 and 2", buf[:k])
	}
	after := c.QPs()[0].Counters()
	if after.Duplicates == before.Duplicates {
		t.Errorf("no old response arrived after the reset (duplicates %d); the fence was not exercised", after.Duplicates)
	}
	t.Logf("%d flushed, %d old responses discarded after the reset", len(got), after.Duplicates-before.Duplicates)
}

// TestReadIncastECN: 16 responders answer one requester's READs at once
// (a pull incast) on a lossless switch with ECN and NIC DCQCN: the
// responses converge on the requester's port, get CE-marked, and the
// requester, the notification point for them, returns CNPs that the
// responders' NICs react to. Nothing is dropped.
func TestReadIncastECN(t *testing.T) {
	const n = 16
	w := sim.NewWorld(5)
	tp, err := topo.Star(w, topo.StarConfig{Common: topo.Common{ECNByRate: true, NIC: sim.NICConfig{DCQCN: &cc.DCQCNConfig{}}}, Hosts: n + 1})
	mustT(t, err)
	var bs []*puller
	var cs []*simqp.Conn
	for i := 0; i < n; i++ {
		b, c, _ := pull(t, w, tp.Net, tp.Hosts[n], tp.Hosts[i], 1, 8*units.MiB, units.MiB, 4)
		bs, cs = append(bs, b), append(cs, c)
	}
	w.Run()
	var marked, cnpSent, cnpRecv uint64
	for i, b := range bs {
		if b.done != 8*units.MiB || len(b.errs) > 0 {
			t.Fatalf("pull %d: %v of 8 MiB, errors %v", i, b.done, b.errs)
		}
		q, r := cs[i].QPs()[0].Counters(), cs[i].PeerQPs()[0].Counters()
		marked += q.ECNMarked
		cnpSent += q.CNPsSent
		cnpRecv += r.CNPsReceived
		ct, _ := cs[i].Counters(0)
		if ct.CNPReceived < q.CNPsSent || ct.ECNMarked < q.ECNMarked {
			t.Errorf("path counters %+v miss the requester's marks (%d) or CNPs (%d)", ct, q.ECNMarked, q.CNPsSent)
		}
	}
	tot := totals(tp.Net)
	if tot.Drops+tot.LossDrops != 0 {
		t.Errorf("lossless pull incast dropped %d frames", tot.Drops+tot.LossDrops)
	}
	if marked == 0 || cnpSent == 0 || cnpRecv != cnpSent {
		t.Errorf("responses marked %d, CNPs sent by the requester %d, received by the responders %d; want marks, and every CNP received", marked, cnpSent, cnpRecv)
	}
	t.Logf("16:1 pull incast: %d responses CE-marked, %d CNPs to the responders, %d PFC pauses", marked, cnpSent, tot.PauseSent)
}
