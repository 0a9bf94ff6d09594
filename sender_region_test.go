package mptx_test

import (
	"fmt"
	"testing"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// TestSubmitRegion ships each transfer from a buffer of its own,
// registered with the connection (qp.SendRegions) instead of copied into
// its send region, over the stall scenario of the integrity tests (path 0
// is 30 ms slow): every work request of a transfer names its region, so
// every transfer lands whole; the application rewrites each buffer as soon
// as OnDone reports its transfer (and unregisters it), and nothing of that
// reaches the receiver. The connection's own send region holds other bytes
// throughout, so a work request that forgot its region would be caught.
func TestSubmitRegion(t *testing.T) {
	const size = 4 * units.MiB
	send, recv := make([]byte, size), make([]byte, size)
	pattern(send, 999) // never the bytes of a transfer
	net, err := mem.New(mem.Config{Paths: slowFirstPath(), SendRegion: send, RecvRegion: recv})
	if err != nil {
		t.Fatal(err)
	}
	conn := net.Conn()
	bufs := map[multipath.TransferID][]byte{}
	regions := map[multipath.TransferID]uint32{}
	tags := map[multipath.TransferID]int{}
	sent, recvd := map[multipath.TransferID]error{}, map[multipath.TransferID]error{}
	var handed []byte
	var bad []string
	var rcv *mptx.Receiver
	snd, err := mptx.NewSender(conn, mptx.SenderConfig{Engine: multipath.Config{CC: "fixed", ChunkSize: 256 * units.KiB},
		OnDone: func(id multipath.TransferID, now vtime.Time, err error) {
			sent[id] = err
			pattern(bufs[id], id+100) // the application reuses its buffer at once
			if err := conn.RemoveSendRegion(regions[id]); err != nil {
				t.Error(err)
			}
			rcv.SenderDone(now, tags[id], err)
		}})
	if err != nil {
		t.Fatal(err)
	}
	rcv, err = mptx.NewReceiver(net.Receiver(), mptx.ReceiverConfig{AwaitSender: true,
		OnDone: func(id multipath.TransferID, _ vtime.Time, err error) {
			recvd[id] = err
			want := make([]byte, size)
			pattern(want, id)
			if d := diff(recv, want); d > 0 {
				bad = append(bad, fmt.Sprintf("transfer %d reported done with %d of its bytes wrong", id, d))
			}
			handed = append(handed[:0], recv...)
		}})
	if err != nil {
		t.Fatal(err)
	}
	for id := multipath.TransferID(1); id <= 6; id++ {
		if handed != nil {
			if d := diff(recv, handed); d > 0 {
				bad = append(bad, fmt.Sprintf("%d bytes changed after transfer %d was handed over", d, id-1))
			}
		}
		bufs[id] = make([]byte, size)
		pattern(bufs[id], id)
		if regions[id], err = conn.AddSendRegion(bufs[id]); err != nil {
			t.Fatal(err)
		}
		tag, plan, err := snd.SubmitRegion(net.Now(), multipath.TransferSpec{ID: id, Size: size}, regions[id])
		if err != nil {
			t.Fatal(err)
		}
		tags[id] = tag
		if err := rcv.Expect(tag, id, plan, 0); err != nil {
			t.Fatal(err)
		}
		next := snd.Step(net.Now())
		for i := 0; ; i++ {
			_, s := sent[id]
			_, r := recvd[id]
			if s && r {
				break
			}
			at := vtime.Earliest(net.Next(), next)
			if at == 0 || i > 5_000_000 {
				t.Fatalf("transfer %d stuck (sent %v, received %v)", id, sent, recvd)
			}
			net.AdvanceTo(at)
			rcv.Step(net.Now())
			next = snd.Step(net.Now())
		}
		if sent[id] != nil || recvd[id] != nil {
			t.Fatalf("transfer %d: sender %v, receiver %v", id, sent[id], recvd[id])
		}
	}
	for at := net.Next(); at != 0; at = net.Next() {
		net.AdvanceTo(at)
		rcv.Step(net.Now())
		snd.Step(net.Now())
	}
	if d := diff(recv, handed); d > 0 {
		bad = append(bad, fmt.Sprintf("%d bytes changed after the last transfer was handed over", d))
	}
	for _, b := range bad {
		t.Error(b)
	}
	if st := snd.Engine().Stats(0); st.Requeues == 0 {
		t.Fatalf("path 0 requeued nothing (%+v): the scenario did not stall", st)
	}
}
