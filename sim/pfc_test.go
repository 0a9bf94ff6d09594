package sim_test

import (
	"testing"

	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/units"
)

// chain builds host A — sw1 — sw2 — host B with the given rates and the
// sw1–sw2 cable's delay, and ships size bytes from A to B.
func chain(t *testing.T, cfg sim.SwitchConfig, inRate, outRate units.BitRate, d sim.Time, size units.Bytes) (*sim.World, [2]*sim.Switch, *sim.Cable, *bulk) {
	t.Helper()
	w := sim.NewWorld(1)
	net := sim.NewNetwork(w)
	s1, err := net.AddSwitch("sw1", cfg)
	mustT(t, err)
	s2, err := net.AddSwitch("sw2", cfg)
	mustT(t, err)
	a, err := net.AddHost("A", 1, sim.NICConfig{})
	mustT(t, err)
	b, err := net.AddHost("B", 1, sim.NICConfig{})
	mustT(t, err)
	_, err = net.Link(a.NIC(0), s1, sim.LinkConfig{Rate: inRate, Delay: sim.Microsecond})
	mustT(t, err)
	mid, err := net.Link(s1, s2, sim.LinkConfig{Rate: inRate, Delay: d})
	mustT(t, err)
	_, err = net.Link(s2, b.NIC(0), sim.LinkConfig{Rate: outRate, Delay: sim.Microsecond})
	mustT(t, err)
	mustT(t, net.Build())
	c, _, err := simqp.Connect(net, a, b, simqp.Options{})
	mustT(t, err)
	bk := newBulk(w, c, size, units.MiB, 16)
	dr := simqp.Drive(w, bk)
	c.SetNotify(dr.Notify)
	return w, [2]*sim.Switch{s1, s2}, mid, bk
}

// TestPFCHeadroom: a PAUSE takes a link delay to act. sw2 receives at
// 100 Gb/s from sw1 over a 10 µs cable and drains at 10 Gb/s. When its
// ingress crosses XOFF it sends PAUSE; until the pause reaches sw1 (d) and
// the last unpaused bytes cross back (d), the ingress keeps gaining
// (C_in − C_out) per second, so the headroom peaks at
// (C_in − C_out)·2d = 90 Gb/s × 20 µs = 225 KB, plus at most the frames
// in transmission at either end (a few KB). The default headroom
// (2·d·C_in + 3 frames = 262.6 KB) holds it: no drop. Each pause/resume
// cycle repeats this, so we check the peak over the run.
func TestPFCHeadroom(t *testing.T) {
	const d = 10 * sim.Microsecond
	cin, cout := 100*units.Gbps, 10*units.Gbps
	cfg := sim.SwitchConfig{PFC: sim.PFCConfig{XOff: 500 * units.KB, XOn: 400 * units.KB}}
	w, sw, mid, b := chain(t, cfg, cin, cout, d, 32*units.MiB)
	w.Run()
	if b.done != 32*units.MiB {
		t.Fatalf("delivered %v", b.done)
	}
	_, in := mid.Ends() // in: sw2's end of the cable
	c := in.Counters()
	frame := float64(sim.DefaultMTU + sim.DataHeaders + sim.RETHHeader + sim.ImmDtHeader)
	want := float64(cin-cout) / 8 * (2 * d).Seconds()
	t.Logf("sw2 ingress from sw1: max %v held, headroom peak %v, predicted %.0f B + frames; %d pauses; drops %d",
		c.IngressMax, c.HeadroomMax, want, c.PauseSent, c.Drops)
	if c.PauseSent == 0 {
		t.Fatal("sw2 never paused sw1")
	}
	if got := float64(c.HeadroomMax); got < want || got > want+4*frame {
		t.Errorf("headroom peak %.0f B, want %.0f B + at most 4 frames", got, want)
	}
	if c.Drops != 0 || sw[0].Ports()[0].Counters().Drops != 0 {
		t.Errorf("drops in a lossless chain with default headroom")
	}
}

