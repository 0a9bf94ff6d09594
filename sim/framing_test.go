package sim_test

import (
	"testing"
	"time"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/sim/topo"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// TestAnyMTU: one flow on an idle 100 Gb/s path reaches line rate ×
// payload/(payload + header + 20) for MTUs other than the IB set and for
// another simulator's framing, where every packet is exactly Header +
// payload bytes (no RETH or ImmDt). Derivation as in TestLineRate: a
// segment of seg bytes is ceil(seg/MTU) packets, each of Header + payload
// + 20 wire bytes (plus the RETH and ImmDt of RoCEv2 framing), back to
// back; goodput is seg over that time.
func TestAnyMTU(t *testing.T) {
	for _, tc := range []struct {
		mtu, header units.Bytes
		roce        bool
	}{
		{1000, 48, false}, // HPCC ns-3's payload and header
		{4000, 64, false}, // htsim's
		{9000, 0, true},   // a jumbo frame, RoCEv2 framing
		{300, 0, true},
	} {
		w := sim.NewWorld(1)
		tp, err := topo.Star(w, topo.StarConfig{Common: topo.Common{NIC: sim.NICConfig{MTU: tc.mtu, Header: tc.header}}, Hosts: 2})
		mustT(t, err)
		c, _, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{})
		mustT(t, err)
		const size, seg = 32 * units.MiB, units.MiB
		b := newBulk(w, c, size, seg, 4)
		d := simqp.Drive(w, b)
		c.SetNotify(d.Notify)
		w.Run()
		if b.done != size {
			t.Fatalf("MTU %v: delivered %v of %v", tc.mtu, b.done, size)
		}
		pkts := (seg + tc.mtu - 1) / tc.mtu
		wire := seg + pkts*(tc.header+sim.WireOverhead)
		if tc.roce {
			wire = seg + pkts*(sim.DataHeaders+sim.WireOverhead) + sim.RETHHeader + sim.ImmDtHeader
		}
		want := float64(seg) * 8 / (float64(wire) * 8 / 100e9)
		got := float64(b.done-b.first) * 8 / (b.doneAt - b.firstAt).Seconds()
		if !within(got, want, 0.005) {
			t.Errorf("MTU %v header %v: goodput %.4f Gb/s, want %.4f Gb/s ± 0.5%%", tc.mtu, tc.header, got/1e9, want/1e9)
		}
		if tx := tp.Hosts[0].NIC(0).Port().Counters().TxData; tx != uint64(size/seg*pkts) {
			t.Errorf("MTU %v: %d data frames, want %d", tc.mtu, tx, size/seg*pkts)
		}
	}
	for _, bad := range []sim.NICConfig{{MTU: 255}, {MTU: sim.MaxMTU + 1}, {Header: -1}, {Header: 1025}} {
		w := sim.NewWorld(1)
		if _, err := sim.NewNetwork(w).AddHost("h", 1, bad); err == nil {
			t.Errorf("AddHost with %+v succeeded, want an error", bad)
		}
	}
}

