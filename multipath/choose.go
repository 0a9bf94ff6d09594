// Path choice: which free path takes the next pending chunk (one function
// per Policy), and handing the chunk to it.

package multipath

import (
	"math"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// free reports whether path p can take a new chunk.
func (e *Engine) free(p *path) bool {
	return p.state == PathUp && !p.hasActive && p.wrOut < e.cfg.MaxWRPerPath &&
		(p.inflight == 0 || p.inflight < p.win+p.seg)
}

// finish estimates, in ns from now, when a chunk of c bytes placed on p
// would complete. The work ahead of it is what p has in flight plus the
// unposted rest of its active chunk (one class live; else finishCls).
func (e *Engine) finish(now vtime.Time, p *path, c units.Bytes, r float64) (f, backlog float64) {
	backlog = float64(p.inflight)
	if p.hasActive {
		t := &e.transfers[p.activeSlot]
		backlog += float64(chunkLen(&t.plan, int(p.activeChunk)) - t.chunks[p.activeChunk].posted)
	}
	return e.finishAfter(now, p, c, r, backlog)
}

// finishCls is finish for a chunk of class cls while several classes are
// live: the work ahead of it is what p has in flight plus the unposted
// rest of the chunks on p of class cls or above (a lower class's would be
// set aside).
func (e *Engine) finishCls(now vtime.Time, p *path, c units.Bytes, r float64, cls Priority) (f, backlog float64) {
	backlog = float64(p.inflight)
	if p.hasActive && p.activeCls >= cls {
		t := &e.transfers[p.activeSlot]
		backlog += float64(chunkLen(&t.plan, int(p.activeChunk)) - t.chunks[p.activeChunk].posted)
	}
	if p.hasSusp && p.suspCls >= cls {
		backlog += float64(e.suspRest(p))
	}
	return e.finishAfter(now, p, c, r, backlog)
}

// finishAfter is finish's estimate given the bytes ahead of the chunk.
func (e *Engine) finishAfter(now vtime.Time, p *path, c units.Bytes, r, backlog float64) (f, _ float64) {
	// The one-way delay is the empty path's (half the minimum RTT): every
	// byte in flight, queued in a NIC, a socket buffer or a switch, is in
	// the backlog already, and a busy path's SRTT counts that queue again
	// (over TCP hundreds of ms behind full socket buffers, varying from
	// one transfer to the next, which moved the last chunk from a fast
	// path to a slower one: docs/design.md, the shaped netns testbed).
	owd := p.minRTT
	if owd == 0 {
		owd = p.srtt
	}
	f = (backlog+float64(c))/r + float64(owd)/2
	if p.blockedUntil > now {
		f += float64(p.blockedUntil - now)
	}
	return f * (1 + e.cfg.ECNPenalty*p.marked), backlog
}

// candidates is the set of free paths a policy chooses among.
type candidates struct {
	free pathSet
	n    int
}

// freePaths fills c with the paths that can take a chunk now, retesting
// only the paths that changed since the last call.
func (e *Engine) freePaths(c *candidates) {
	for m := e.freeDirty; m != 0; m &= m - 1 {
		i := m.first()
		if e.free(&e.paths[i]) {
			e.freeSet |= bitOf(i)
		} else {
			e.freeSet &^= bitOf(i)
		}
	}
	e.freeDirty = 0
	c.free, c.n = e.freeSet, e.freeSet.count()
}

// pick chooses the path for the next pending chunk under the configured
// policy, -1 to wait, and returns the chunk's class. With one class live
// and one tier the candidates are the free paths; else pickMixed.
func (e *Engine) pick(now vtime.Time) (int, Priority) {
	if !e.plain {
		return e.pickMixed(now)
	}
	cls := e.soleCls
	var c candidates
	e.freePaths(&c)
	if c.n == 0 {
		return -1, cls
	}
	if e.cfg.Policy == CongestionAware {
		return e.pickCongestionAware(now, &c, cls), cls
	}
	return e.pickPolicy(now, &c, cls), cls
}

// pickMixed is pick with several classes live or with tiers: the chunk is
// of the class nextClass says; the candidates are the free paths and,
// for a chunk whose class outranks another live class, the paths it may
// preempt; with tiers, only those of the open tiers (tierAllowed).
func (e *Engine) pickMixed(now vtime.Time) (int, Priority) {
	cls := e.nextClass()
	var c candidates
	e.freePaths(&c)
	if cls > 0 && e.clsLive&(1<<cls-1) != 0 {
		if pre := e.preemptable(cls); pre != 0 {
			c.free |= pre
			c.n = c.free.count()
		}
	}
	allowed := e.all
	if e.tiered {
		allowed = e.tierAllowed(now, c.free)
		c.free &= allowed
		c.n = c.free.count()
	}
	if c.n == 0 {
		return -1, cls
	}
	if e.cfg.Policy == CongestionAware {
		return e.pickCongestionAwareCls(now, &c, cls, allowed), cls
	}
	return e.pickPolicy(now, &c, cls), cls
}

// pickPolicy chooses among the candidates under a policy other than
// CongestionAware.
func (e *Engine) pickPolicy(now vtime.Time, c *candidates, cls Priority) int {
	switch e.cfg.Policy {
	case RoundRobin:
		return e.pickRoundRobin(c)
	case Random:
		return e.pickRandom(c)
	case MinRTT:
		return e.pickMinRTT(c)
	}
	return e.pickPowerOfTwo(now, c, cls)
}

// pickRoundRobin takes the first free path after the one it took last,
// cyclically.
func (e *Engine) pickRoundRobin(c *candidates) int {
	i := c.free.first()
	if e.lastPath < MaxPaths-1 {
		if after := c.free &^ (bitOf(e.lastPath+1) - 1); after != 0 {
			i = after.first()
		}
	}
	e.lastPath = i
	return i
}

// pickRandom takes a free path uniformly at random.
func (e *Engine) pickRandom(c *candidates) int {
	return c.free.nth(e.rng.IntN(c.n))
}

// pickMinRTT takes the free path with the smallest smoothed RTT (the
// lowest index among equals).
func (e *Engine) pickMinRTT(c *candidates) int {
	best := c.free.first()
	for m := c.free & (c.free - 1); m != 0; m &= m - 1 {
		if j := m.first(); e.paths[j].srtt < e.paths[best].srtt {
			best = j
		}
	}
	return best
}

// pickPowerOfTwo samples two distinct free paths and takes the one with
// the earlier estimated finish for the next chunk (Mitzenmacher's power of
// two choices); the first sampled wins a tie.
func (e *Engine) pickPowerOfTwo(now vtime.Time, c *candidates, cls Priority) int {
	if c.n == 1 {
		return c.free.first()
	}
	a := e.rng.IntN(c.n)
	b := e.rng.IntN(c.n - 1)
	if b >= a {
		b++
	}
	ia, ib := c.free.nth(a), c.free.nth(b)
	size := e.peekLen(cls)
	pa, pb := &e.paths[ia], &e.paths[ib]
	fa, _ := e.finishCls(now, pa, size, e.effRate(pa), cls)
	fb, _ := e.finishCls(now, pb, size, e.effRate(pb), cls)
	if fb < fa {
		return ib
	}
	return ia
}

// pickCongestionAware takes the free path with the earliest estimated
// finish, unless another path would finish the chunk sooner and still has
// time for the rest of the work (ECF, Lim et al., CoNEXT'17): a free path
// q waits if f_q > max(min_{p≠q} f_p, T), where f_p is p's estimated finish
// for the chunk and T = (backlog of the others + pending bytes) / (their
// rates) the time the others need for all remaining work. In bulk T is
// large and every path takes chunks; near the tail a slow path stays idle.
// This is the engine with one class live (cls) and one tier; with more,
// pickCongestionAwareCls.
func (e *Engine) pickCongestionAware(now vtime.Time, c *candidates, cls Priority) int {
	size := e.peekLen(cls)
	best, bestF, bestR, bestB := -1, math.Inf(1), 0.0, 0.0
	sumR, sumB := 0.0, 0.0
	// The smallest and second smallest finish over every usable path, and
	// the path of the smallest: min_{p≠best} f_p is the one or the other.
	min1, min2, min1At := math.Inf(1), math.Inf(1), -1
	for m := e.up; m != 0; m &= m - 1 {
		i := m.first()
		p := &e.paths[i]
		r := e.effRate(p)
		fi, b := e.finish(now, p, size, r)
		sumR += r
		sumB += b
		if fi < bestF && c.free&bitOf(i) != 0 {
			best, bestF, bestR, bestB = i, fi, r, b
		}
		if fi < min1 {
			min1, min2, min1At = fi, min1, i
		} else if fi < min2 {
			min2 = fi
		}
	}
	if best < 0 {
		return -1
	}
	if others := sumR - bestR; others > 0 {
		minOther := min1
		if min1At == best {
			minOther = min2
		}
		tOthers := (sumB - bestB + float64(e.pending)) / others
		if bestF > max(minOther, tOthers) {
			return -1
		}
	}
	return best
}

// pickCongestionAwareCls is pickCongestionAware for a chunk of class cls
// while several classes are live, or with tiers: the work is counted as
// the chunk sees it (finishCls: a lower class's unposted work would be set
// aside; pendingFrom: the pending work of its class and above), over the
// up paths of the open tiers (allowed). It is kept apart from the plain
// one, which runs once per chunk in every engine, so that the common case
// pays nothing for classes and tiers.
func (e *Engine) pickCongestionAwareCls(now vtime.Time, c *candidates, cls Priority, allowed pathSet) int {
	size := e.peekLen(cls)
	best, bestF, bestR, bestB := -1, math.Inf(1), 0.0, 0.0
	sumR, sumB := 0.0, 0.0
	min1, min2, min1At := math.Inf(1), math.Inf(1), -1
	for m := e.up & allowed; m != 0; m &= m - 1 {
		i := m.first()
		p := &e.paths[i]
		r := e.effRate(p)
		fi, b := e.finishCls(now, p, size, r, cls)
		sumR += r
		sumB += b
		if fi < bestF && c.free&bitOf(i) != 0 {
			best, bestF, bestR, bestB = i, fi, r, b
		}
		if fi < min1 {
			min1, min2, min1At = fi, min1, i
		} else if fi < min2 {
			min2 = fi
		}
	}
	if best < 0 {
		return -1
	}
	if others := sumR - bestR; others > 0 {
		minOther := min1
		if min1At == best {
			minOther = min2
		}
		tOthers := (sumB - bestB + float64(e.pendingFrom(cls))) / others
		if bestF > max(minOther, tOthers) {
			return -1
		}
	}
	return best
}

// peekLen returns the length of the chunk assign would hand out next for
// class cls.
func (e *Engine) peekLen(cls Priority) units.Bytes {
	cl := &e.cls[cls&7]
	na := len(cl.slots)
	for k := 0; k < na; k++ {
		t := &e.transfers[cl.slots[(cl.rr+k)%na]]
		if t.reqHead >= 0 {
			return chunkLen(&t.plan, int(t.reqHead))
		}
		if t.nextFresh < t.plan.Count {
			return chunkLen(&t.plan, t.nextFresh)
		}
	}
	return 0
}

// assign hands the next pending chunk of class cls (round-robin over the
// class's transfers) to path i. If i is busy (preemptable), its active
// chunk is set aside until the new one is posted.
func (e *Engine) assign(now vtime.Time, i int, cls Priority) bool {
	cl := &e.cls[cls&7]
	na := len(cl.slots)
	for k := 0; k < na; k++ {
		j := (cl.rr + k) % na
		slot := cl.slots[j]
		t := &e.transfers[slot]
		var idx int
		switch {
		case t.reqHead >= 0:
			idx = int(t.reqHead)
			ch := &t.chunks[idx]
			t.reqHead = ch.next
			if t.reqHead < 0 {
				t.reqTail = -1
			}
			ch.queued = false
		case t.nextFresh < t.plan.Count:
			idx = t.nextFresh
			t.nextFresh++
		default:
			continue
		}
		cl.rr = (j + 1) % na
		p := &e.paths[i]
		if p.hasActive {
			e.preempt(now, i)
		}
		ch := &t.chunks[idx]
		ch.status = chunkActive
		ch.path = int16(i)
		ch.attempt++
		ch.posted, ch.acked = 0, 0
		ch.startAt = now
		ch.marks0 = p.marks
		clen := chunkLen(&t.plan, idx)
		p.pinned = false
		if e.mixed {
			p.pinned = e.guardCount(cls, clen)
		}
		e.addPending(t, -clen, -1)
		p.activeSlot, p.activeChunk, p.activeCls = slot, uint32(idx), cls
		e.setActive(i, true)
		if e.rec != nil {
			e.event(EvChunkStart, now)
			e.ev.Transfer, e.ev.Chunk, e.ev.Path, e.ev.Attempt, e.ev.Bytes = t.id, uint32(idx), i, ch.attempt, clen
			e.rec.Record(&e.ev)
		}
		return true
	}
	return false
}