// TestPFCStaticThresholds: with static thresholds the ingress pauses once
// its shared bytes reach XOFF and resumes at XON, so it holds at most
// reserve + XOFF + headroom and at least XOFF; a shorter 1 µs hop keeps the
// headroom at (C_in − C_out)·2 µs plus frames.
func TestPFCStaticThresholds(t *testing.T) {
	const xoff, xon = 300 * units.KB, 200 * units.KB
	cfg := sim.SwitchConfig{PFC: sim.PFCConfig{XOff: xoff, XOn: xon}}
	w, sw, mid, b := chain(t, cfg, 100*units.Gbps, 25*units.Gbps, sim.Microsecond, 16*units.MiB)
	w.Run()
	if b.done != 16*units.MiB {
		t.Fatalf("delivered %v", b.done)
	}
	_, in := mid.Ends()
	c := in.Counters()
	reserve := sw[1].Config().PFC.Reserve
	hmax := units.Bytes(float64(75*units.Gbps)/8*(2*sim.Microsecond).Seconds()) + 4*(sim.DefaultMTU+sim.DataHeaders+sim.RETHHeader+sim.ImmDtHeader)
	t.Logf("ingress max %v (XOFF %v, reserve %v, headroom peak %v ≤ %v), pauses %d, resumes %d",
		c.IngressMax, xoff, reserve, c.HeadroomMax, hmax, c.PauseSent, c.ResumeSent)
	if c.IngressMax < xoff || c.IngressMax > reserve+xoff+c.HeadroomMax || c.HeadroomMax > hmax {
		t.Errorf("ingress held %v with headroom %v; want within [XOFF, reserve+XOFF+headroom] and headroom ≤ %v", c.IngressMax, c.HeadroomMax, hmax)
	}
	if c.PauseSent < 2 || c.ResumeSent < c.PauseSent-1 {
		t.Errorf("%d pauses, %d resumes: want repeated XOFF/XON cycles", c.PauseSent, c.ResumeSent)
	}
}

// TestLinkDownUp: a cable that fails for less than the retry budget only
// delays the transfer. The sender keeps transmitting into the dead cable
// (it has 16 MiB of work requests posted); once the cable is back, the
// first packet to arrive is out of sequence, the responder NAKs, and the
// requester goes back to the oldest unacknowledged packet — before its
// 67 ms retry timer would have. Every frame lost on the cable is resent.
func TestLinkDownUp(t *testing.T) {
	cfg := sim.SwitchConfig{}
	w, _, mid, b := chain(t, cfg, 100*units.Gbps, 100*units.Gbps, sim.Microsecond, 64*units.MiB)
	mid.SetDown(200 * sim.Microsecond)
	mid.SetUp(1 * sim.Millisecond)
	w.RunUntil(2 * sim.Second)
	if b.done != 64*units.MiB {
		t.Fatalf("delivered %v of 64MiB after a 0.8 ms outage", b.done)
	}
	q := b.c.QPs()[0].Counters()
	_, in := mid.Ends()
	a, _ := mid.Ends()
	t.Logf("done at %v; %d timeouts, %d retransmits; %d frames lost on the cable", b.doneAt, q.Timeouts, q.Retransmits, a.Counters().LinkDrops+in.Counters().LinkDrops)
	lost := a.Counters().LinkDrops + in.Counters().LinkDrops
	if q.NAKsReceived == 0 || q.Timeouts != 0 || b.c.QPs()[0].Err() {
		t.Errorf("NAKs %d, timeouts %d, QP error %v: want recovery by one go-back-N on NAK", q.NAKsReceived, q.Timeouts, b.c.QPs()[0].Err())
	}
	if q.Retransmits < lost/2 {
		t.Errorf("%d retransmits for %d frames lost (data and ACKs): the lost data was not resent", q.Retransmits, lost)
	}
	if b.doneAt < sim.Millisecond {
		t.Errorf("done at %v, before the cable came back", b.doneAt)
	}
}
