package mptx

import (
	"testing"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// FuzzControlMessages feeds arbitrary payloads to every session control
// message decoder: none may panic, every accepted message re-encodes to
// the same bytes, and an accepted Offer's plan is one chunk.NewPlan could
// make (so the receiver never sizes anything from an unchecked field).
func FuzzControlMessages(f *testing.F) {
	f.Add(uint8(0), (&hello{Version: 1, Transports: 3, Paths: 4, MaxTensor: 1 << 30}).marshal())
	f.Add(uint8(1), (&welcome{Transport: transportTCP, DataAddr: ":7001", RegionSize: 1 << 30}).marshal())
	f.Add(uint8(2), (&offerMsg{ID: 7, Tag: 0x123, Size: 10 << 20, ChunkSize: 4 << 20, Count: 3, Flags: offerChecked, Name: "layer0/kv"}).marshal())
	f.Add(uint8(3), (&grantMsg{ID: 7, Remote: 4096}).marshal())
	f.Add(uint8(4), (&idMsg{ID: 7, Tag: 1, Err: "boom"}).marshal())
	f.Add(uint8(5), (&sumMsg{ID: 7, CRC32C: 0xe3069283}).marshal())
	f.Add(uint8(2), []byte{})
	f.Add(uint8(2), (&offerMsg{ID: 1, Size: 1, ChunkSize: 1, Count: 2}).marshal())
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		switch kind % 6 {
		case 0:
			var m hello
			if m.unmarshal(b) == nil && string(m.marshal()) != string(b) {
				t.Fatalf("Hello %+v re-encodes differently", m)
			}
		case 1:
			var m welcome
			if m.unmarshal(b) == nil && string(m.marshal()) != string(b) {
				t.Fatalf("Welcome %+v re-encodes differently", m)
			}
		case 2:
			var m offerMsg
			if m.unmarshal(b) == nil {
				if string(m.marshal()) != string(b) {
					t.Fatalf("Offer %+v re-encodes differently", m)
				}
				p, err := m.plan()
				if err != nil {
					t.Fatalf("accepted Offer with a bad plan: %v", err)
				}
				if q, err := chunk.NewPlan(p.Size, p.ChunkSize, 1); p.ChunkSize >= chunk.MinSize && p.ChunkSize%chunk.Align == 0 && err == nil && q != p {
					t.Fatalf("Offer plan %+v differs from NewPlan's %+v", p, q)
				}
			}
		case 3:
			var m grantMsg
			if m.unmarshal(b) == nil && string(m.marshal()) != string(b) {
				t.Fatalf("Grant %+v re-encodes differently", m)
			}
		case 4:
			var m idMsg
			if m.unmarshal(b, "End") == nil && string(m.marshal()) != string(b) {
				t.Fatalf("End %+v re-encodes differently", m)
			}
		case 5:
			var m sumMsg
			if m.unmarshal(b) == nil && string(m.marshal()) != string(b) {
				t.Fatalf("Sum %+v re-encodes differently", m)
			}
		}
	})
}

// fakeRecv is a qp.Receiver that delivers the completions a test queues.
type fakeRecv struct{ q []qp.Completion }

func (f *fakeRecv) Paths() []qp.PathInfo { return []qp.PathInfo{{}} }
func (f *fakeRecv) Poll(dst []qp.Completion) (int, error) {
	n := copy(dst, f.q)
	f.q = f.q[n:]
	return n, nil
}
func (f *fakeRecv) Region() []byte { return nil }
func (f *fakeRecv) Close() error   { return nil }

// FuzzReceiverImmediates feeds a Receiver expecting two transfers a
// stream of arbitrary immediates (and statuses): it never panics, never
// counts an immediate of another generation or out of range, and reports
// a transfer done exactly when every one of its chunks arrived under its
// own tag.
func FuzzReceiverImmediates(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2})
	f.Add([]byte{0x01, 0x10, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x00, 0x20, 0, 5})
	f.Fuzz(func(t *testing.T, raw []byte) {
		plan1, _ := chunk.NewPlan(3*64*units.KiB, 64*units.KiB, 1)
		plan2, _ := chunk.NewPlan(64*units.KiB, 64*units.KiB, 1)
		tag1, tag2 := chunk.MakeTag(0, 1), chunk.MakeTag(2, 7)
		done := map[multipath.TransferID]int{}
		fr := &fakeRecv{}
		r, err := NewReceiver(fr, ReceiverConfig{OnDone: func(id multipath.TransferID, _ vtime.Time, err error) {
			if err != nil {
				t.Fatalf("transfer %d failed: %v", id, err)
			}
			done[id]++
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Expect(tag1, 1, plan1, 0); err != nil {
			t.Fatal(err)
		}
		if err := r.Expect(tag2, 2, plan2, 0); err != nil {
			t.Fatal(err)
		}
		want := map[multipath.TransferID]map[uint32]bool{1: {}, 2: {}}
		for len(raw) >= 4 {
			imm := uint32(raw[0])<<24 | uint32(raw[1])<<16 | uint32(raw[2])<<8 | uint32(raw[3])
			st := qp.StatusOK
			if raw[1]&0x0f == 0x0f && raw[0]&1 == 1 {
				st = qp.StatusFlushed
			}
			raw = raw[4:]
			fr.q = append(fr.q, qp.Completion{Op: qp.OpRecvImm, Status: st, Imm: imm})
			if st != qp.StatusOK || chunk.IsProbe(imm) {
				continue
			}
			tag, idx := chunk.DecodeImm(imm)
			switch {
			case tag == tag1 && idx < uint32(plan1.Count):
				want[1][idx] = true
			case tag == tag2 && idx < uint32(plan2.Count):
				want[2][idx] = true
			}
		}
		r.Step(vtime.Epoch)
		for id, p := range map[multipath.TransferID]chunk.Plan{1: plan1, 2: plan2} {
			complete := len(want[id]) == p.Count
			if (done[id] == 1) != complete || done[id] > 1 {
				t.Fatalf("transfer %d: reported %d times, %d of %d chunks arrived under its tag", id, done[id], len(want[id]), p.Count)
			}
		}
	})
}
