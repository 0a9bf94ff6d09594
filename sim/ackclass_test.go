package sim

import (
	"testing"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// ackNet builds one switch and two hosts whose NICs use cfg, and a
// connected QP pair h0 → h1.
func ackNet(t *testing.T, cfg NICConfig) (*Network, *QP, *QP) {
	t.Helper()
	w := NewWorld(1)
	n := NewNetwork(w)
	s, err := n.AddSwitch("s", SwitchConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"h0", "h1"} {
		h, err := n.AddHost(name, 1, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Link(h.NIC(0), s, LinkConfig{Rate: 100 * units.Gbps, Delay: Microsecond}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Build(); err != nil {
		t.Fatal(err)
	}
	a, err := n.NICs[0].NewQP(QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.NICs[1].NewQP(QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(b); err != nil {
		t.Fatal(err)
	}
	return n, a, b
}

// TestAckInDataClass: with NICConfig.AckInDataClass an ACK queues in the
// switch's data class (behind data, held by a PFC pause of that class,
// charged to the buffer), and the NIC holds it while its port is paused;
// without it the ACK takes the strict-priority control class and goes
// out through a pause.
func TestAckInDataClass(t *testing.T) {
	for _, inData := range []bool{false, true} {
		n, _, b := ackNet(t, NICConfig{AckInDataClass: inData})
		sw := n.Switches[0]
		toA := sw.Ports()[0] // the switch port towards h0
		toA.paused = true    // h0 paused the switch's data class

		// An ACK from the responder (h1) reaches the switch.
		ack := b.ctrlPacket(KindAck, AckSize)
		sw.receive(ack, sw.Ports()[1])
		queued := toA.Queue() == AckSize && toA.ctrl.head == nil
		sent := toA.Counters().TxAck == 1
		if inData && (!queued || sent) {
			t.Errorf("AckInDataClass: switch data queue %v, ACKs sent %d; want the ACK held in the paused data class",
				toA.Queue(), toA.Counters().TxAck)
		}
		if !inData && (queued || !sent) {
			t.Errorf("control-class ACK: switch data queue %v, ACKs sent %d; want the ACK sent through the pause",
				toA.Queue(), toA.Counters().TxAck)
		}
		if inData {
			if in := sw.Ports()[1].inBytes; in != AckSize {
				t.Errorf("AckInDataClass: ingress holds %d bytes, want the ACK's %d (charged like data)", in, AckSize)
			}
			toA.unpause(n.W.now)
			if toA.Counters().TxAck != 1 || toA.Queue() != 0 {
				t.Errorf("after XON: ACKs sent %d, queue %v; want the ACK sent", toA.Counters().TxAck, toA.Queue())
			}
		}

		// At the responder's NIC: a paused port holds a data-class ACK.
		np := b.nic.port
		np.paused = true
		b.nic.sendCtrl(b.ctrlPacket(KindAck, AckSize))
		if got := np.Counters().TxAck; inData && got != 0 || !inData && got != 1 {
			t.Errorf("AckInDataClass=%v: paused NIC sent %d ACKs, want %d", inData, got, map[bool]int{false: 1, true: 0}[inData])
		}
		if inData {
			np.unpause(n.W.now)
			if got := np.Counters().TxAck; got != 1 {
				t.Errorf("AckInDataClass: NIC sent %d ACKs after XON, want 1", got)
			}
		}
	}
}

// TestPayloadAccounting: acknowledged payload counts each message's short
// last packet as what it carries, not a full MTU.
func TestPayloadAccounting(t *testing.T) {
	_, a, _ := ackNet(t, NICConfig{MTU: 1000})
	wrs := []qp.SendWR{
		{Op: qp.OpWrite, Len: 2500}, // PSNs 0, 1, 2 (1000, 1000, 500)
		{Op: qp.OpWrite, Len: 3000}, // PSNs 3, 4, 5
		{Op: qp.OpWrite, Len: 1},    // PSN 6
	}
	if n, err := a.PostSend(wrs); n != 3 || err != nil {
		t.Fatalf("PostSend = %d, %v", n, err)
	}
	for _, c := range []struct {
		from, to uint32
		want     units.Bytes
	}{{0, 3, 2500}, {0, 2, 2000}, {1, 5, 3500}, {2, 7, 500 + 3000 + 1}, {6, 7, 1}} {
		if got := a.payload(c.from, c.to); got != c.want {
			t.Errorf("payload(%d, %d) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
