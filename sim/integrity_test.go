package sim_test

import (
	"testing"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// immLog wraps the simulated receiver and logs every immediate it
// delivers, with its arrival time.
type immLog struct {
	qp.Receiver
	got []struct {
		imm uint32
		at  vtime.Time
	}
}

func (l *immLog) Poll(dst []qp.Completion) (int, error) {
	n, err := l.Receiver.Poll(dst)
	for _, c := range dst[:n] {
		if c.Op == qp.OpRecvImm {
			l.got = append(l.got, struct {
				imm uint32
				at  vtime.Time
			}{c.Imm, c.At})
		}
	}
	return n, err
}

// TestNothingLandsAfterDone is the integrity rule in the simulator: two
// hosts with two rails, rail 1 through a switch whose link to the
// receiver has a 30 ms delay (the "stalled" path: its packets are on the
// wire far longer than the engine's 10 ms stall floor, and far shorter
// than the NIC's 67 ms ACK timeout, so RC itself sees nothing wrong).
// Transfers go back to back through the same slot. The engine declares
// path 1 stalled, finishes each tensor on path 0 and fences path 1 (a
// reset of both QPs with fresh PSNs) before it reports; so no immediate of
// a transfer may reach the receiver after the sender reported it, and none
// may count for another transfer.
func TestNothingLandsAfterDone(t *testing.T) {
	w := sim.NewWorld(5)
	net := sim.NewNetwork(w)
	swA, err := net.AddSwitch("swA", sim.SwitchConfig{})
	mustT(t, err)
	swB, err := net.AddSwitch("swB", sim.SwitchConfig{Lossy: true}) // no PFC: a 30 ms cable needs no headroom
	mustT(t, err)
	src, err := net.AddHost("src", 2, sim.NICConfig{})
	mustT(t, err)
	dst, err := net.AddHost("dst", 2, sim.NICConfig{})
	mustT(t, err)
	fast := sim.LinkConfig{Rate: 100 * units.Gbps, Delay: sim.Microsecond}
	for _, l := range []struct {
		a, b sim.Node
		cfg  sim.LinkConfig
	}{
		{src.NIC(0), swA, fast}, {swA, dst.NIC(0), fast},
		{src.NIC(1), swB, fast}, {swB, dst.NIC(1), sim.LinkConfig{Rate: 100 * units.Gbps, Delay: 30 * sim.Millisecond}},
	} {
		_, err := net.Link(l.a, l.b, l.cfg)
		mustT(t, err)
	}
	mustT(t, net.Build())
	conn, recv, err := simqp.Connect(net, src, dst, simqp.Options{QPs: 2, Rails: []int{0, 1}})
	mustT(t, err)
	log := &immLog{Receiver: recv}

	type end struct {
		at  vtime.Time
		err error
	}
	sent, recvd := map[multipath.TransferID]end{}, map[multipath.TransferID]end{}
	var snd *mptx.Sender
	var rcv *mptx.Receiver
	tags := map[multipath.TransferID]int{}
	snd, err = mptx.NewSender(conn, mptx.SenderConfig{Engine: multipath.Config{CC: "fixed", ChunkSize: units.MiB},
		OnDone: func(id multipath.TransferID, now vtime.Time, err error) {
			sent[id] = end{now, err}
			rcv.SenderDone(now, tags[id], err)
		}})
	mustT(t, err)
	rcv, err = mptx.NewReceiver(log, mptx.ReceiverConfig{AwaitSender: true, OnDone: func(id multipath.TransferID, now vtime.Time, err error) {
		recvd[id] = end{now, err}
	}})
	mustT(t, err)
	sd := simqp.Drive(w, snd)
	conn.SetNotify(sd.Notify)
	rd := simqp.Drive(w, rcv)
	recv.SetNotify(rd.Notify)

	const n = 4
	submit := func(id multipath.TransferID) {
		tag, plan, err := snd.Submit(w.Now().VTime(), multipath.TransferSpec{ID: id, Size: 8 * units.MiB})
		mustT(t, err)
		tags[id] = tag
		mustT(t, rcv.Expect(tag, id, plan, 0))
		sd.Notify()
	}
	// Each transfer starts when both ends reported the previous one.
	step := func() {
		for id := multipath.TransferID(1); id <= n; id++ {
			if _, ok := sent[id]; !ok {
				if _, started := tags[id]; !started {
					submit(id)
				}
				return
			}
			if _, ok := recvd[id]; !ok {
				return
			}
		}
	}
	submit(1)
	for w.Now() < 2*sim.Second && len(recvd) < n {
		if !w.Step() {
			break
		}
		step()
	}
	w.RunUntil(w.Now() + 200*sim.Millisecond) // let every packet still in flight arrive
	if len(recvd) < n {
		t.Fatalf("%d of %d transfers done (sent %v, received %v)", len(recvd), n, sent, recvd)
	}
	for id := multipath.TransferID(1); id <= n; id++ {
		if sent[id].err != nil || recvd[id].err != nil {
			t.Fatalf("transfer %d: sender %v, receiver %v", id, sent[id].err, recvd[id].err)
		}
	}
	late := 0
	for _, g := range log.got {
		if chunk.IsProbe(g.imm) {
			continue
		}
		tag, _ := chunk.DecodeImm(g.imm)
		for id, tg := range tags {
			if tg == tag && g.at > sent[id].at {
				late++
				t.Errorf("an immediate of transfer %d (tag %#x) arrived at %v, after the sender reported it at %v", id, tag, g.at, sent[id].at)
			}
		}
	}
	st := snd.Engine().Stats(1)
	if st.Requeues == 0 || snd.Stats().Resets == 0 {
		t.Errorf("path 1: %d requeues, %d resets: the scenario did not stall it", st.Requeues, snd.Stats().Resets)
	}
	t.Logf("%d immediates, %d late; path 1 %+v; receiver %+v; transfer 1 sent at %v", len(log.got), late, st, rcv.Stats(), sent[1].at)
}
