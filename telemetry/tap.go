package telemetry

import (
	"fmt"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/vtime"
)

// ReceiverTap connects a ReceiveRecorder to a receiver driver that does
// not call it itself (mptx.Receiver as it stands): it sits between the
// driver and the backend's qp.Receiver to see each receive completion (its
// arrival time, path and immediate), and wraps the driver's OnChunk and
// OnDone callbacks to time the application's hand-off and see the end.
// A driver that calls the ReceiveRecorder directly needs no tap; the tap
// is what such a driver would do, from the outside:
//
//	tap := telemetry.NewReceiverTap(backend, rec, clock)
//	rcv, _ := mptx.NewReceiver(tap, mptx.ReceiverConfig{
//	    OnChunk: tap.OnChunk(app.OnChunk), OnDone: tap.OnDone(app.OnDone)})
//	// for each transfer announced on the control channel:
//	rcv.Expect(tag, id, plan, remote)
//	tap.Expect(tag, id, plan, traceContext)
//
// clock is the receiver's clock (the one whose Now is passed to Step); the
// tap reads it once per Poll and around each hand-off. A ReceiverTap is
// not safe for concurrent use: the receiver's goroutine owns it.
type ReceiverTap struct {
	qp.Receiver
	rec   *ReceiveRecorder
	clock vtime.Clock
	slots [chunk.MaxSlots]tapSlot
	ids   map[multipath.TransferID]int // live transfer → slot
	c     RecvChunk
}

type tapSlot struct {
	live    bool
	tag     int // chunk.MakeTag(slot, generation): immediates of older generations are stale
	id      multipath.TransferID
	plan    chunk.Plan
	arrived []tapArrival // per chunk; zero until its completion is polled
}

type tapArrival struct {
	at, polled vtime.Time
	path       int32
	seen       bool
}

// NewReceiverTap returns a tap over r recording into rec with the
// receiver's clock.
func NewReceiverTap(r qp.Receiver, rec *ReceiveRecorder, clock vtime.Clock) *ReceiverTap {
	return &ReceiverTap{Receiver: r, rec: rec, clock: clock, ids: map[multipath.TransferID]int{}}
}

// Expect records that transfer id was announced with tag (the sender's
// Submit's, chunk.MakeTag) and plan and the sender's trace context tc
// (see ReceiveRecorder.Expect); call it next to the driver's own Expect.
// The error is tc's, if malformed, or a tag out of range; the transfer is
// recorded either way when the tag is valid.
func (t *ReceiverTap) Expect(tag int, id multipath.TransferID, plan chunk.Plan, tc []byte) error {
	if tag < 0 || tag >= chunk.MaxTags {
		return fmt.Errorf("telemetry: ReceiverTap.Expect: tag %d out of range [0, %d)", tag, chunk.MaxTags)
	}
	slot := chunk.TagSlot(tag)
	s := &t.slots[slot]
	if s.live {
		delete(t.ids, s.id)
	}
	s.live, s.tag, s.id, s.plan = true, tag, id, plan
	if cap(s.arrived) >= plan.Count {
		s.arrived = s.arrived[:plan.Count]
		clear(s.arrived)
	} else {
		s.arrived = make([]tapArrival, plan.Count)
	}
	t.ids[id] = slot
	return t.rec.Expect(t.clock.Now(), id, plan.Size, uint32(plan.Count), plan.ChunkSize, tc)
}

// Poll implements qp.Receiver: it polls the backend and notes the arrival
// of each chunk's last segment (and reports chunks arriving again).
func (t *ReceiverTap) Poll(dst []qp.Completion) (int, error) {
	n, err := t.Receiver.Poll(dst)
	if n <= 0 {
		return n, err
	}
	now := t.clock.Now()
	for i := range dst[:n] {
		c := &dst[i]
		if c.Status != qp.StatusOK || c.Op != qp.OpRecvImm || chunk.IsProbe(c.Imm) {
			continue
		}
		tag, idx := chunk.DecodeImm(c.Imm)
		if tag < 0 || tag >= chunk.MaxTags {
			continue
		}
		s := &t.slots[chunk.TagSlot(tag)]
		if !s.live || s.tag != tag || int(idx) >= len(s.arrived) {
			continue
		}
		a := &s.arrived[idx]
		if a.seen {
			t.rec.Duplicate(now, s.id, idx, c.Path)
			continue
		}
		at := c.At
		if at == 0 || at > now {
			at = now
		}
		*a = tapArrival{at: at, polled: now, path: int32(c.Path), seen: true}
	}
	return n, err
}

// OnChunk returns the callback to give the driver (ReceiverConfig.OnChunk):
// it calls next (the application's; nil for none), timing it with the
// clock, and records the chunk.
func (t *ReceiverTap) OnChunk(next func(multipath.TransferID, chunk.Chunk) error) func(multipath.TransferID, chunk.Chunk) error {
	return func(id multipath.TransferID, c chunk.Chunk) error {
		var start, end vtime.Time
		var err error
		if next != nil {
			start = t.clock.Now()
			err = next(id, c)
			end = t.clock.Now()
		}
		slot, ok := t.ids[id]
		if !ok {
			return err
		}
		s := &t.slots[slot]
		var a tapArrival
		if int(c.Index) < len(s.arrived) {
			a = s.arrived[c.Index]
		}
		if !a.seen {
			a.polled = t.clock.Now()
			a.at = a.polled
		}
		t.c = RecvChunk{Transfer: id, Index: c.Index, Path: int(a.path), Bytes: c.Len, Arrived: a.at, Polled: a.polled,
			HandoffStart: start, HandoffEnd: end, Rejected: err != nil}
		t.rec.Chunk(&t.c)
		return err
	}
}

// OnDone returns the callback to give the driver (ReceiverConfig.OnDone):
// it records the transfer's end and calls next (nil for none).
func (t *ReceiverTap) OnDone(next func(multipath.TransferID, vtime.Time, error)) func(multipath.TransferID, vtime.Time, error) {
	return func(id multipath.TransferID, now vtime.Time, err error) {
		if slot, ok := t.ids[id]; ok {
			delete(t.ids, id)
			t.slots[slot].live = false
			reason := ""
			if err != nil {
				reason = err.Error()
			}
			// The driver's now is its Step's; after slow hand-offs the
			// receiver's clock is later.
			t.rec.Done(max(now, t.clock.Now()), id, reason)
		}
		if next != nil {
			next(id, now, err)
		}
	}
}
