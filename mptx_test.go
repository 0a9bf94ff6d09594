package mptx_test

import (
	"bytes"
	"testing"
	"time"

	"mptx"
	"mptx/multipath"
	"mptx/qp/mem"
	"mptx/units"
	"mptx/vtime"
)

// rig runs a Sender and a Receiver over an in-memory network in virtual
// time.
type rig struct {
	t      *testing.T
	net    *mem.Network
	snd    *mptx.Sender
	rcv    *mptx.Receiver
	sent   map[multipath.TransferID]error
	recvd  map[multipath.TransferID]error
	doneAt map[multipath.TransferID]vtime.Time
	send   []byte
}

func newRig(t *testing.T, paths []mem.PathConfig, region units.Bytes, cfg mptx.SenderConfig) *rig {
	t.Helper()
	r := &rig{t: t, sent: map[multipath.TransferID]error{}, recvd: map[multipath.TransferID]error{}, doneAt: map[multipath.TransferID]vtime.Time{}}
	r.send = make([]byte, region)
	for i := range r.send {
		r.send[i] = byte(i*131 + i>>12)
	}
	net, err := mem.New(mem.Config{Paths: paths, SendRegion: r.send, RecvRegion: make([]byte, region)})
	if err != nil {
		t.Fatal(err)
	}
	r.net = net
	cfg.OnDone = func(id multipath.TransferID, now vtime.Time, err error) { r.sent[id] = err; r.doneAt[id] = now }
	if r.snd, err = mptx.NewSender(net.Conn(), cfg); err != nil {
		t.Fatal(err)
	}
	r.rcv, err = mptx.NewReceiver(net.Receiver(), mptx.ReceiverConfig{
		OnDone: func(id multipath.TransferID, _ vtime.Time, err error) { r.recvd[id] = err },
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) submit(id multipath.TransferID, size units.Bytes) {
	r.t.Helper()
	slot, plan, err := r.snd.Submit(r.net.Now(), multipath.TransferSpec{ID: id, Size: size})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.rcv.Expect(slot, id, plan, 0); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) run(id multipath.TransferID) {
	r.t.Helper()
	next := r.snd.Step(r.net.Now())
	for i := 0; ; i++ {
		if _, ok := r.sent[id]; ok {
			if _, ok := r.recvd[id]; ok || r.sent[id] != nil {
				return
			}
		}
		t := vtime.Earliest(r.net.Next(), next)
		if t == 0 || i > 2_000_000 {
			r.t.Fatalf("stuck at %v (sent %v, received %v)", r.net.Now(), r.sent, r.recvd)
		}
		r.net.AdvanceTo(t)
		now := r.net.Now()
		r.rcv.Step(now)
		next = r.snd.Step(now)
	}
}

func TestEndToEndRatesAndIntegrity(t *testing.T) {
	paths := []mem.PathConfig{
		{Rate: 40 * units.Gbps, NIC: 0}, {Rate: 20 * units.Gbps, NIC: 1}, {Rate: 10 * units.Gbps, NIC: 2}, {Rate: 10 * units.Gbps, NIC: 3},
	}
	// 256 one-MiB chunks: fine enough that chunk granularity at the tail
	// (where the congestion-aware policy keeps slow paths idle) moves the
	// split by less than the tolerance.
	const size = 256 * units.MiB
	r := newRig(t, paths, size, mptx.SenderConfig{Engine: multipath.Config{CC: "fixed", ChunkSize: units.MiB}})
	r.submit(1, size)
	r.run(1)
	if r.sent[1] != nil || r.recvd[1] != nil {
		t.Fatalf("sender %v, receiver %v", r.sent[1], r.recvd[1])
	}
	if !bytes.Equal(r.net.Receiver().Region(), r.send) {
		t.Fatal("received tensor differs from the sent one")
	}
	var total units.Bytes
	for i := range paths {
		total += r.net.PathBytes(i)
	}
	want := []float64{0.5, 0.25, 0.125, 0.125}
	ideal := (80 * units.Gbps).TxTime(size)
	if el := r.doneAt[1].Sub(vtime.Epoch); el > ideal*11/10 {
		t.Errorf("completion %v, want within 10%% of the ideal %v", el, ideal)
	}
	for i := range paths {
		got := float64(r.net.PathBytes(i)) / float64(total)
		if d := got/want[i] - 1; d > 0.1 || d < -0.1 {
			t.Errorf("path %d carried %.3f of the bytes, want %.3f ±10%%", i, got, want[i])
		}
	}
}

func TestEndToEndPathDies(t *testing.T) {
	paths := []mem.PathConfig{
		{Rate: 10 * units.Gbps, NIC: 0}, {Rate: 10 * units.Gbps, NIC: 1, FailAt: vtime.Epoch.Add(8 * time.Millisecond)}, {Rate: 10 * units.Gbps, NIC: 2},
	}
	const size = 64 * units.MiB
	r := newRig(t, paths, size, mptx.SenderConfig{Engine: multipath.Config{CC: "dcqcn", ChunkSize: units.MiB}})
	r.submit(9, size)
	r.run(9)
	if r.sent[9] != nil || r.recvd[9] != nil {
		t.Fatalf("sender %v, receiver %v", r.sent[9], r.recvd[9])
	}
	if !bytes.Equal(r.net.Receiver().Region(), r.send) {
		t.Fatal("received tensor differs from the sent one after a path died")
	}
	st := r.snd.Engine().Stats(1)
	if st.State == multipath.PathUp || st.Requeues == 0 || st.Reason == "" {
		t.Errorf("path 1: %+v; want it out of use, with requeues and a reason", st)
	}
	rs := r.rcv.Stats()
	if rs.Chunks != 64 {
		t.Errorf("receiver counted %d distinct chunks, want 64 (each exactly once)", rs.Chunks)
	}
	t.Logf("path 1 %s (%s), %d requeues; receiver duplicates %d", st.State, st.Reason, st.Requeues, rs.Duplicates)
}

// TestEndToEndMarkedPathCompletes is a regression test: with software
// pacing, a path whose pacing block had expired while its window was full
// kept returning that past instant as the engine's deadline, and the driver
// spun without progress. DCQCN on a CNP-marked path reproduced it.
func TestEndToEndMarkedPathCompletes(t *testing.T) {
	paths := []mem.PathConfig{{Rate: 40 * units.Gbps, NIC: 0, CNPEvery: 4 * units.MiB}, {Rate: 20 * units.Gbps, NIC: 1}, {Rate: 10 * units.Gbps, NIC: 2}}
	const size = 48 * units.MiB
	r := newRig(t, paths, size, mptx.SenderConfig{Engine: multipath.Config{CC: "dcqcn", ChunkSize: units.MiB}})
	r.submit(1, size)
	r.run(1)
	if r.sent[1] != nil || r.recvd[1] != nil {
		t.Fatalf("sender %v, receiver %v", r.sent[1], r.recvd[1])
	}
	if st := r.snd.Engine().Stats(0); st.CNPs == 0 {
		t.Errorf("path 0 saw no CNPs; the scenario lost its point")
	}
}
