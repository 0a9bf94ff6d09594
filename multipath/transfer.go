// Transfers: Submit, chunk and transfer completion, and the done/failed
// notes the driver reads through Actions.

package multipath

import (
	"errors"
	"fmt"
	"time"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Submit starts a transfer. It returns the transfer's tag (its slot and the
// slot's generation, chunk.MakeTag), which the receiver needs to decode and
// check immediates (chunk.DecodeImm), and the chunk plan.
func (e *Engine) Submit(now vtime.Time, spec TransferSpec) (int, chunk.Plan, error) {
	if spec.Size <= 0 {
		return 0, chunk.Plan{}, fmt.Errorf("multipath: transfer %d: Size = %d B (valid: > 0)", spec.ID, spec.Size)
	}
	if spec.Local < 0 || spec.Remote < 0 {
		return 0, chunk.Plan{}, fmt.Errorf("multipath: transfer %d: Local %d / Remote %d offsets must be >= 0", spec.ID, spec.Local, spec.Remote)
	}
	if err := checkPriority(spec.ID, spec.Priority); err != nil {
		return 0, chunk.Plan{}, err
	}
	for i := range e.transfers {
		if t := &e.transfers[i]; (t.live || t.held || t.draining) && t.id == spec.ID {
			return 0, chunk.Plan{}, fmt.Errorf("%w: %d", ErrDuplicateID, spec.ID)
		}
	}
	// The plan spreads a small tensor over the usable paths of the
	// lowest tier that has one: the paths it will normally take.
	usable := 0
	for m := e.lowestUsableTier(); m != 0; m &= m - 1 {
		if e.paths[m.first()].state.usable() {
			usable++
		}
	}
	if usable == 0 {
		return 0, chunk.Plan{}, fmt.Errorf("%w for transfer %d: %s", ErrNoPath, spec.ID, e.pathReport())
	}
	cs := spec.ChunkSize
	if cs == 0 {
		cs = e.cfg.ChunkSize
	}
	plan, err := chunk.NewPlan(spec.Size, cs, usable)
	if err != nil {
		return 0, chunk.Plan{}, fmt.Errorf("multipath: transfer %d: %w", spec.ID, err)
	}
	if len(e.freeSlots) == 0 {
		return 0, chunk.Plan{}, fmt.Errorf("%w (%d live, %d draining)", ErrTooManyTransfers, len(e.active), e.draining)
	}
	slot := e.freeSlots[len(e.freeSlots)-1]
	e.freeSlots = e.freeSlots[:len(e.freeSlots)-1]
	t := &e.transfers[slot]
	chunks := t.chunks[:0]
	if cap(chunks) < plan.Count {
		chunks = make([]chunkState, plan.Count)
	} else {
		chunks = chunks[:plan.Count]
		clear(chunks)
	}
	gen := t.gen + 1
	*t = transfer{
		gen: gen, tag: chunk.MakeTag(int(slot), gen), id: spec.ID, plan: plan, local: spec.Local, remote: spec.Remote,
		chunks: chunks, reqHead: -1, reqTail: -1, startAt: now, prio: spec.Priority,
	}
	if spec.Priority > e.deepCls {
		e.deepCls = spec.Priority // lower classes go shallow from now on
	}
	if spec.Hold {
		t.held = true
		e.held++
	} else {
		e.schedule(slot)
	}
	if e.rec != nil {
		e.event(EvTransferStart, now)
		e.ev.Transfer, e.ev.Bytes, e.ev.Chunk, e.ev.Size, e.ev.Priority = spec.ID, plan.Size, uint32(plan.Count), plan.ChunkSize, spec.Priority
		e.rec.Record(&e.ev)
	}
	return t.tag, plan, nil
}

// schedule puts transfer slot in the rotation.
func (e *Engine) schedule(slot uint16) {
	t := &e.transfers[slot]
	t.live = true
	e.active = append(e.active, slot)
	e.repick = true
	// Pending first: a class that makes the engine mixed recounts them
	// (classesChanged), this transfer's included.
	e.addPending(t, t.plan.Size, t.plan.Count)
	e.addClassSlot(slot)
}

// Start schedules held transfer id (TransferSpec.Hold) at now, landing at
// offset remote of the receiver's region. It returns ErrUnknownTransfer if
// id is not held.
func (e *Engine) Start(now vtime.Time, id TransferID, remote units.Bytes) error {
	if remote < 0 {
		return fmt.Errorf("multipath: Start(%d): remote offset %v (valid: >= 0)", id, remote)
	}
	for i := range e.transfers {
		if t := &e.transfers[i]; t.held && t.id == id {
			t.held = false
			e.held--
			t.remote = remote
			t.startAt = now
			e.schedule(uint16(i))
			e.checkUsable(now)
			return nil
		}
	}
	return fmt.Errorf("%w: %d is not held", ErrUnknownTransfer, id)
}

// Cancel ends live transfer id at now with err (wrapped in ErrCanceled):
// its unassigned chunks are withdrawn and no further segment of it is
// posted. Like any other end, it is reported (ActFailed) only once every
// work request of the transfer already posted has completed. Cancel returns
// ErrUnknownTransfer when id is not live (unknown, done, failed, or
// already cancelled).
func (e *Engine) Cancel(now vtime.Time, id TransferID, err error) error {
	for i := range e.transfers {
		if t := &e.transfers[i]; (t.live || t.held) && t.id == id {
			slot := uint16(i)
			if err == nil {
				err = ErrCanceled
			} else {
				err = fmt.Errorf("%w: %w", ErrCanceled, err)
			}
			e.repick = true
			e.decide(now, slot, err)
			return nil
		}
	}
	return fmt.Errorf("%w: %d", ErrUnknownTransfer, id)
}

func (e *Engine) chunkDone(now vtime.Time, slot uint16, idx uint32, pi int, rtt time.Duration) {
	t := &e.transfers[slot]
	ch := &t.chunks[idx]
	ch.status = chunkDone
	t.done++
	p := &e.paths[pi]
	p.chunks++
	p.backoff = 0
	marked := p.marks - ch.marks0
	x := 0.0
	if marked > 0 {
		x = 1
	}
	p.marked += (x - p.marked) * markedGain
	if e.rec != nil {
		clen := chunkLen(&t.plan, int(idx))
		e.event(EvChunkDone, now)
		e.ev.Transfer, e.ev.Chunk, e.ev.Path, e.ev.Attempt, e.ev.Bytes = t.id, idx, pi, ch.attempt, clen
		e.ev.RTT, e.ev.Latency, e.ev.ECN = rtt, now.Sub(ch.startAt), marked
		e.rec.Record(&e.ev)
		e.event(EvPathSample, now)
		e.ev.Path, e.ev.Window, e.ev.Rate, e.ev.InFlight, e.ev.SRTT, e.ev.Bytes = pi, e.window(p), p.alg.Rate(), p.inflight, p.srtt, p.bytes
		e.rec.Record(&e.ev)
	}
	if t.done == t.plan.Count {
		e.decide(now, slot, nil)
	}
}

// Abort ends the engine at now: the driver has lost the connection (its
// completion queue failed) and destroyed its queue pairs, so no completion
// will come for what is outstanding and nothing more can be posted. Every
// transfer, live or draining, is reported failed with err (ErrAborted if
// nil) by the next Actions; every path goes down ("aborted") and stays
// down, so later Submits fail with ErrNoPath.
func (e *Engine) Abort(now vtime.Time, err error) {
	if err == nil {
		err = ErrAborted
	}
	for i := range e.paths {
		p := &e.paths[i]
		e.setState(i, PathDown)
		e.dropSuspended(i)
		e.setActive(i, false)
		p.reason = "aborted"
		p.fence, p.fencing = false, false
	}
	e.fenceSet = 0
	for len(e.active) > 0 {
		e.decide(now, e.active[0], err)
	}
	for i := range e.transfers {
		if e.transfers[i].held {
			e.decide(now, uint16(i), err)
		}
	}
	for idx := range e.work {
		w := &e.work[idx]
		if w.kind == workFree {
			continue
		}
		wc := *w
		e.freeWorkSlot(idx)
		e.touch(int(wc.path))
		p := &e.paths[wc.path]
		p.wrOut--
		p.probeID = 0
		if wc.kind == workSegment {
			p.inflight -= wc.len
			e.segmentDone(now, &wc)
		}
	}
}

// decide ends live transfer slot with err (nil: done): it leaves the
// scheduling rotation and, with an error, its unassigned and active chunks
// are withdrawn. The end is reported (retire) once no work request of the
// transfer is outstanding; until then the transfer drains and keeps its
// slot, so that nothing of it can land after the driver hears it ended.
func (e *Engine) decide(now vtime.Time, slot uint16, err error) {
	t := &e.transfers[slot]
	if t.held {
		// Never scheduled: nothing to withdraw, nothing posted.
		t.held = false
		e.held--
		t.draining, t.result = true, err
		e.draining++
		e.retire(now, slot)
		return
	}
	if !t.live {
		return
	}
	if err != nil {
		// Withdraw the transfer's unassigned and active chunks.
		for i := range t.chunks {
			ch := &t.chunks[i]
			if ch.status == chunkPending {
				if i >= t.nextFresh || ch.queued {
					e.addPending(t, -chunkLen(&t.plan, i), -1)
				}
			}
		}
		for i := range e.paths {
			p := &e.paths[i]
			if p.hasSusp && p.suspSlot == slot {
				e.dropSuspended(i)
			}
			if p.hasActive && p.activeSlot == slot {
				e.endActive(i)
			}
		}
	}
	t.live = false
	t.draining = true
	t.result = err
	e.draining++
	for j, s := range e.active {
		if s == slot {
			copy(e.active[j:], e.active[j+1:])
			e.active = e.active[:len(e.active)-1]
			break
		}
	}
	e.removeClassSlot(slot)
	if t.out == 0 {
		e.retire(now, slot)
	}
}

// retire reports drained transfer slot (ActDone or ActFailed) and frees
// its slot for a later Submit, which will use the next generation.
func (e *Engine) retire(now vtime.Time, slot uint16) {
	t := &e.transfers[slot]
	kind, ev := ActDone, EvTransferDone
	if t.result != nil {
		kind, ev = ActFailed, EvTransferFailed
	}
	if e.rec != nil {
		e.event(ev, now)
		e.ev.Transfer, e.ev.Bytes = t.id, t.plan.Size
		if t.result != nil {
			e.ev.Reason = "no usable path"
			if errors.Is(t.result, ErrCanceled) {
				e.ev.Reason = "canceled"
			}
		}
		e.rec.Record(&e.ev)
	}
	e.pushNote(note{kind: kind, id: t.id, err: t.result})
	t.draining = false
	t.result = nil
	e.draining--
	e.freeSlots = append(e.freeSlots, slot)
}

// segmentDone accounts for the end of segment work w (completed, failed or
// fenced): a draining transfer whose last outstanding work request it was
// is retired.
func (e *Engine) segmentDone(now vtime.Time, w *work) {
	if w.kind != workSegment {
		return
	}
	t := &e.transfers[w.slot]
	if t.gen != w.tgen || (!t.live && !t.draining) {
		return
	}
	t.out--
	if t.draining && t.out == 0 {
		e.retire(now, w.slot)
	}
}

func (e *Engine) pushNote(nt note) {
	if e.noteLen == len(e.notes) {
		panic("multipath: BUG: note ring overflow")
	}
	e.notes[(e.noteHead+e.noteLen)%len(e.notes)] = nt
	e.noteLen++
}