// TestWorkCounters: every frame a port sends is counted once by kind, and
// the counts add up to TxPackets; in a 4:1 incast with small buffers there
// are data, ACK, CNP and PFC frames.
func TestWorkCounters(t *testing.T) {
	w := sim.NewWorld(3)
	tp, err := topo.Star(w, topo.StarConfig{
		Common: topo.Common{Switch: sim.SwitchConfig{Buffer: 256 * units.KiB, ECN: &sim.ECNConfig{Kmin: 10 * units.KB, Kmax: 50 * units.KB, Pmax: 0.2}},
			NIC: sim.NICConfig{DCQCN: &cc.DCQCNConfig{}}},
		Hosts: 5,
	})
	mustT(t, err)
	var qs []*sim.QP
	for i := 0; i < 4; i++ {
		c, _, err := simqp.Connect(tp.Net, tp.Hosts[i], tp.Hosts[4], simqp.Options{})
		mustT(t, err)
		b := newBulk(w, c, 4*units.MiB, 256*units.KiB, 4)
		d := simqp.Drive(w, b)
		c.SetNotify(d.Notify)
		qs = append(qs, c.QPs()[0], c.PeerQPs()[0])
	}
	w.Run()
	var all sim.PortCounters
	var ports []*sim.Port
	for _, s := range tp.Net.Switches {
		ports = append(ports, s.Ports()...)
	}
	for _, n := range tp.Net.NICs {
		ports = append(ports, n.Port())
	}
	for _, p := range ports {
		c := p.Counters()
		if c.TxPackets != c.TxData+c.TxAck+c.TxCNP+c.TxPFC || c.TxPFC != c.PauseSent+c.ResumeSent {
			t.Errorf("%s: TxPackets %d != data %d + ack %d + cnp %d + pfc %d", p.Name(), c.TxPackets, c.TxData, c.TxAck, c.TxCNP, c.TxPFC)
		}
		all.TxData += c.TxData
		all.TxAck += c.TxAck
		all.TxCNP += c.TxCNP
		all.TxPFC += c.TxPFC
	}
	var sent, acks, cnps uint64
	for _, q := range qs {
		c := q.Counters()
		sent += c.TxPackets
		acks += c.AcksSent + c.NAKsSent
		cnps += c.CNPsSent
	}
	// Every data packet crosses two links (NIC→switch, switch→NIC), and so
	// does every ACK and CNP: nothing is dropped in a lossless star.
	if all.TxData != 2*sent || all.TxAck != 2*acks || all.TxCNP != 2*cnps {
		t.Errorf("link transmissions data %d, ack %d, cnp %d; want 2 × (%d, %d, %d)", all.TxData, all.TxAck, all.TxCNP, sent, acks, cnps)
	}
	if all.TxCNP == 0 || all.TxPFC == 0 {
		t.Errorf("no CNP (%d) or PFC (%d) frames: the scenario should produce both", all.TxCNP, all.TxPFC)
	}
}

// stepRate is a NIC rate controller whose rate jumps from low to high at
// a deadline, to check that the NIC re-paces the next packet.
type stepRate struct {
	at        vtime.Time
	low, high units.BitRate
	now       vtime.Time
}

func (s *stepRate) Name() string         { return "step" }
func (s *stepRate) OnSend(x cc.Sent)     { s.now = max(s.now, x.Now) }
func (s *stepRate) OnAck(cc.Ack)         {}
func (s *stepRate) OnCNP(cc.CNP)         {}
func (s *stepRate) OnLoss(cc.Loss)       {}
func (s *stepRate) OnTimeout(vtime.Time) {}
func (s *stepRate) OnTimer(now vtime.Time) {
	s.now = max(s.now, now)
}
func (s *stepRate) Deadline() vtime.Time {
	if s.now >= s.at {
		return 0
	}
	return s.at
}
func (s *stepRate) Window() units.Bytes { return units.MaxBytes }
func (s *stepRate) Rate() units.BitRate {
	if s.now >= s.at {
		return s.high
	}
	return s.low
}

// TestRepaceOnRateChange: a QP paced at 1 Mb/s sends a packet whose gap
// would be 33 ms; the rate then rises to the line rate at 10 µs, and the
// next packet must leave at once (re-paced from the last packet's start at
// the new rate, as ns-3's RdmaHw::ChangeRate), not 33 ms later.
func TestRepaceOnRateChange(t *testing.T) {
	w := sim.NewWorld(1)
	step := &stepRate{at: vtime.Time(10 * time.Microsecond), low: units.Mbps, high: 100 * units.Gbps}
	nic := sim.NICConfig{RateControl: func(cc.PathInfo) (cc.Algorithm, error) { return step, nil }}
	tp, err := topo.Star(w, topo.StarConfig{Common: topo.Common{NIC: nic}, Hosts: 2})
	mustT(t, err)
	c, _, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{})
	mustT(t, err)
	b := newBulk(w, c, 64*units.KiB, 64*units.KiB, 1)
	d := simqp.Drive(w, b)
	c.SetNotify(d.Notify)
	w.Run()
	if b.done != 64*units.KiB {
		t.Fatalf("delivered %v of 64KiB", b.done)
	}
	// 16 packets: one at 1 Mb/s, then 15 at line rate from 10 µs: done
	// well before 100 µs (33 ms if the first gap were kept).
	if at := b.doneAt - sim.Start; at > 100*sim.Microsecond || at < 10*sim.Microsecond {
		t.Errorf("64 KiB done at %v, want between 10 µs and 100 µs", at)
	}
}

