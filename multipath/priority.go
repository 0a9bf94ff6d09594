// Priority classes: which transfer's chunk a path takes next, the
// starvation guard, and preemption of a lower class's unposted segments.

package multipath

import (
	"fmt"
	"math/bits"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Priority is a transfer's class (TransferSpec.Priority): 0, the default,
// to MaxPriority; higher classes are served first (see the package doc,
// "Priorities").
type Priority uint8

// Priority classes.
const (
	// PriorityDefault is the zero value: bulk transfers, weights,
	// checkpoints; every transfer is in it unless its spec says otherwise.
	PriorityDefault Priority = 0
	// PriorityHigh is a conventional class for latency-bound transfers
	// (a decode step's KV block); any class above 0 outranks the default.
	PriorityHigh Priority = 4
	// MaxPriority is the highest class.
	MaxPriority Priority = 7
	// NumPriorities is the number of classes.
	NumPriorities = int(MaxPriority) + 1
)

// defaultPriorityGuard is Config.PriorityGuard's default: with 4 MiB bulk
// chunks a waiting lower class gets at least one chunk in every 68 MiB the
// higher classes are handed, about 6% of the bytes, and waits at most
// 64 MiB of higher-class chunks (5.4 ms at 100 Gb/s).
const defaultPriorityGuard = 64 * units.MiB

// class is one priority class's share of the scheduler: its live
// transfers in submission order, the round-robin cursor among them, and
// its pending (unassigned) chunks.
type class struct {
	slots    []uint16 // live transfer slots of this class, in submission order
	rr       int      // round-robin cursor into slots
	pendingN int
	pending  units.Bytes
	served   uint64 // Engine.serveSeq of the class's last chunk handed out while several classes were live
}

func checkPriority(id TransferID, p Priority) error {
	if p > MaxPriority {
		return fmt.Errorf("multipath: transfer %d: Priority = %d (valid: 0..%d, 0 the default)", id, p, MaxPriority)
	}
	return nil
}

// addPending counts b bytes in n chunks of transfer t as pending (n < 0:
// no longer pending). The per-class counts are kept only while the engine
// is not plain (classesChanged recounts them when it stops being plain).
func (e *Engine) addPending(t *transfer, b units.Bytes, n int) {
	e.pending += b
	e.pendingN += n
	if !e.plain {
		e.addClassPending(t, b, n)
	}
}

// addClassPending is addPending's per-class part.
func (e *Engine) addClassPending(t *transfer, b units.Bytes, n int) {
	if e.pendingN == 0 {
		e.spillAt = vtime.Never // nothing waits for a tier to open
	}
	k := t.prio & 7 // in range: no bounds check, no shift check
	c := &e.cls[k]
	c.pending += b
	c.pendingN += n
	if c.pendingN > 0 {
		e.clsPend |= 1 << k
	} else {
		e.clsPend &^= 1 << k
	}
}

// addClassSlot puts live transfer slot in its class's rotation.
func (e *Engine) addClassSlot(slot uint16) {
	t := &e.transfers[slot]
	c := &e.cls[t.prio]
	if c.slots == nil {
		c.slots = make([]uint16, 0, len(e.transfers))
	}
	c.slots = append(c.slots, slot)
	e.clsLive |= 1 << t.prio
	e.classesChanged()
}

// classesChanged updates what follows from the set of live classes: mixed
// (more than one), the sole class otherwise, and plain (one class, one
// tier: pick's fast path, and no per-class pending counts). An engine
// that stops being plain recounts them.
func (e *Engine) classesChanged() {
	wasPlain := e.plain
	e.mixed = e.clsLive&(e.clsLive-1) != 0
	e.soleCls = Priority(bits.TrailingZeros8(e.clsLive) & 7)
	e.plain = !e.mixed && !e.tiered
	if wasPlain && !e.plain {
		e.recountClasses()
	}
}

// recountClasses recomputes the per-class pending counts from the live
// transfers: their never-assigned chunks and their requeue lists.
func (e *Engine) recountClasses() {
	e.clsPend = 0
	for k := range e.cls {
		e.cls[k].pending, e.cls[k].pendingN = 0, 0
	}
	for _, s := range e.active {
		t := &e.transfers[s]
		c := &e.cls[t.prio&7]
		if t.nextFresh < t.plan.Count {
			c.pendingN += t.plan.Count - t.nextFresh
			c.pending += t.plan.Size - chunkOff(&t.plan, t.nextFresh)
		}
		for j := t.reqHead; j >= 0; j = t.chunks[j].next {
			c.pendingN++
			c.pending += chunkLen(&t.plan, int(j))
		}
		if c.pendingN > 0 {
			e.clsPend |= 1 << (t.prio & 7)
		}
	}
}

// removeClassSlot takes slot out of its class's rotation, keeping the
// cursor on the transfer that was next.
func (e *Engine) removeClassSlot(slot uint16) {
	c := &e.cls[e.transfers[slot].prio]
	for j, s := range c.slots {
		if s == slot {
			copy(c.slots[j:], c.slots[j+1:])
			c.slots = c.slots[:len(c.slots)-1]
			if c.rr > j {
				c.rr--
			}
			break
		}
	}
	if len(c.slots) > 0 {
		c.rr %= len(c.slots)
	} else {
		c.rr = 0
		e.clsLive &^= 1 << e.transfers[slot].prio
		if e.classesChanged(); !e.mixed {
			e.skipped = 0 // one class left: nobody is owed
		}
	}
}

// nextClass returns the class whose chunk the next assignment hands out:
// the highest class with pending chunks, unless the starvation guard is
// due (the higher classes were handed PriorityGuard bytes of chunks while
// a lower class waited): then the waiting lower class served least
// recently (among chunks handed out while several classes were live).
func (e *Engine) nextClass() Priority {
	m := e.clsPend
	if m <= 1 {
		return 0
	}
	top := Priority(bits.Len8(m) - 1)
	if e.guardDue() {
		if lower := m & (1<<top - 1); lower != 0 {
			best := Priority(bits.TrailingZeros8(lower))
			for l := lower & (lower - 1); l != 0; l &= l - 1 {
				if c := Priority(bits.TrailingZeros8(l)); e.cls[c].served < e.cls[best].served {
					best = c
				}
			}
			return best
		}
	}
	return top
}

// guardCount records a chunk of clen bytes handed to class c while
// several classes are live and reports whether the starvation guard chose
// it (c is not the top class with pending chunks). The guard counts the
// bytes the top class gets while lower-class work waits (pending chunks,
// or chunks set aside), and starts again when it has served a lower
// class: handed a chunk to the one waiting longest or, when no lower class
// has chunks pending (only chunks set aside or active), let one of theirs
// be posted to the end (guardServed).
//
// Not inlined: assign, which runs once per chunk, calls it only while
// several classes are live.
//
//go:noinline
func (e *Engine) guardCount(c Priority, clen units.Bytes) (byGuard bool) {
	e.serveSeq++
	e.cls[c].served = e.serveSeq
	m := e.clsPend
	switch {
	case m>>c > 1:
		byGuard = true
		e.skipped = 0
	case m&(1<<c-1) != 0 || e.suspSet != 0:
		e.skipped += clen // the top class, while lower-class work waits
	default:
		e.skipped = 0
	}
	return byGuard
}

// guardDue reports whether the starvation guard is due: until a lower
// class is served, nothing is set aside and the next chunk goes to a
// waiting lower class (nextClass).
func (e *Engine) guardDue() bool { return e.guard > 0 && e.skipped >= e.guard }

// guardServed notes that path p's active chunk was posted to the end: if
// it is of a lower class than the top live one and no lower class has
// chunks pending (the guard hands those theirs), the lower classes were
// served.
func (e *Engine) guardServed(p *path) {
	if top := Priority(bits.Len8(e.clsLive) - 1); p.activeCls < top && e.clsPend&(1<<top-1) == 0 {
		e.skipped = 0
	}
}

// pendingFrom returns the pending bytes of classes c and above: the work a
// chunk of class c competes with.
func (e *Engine) pendingFrom(c Priority) units.Bytes {
	if c == 0 {
		return e.pending
	}
	var b units.Bytes
	for k := int(c); k < NumPriorities; k++ {
		b += e.cls[k].pending
	}
	return b
}

// preemptable returns the paths whose active chunk a chunk of class c may
// set aside (see the package doc): up, with an active chunk of a lower
// class that the starvation guard did not hand out and none set aside
// already. Unlike a free path, such a path need not have room in its
// window now: the active chunk keeps it full, and the new chunk's
// segments are the next to go when it opens (the estimate of when the
// chunk would finish there counts what is in flight). Nothing is set
// aside while the guard is due.
func (e *Engine) preemptable(c Priority) pathSet {
	if e.guardDue() {
		return 0
	}
	var s pathSet
	for m := e.busy & e.up &^ e.suspSet; m != 0; m &= m - 1 {
		i := m.first()
		p := &e.paths[i]
		if p.activeCls < c && !p.pinned {
			s |= bitOf(i)
		}
	}
	return s
}

// endActive ends path i's active chunk (every segment posted, or the
// transfer withdrawn): the chunk set aside on it, if any, becomes active
// again (resume), else the path has none.
func (e *Engine) endActive(i int) {
	if e.paths[i].hasSusp {
		e.resume(i)
	} else {
		e.setActive(i, false)
	}
}

// resume makes the chunk set aside on path i active again.
func (e *Engine) resume(i int) {
	p := &e.paths[i]
	p.hasSusp = false
	e.suspSet &^= bitOf(i)
	p.activeSlot, p.activeChunk, p.activeCls, p.pinned = p.suspSlot, p.suspChunk, p.suspCls, false
	e.touch(i)
}

// dropSuspended forgets the chunk set aside on path i (its path was lost:
// requeuePath puts it back in its transfer's queue).
func (e *Engine) dropSuspended(i int) {
	e.paths[i].hasSusp = false
	e.suspSet &^= bitOf(i)
}

// suspRest returns the unposted bytes of the chunk set aside on p.
func (e *Engine) suspRest(p *path) units.Bytes {
	t := &e.transfers[p.suspSlot]
	return chunkLen(&t.plan, int(p.suspChunk)) - t.chunks[p.suspChunk].posted
}

// preempt sets path i's active chunk aside for a chunk of a higher class
// that assign is about to make active (pick chose i among the preemptable
// paths): its posted segments stay in flight, its unposted rest waits.
// Not inlined, as guardCount.
//
//go:noinline
func (e *Engine) preempt(now vtime.Time, i int) {
	p := &e.paths[i]
	p.hasSusp = true
	p.suspSlot, p.suspChunk, p.suspCls = p.activeSlot, p.activeChunk, p.activeCls
	e.suspSet |= bitOf(i)
	if e.rec != nil {
		t := &e.transfers[p.suspSlot]
		e.event(EvChunkPreempt, now)
		e.ev.Transfer, e.ev.Chunk, e.ev.Path, e.ev.Attempt, e.ev.Bytes = t.id, p.suspChunk, i, t.chunks[p.suspChunk].attempt, e.suspRest(p)
		e.rec.Record(&e.ev)
	}
}