// TestNICHPCCIncast: 16 senders into one 100 Gb/s port with the NIC's
// HPCC reacting to the INT of every ACK: the switch queue stays far below
// the PFC threshold (no pause), the link stays busy (goodput at least 93 %
// of the payload ceiling, HPCC's η = 95 % less slack, over the middle of
// the incast) and the flows share it fairly (Jain ≥ 0.9). With 1000-byte
// payloads and 64 KiB messages (whose last packets are short) the NIC
// must report acknowledged payload exactly, or HPCC updates its reference
// window on every ACK instead of once per RTT and oscillates.
func TestNICHPCCIncast(t *testing.T) {
	for _, tc := range []struct {
		mtu, header, seg units.Bytes
		ackEvery         int
		ceiling          float64 // payload/(frame + 20) × 100 Gb/s
		minShare, minJ   float64
	}{
		{4096, 0, units.MiB, 1, 100e9 * 4096 / 4178, 0.93, 0.9},
		{1000, 90, 64 * units.KiB, 1, 100e9 * 1000 / 1110, 0.93, 0.9},
		// ACKs coalesced by 4: a windowed NIC CC sets AckReq on every
		// packet, or a window that shrinks below the bytes in flight would
		// wait 67 ms for the RC timeout.
		{4096, 0, units.MiB, 4, 100e9 * 4096 / 4178, 0.93, 0.9},
	} {
		const n = 16
		w := sim.NewWorld(5)
		tp, err := topo.Star(w, topo.StarConfig{
			Common: topo.Common{Switch: sim.SwitchConfig{INT: true, Buffer: 4 * units.MiB},
				NIC: sim.NICConfig{HPCC: &cc.HPCCConfig{}, AckEvery: tc.ackEvery, MTU: tc.mtu, Header: tc.header}},
			Hosts: n + 1,
		})
		mustT(t, err)
		var rqs []*sim.QP
		for i := 0; i < n; i++ {
			c, _, err := simqp.Connect(tp.Net, tp.Hosts[i], tp.Hosts[n], simqp.Options{})
			mustT(t, err)
			b := newBulk(w, c, 4*units.MiB, tc.seg, 16)
			d := simqp.Drive(w, b)
			c.SetNotify(d.Notify)
			rqs = append(rqs, c.PeerQPs()[0])
			if _, ok := c.QPs()[0].CC().(*cc.HPCC); !ok {
				t.Fatalf("NIC rate control is %T, want *cc.HPCC", c.QPs()[0].CC())
			}
		}
		from, to := sim.Start+sim.Millisecond, sim.Start+4*sim.Millisecond
		w.RunUntil(from)
		rx0 := make([]uint64, n)
		for i, q := range rqs {
			rx0[i] = q.Counters().RxBytes
		}
		w.RunUntil(to)
		var rates []float64
		var sum float64
		for i, q := range rqs {
			r := float64(q.Counters().RxBytes-rx0[i]) * 8 / (to - from).Seconds()
			rates = append(rates, r)
			sum += r
		}
		w.Run()
		for i, q := range rqs {
			if got := q.Counters().RxBytes; got != 4*uint64(units.MiB) {
				t.Errorf("MTU %v, ACK every %d: flow %d delivered %d of 4 MiB", tc.mtu, tc.ackEvery, i, got)
			}
		}
		bott := tp.Hosts[n].NIC(0).Port().Remote().Counters()
		t.Logf("MTU %v, ACK every %d: aggregate %.2f Gb/s (%.1f%% of the %.2f ceiling), Jain %.4f, max queue %v, pauses %d",
			tc.mtu, tc.ackEvery, sum/1e9, 100*sum/tc.ceiling, tc.ceiling/1e9, jain(rates), bott.QueueMax, totals(tp.Net).PauseSent)
		if sum < tc.minShare*tc.ceiling {
			t.Errorf("MTU %v: aggregate %.2f Gb/s, want >= %.0f%% of %.2f", tc.mtu, sum/1e9, 100*tc.minShare, tc.ceiling/1e9)
		}
		if j := jain(rates); j < tc.minJ {
			t.Errorf("MTU %v: Jain index %.4f, want >= 0.9", tc.mtu, j)
		}
		if p := totals(tp.Net).PauseSent; p != 0 {
			t.Errorf("MTU %v: %d PFC pauses, want none: HPCC keeps the queue near zero", tc.mtu, p)
		}
	}
}
