package multipath

import (
	"fmt"

	"github.com/mptx-dev/mptx/vtime"
)

// CheckCaches recomputes from scratch everything the engine caches between
// inputs (sets.go; the CC's rate and window, the effective rate, window and
// segment size) and returns an error naming the first mismatch. now must
// be the instant of the last Actions call, made until it stopped filling
// its buffer: that is when the recheck set must name every path that could
// still post.
func (e *Engine) CheckCaches(now vtime.Time) error {
	var slow vtime.Time
	for i := range e.paths {
		p := &e.paths[i]
		b := bitOf(i)
		if got, want := e.up&b != 0, p.state == PathUp; got != want {
			return fmt.Errorf("path %d: in up set = %v, state %v", i, got, p.state)
		}
		if got, want := e.busy&b != 0, p.hasActive; got != want {
			return fmt.Errorf("path %d: in busy set = %v, hasActive %v", i, got, want)
		}
		if got, want := e.suspSet&b != 0, p.hasSusp; got != want {
			return fmt.Errorf("path %d: in suspended set = %v, hasSusp %v", i, got, want)
		}
		if p.hasSusp && (!p.hasActive || p.suspCls >= p.activeCls) {
			return fmt.Errorf("path %d: chunk of class %d set aside under class %d (active %v)", i, p.suspCls, p.activeCls, p.hasActive)
		}
		if got, want := e.fenceSet&b != 0, p.fence; got != want {
			return fmt.Errorf("path %d: in fence set = %v, fence %v", i, got, want)
		}
		if e.freeDirty&b == 0 && (e.freeSet&b != 0) != e.free(p) {
			return fmt.Errorf("path %d: in free set = %v, free %v", i, e.freeSet&b != 0, e.free(p))
		}
		if r, w := p.alg.Rate(), p.alg.Window(); r != p.ccRate || w != p.ccWin {
			return fmt.Errorf("path %d: cached CC rate %v window %v, CC says %v and %v", i, p.ccRate, p.ccWin, r, w)
		}
		if got, want := p.eff, e.computeEffRate(p); got != want {
			return fmt.Errorf("path %d: cached effective rate %v, recomputed %v", i, got, want)
		}
		if got, want := p.win, e.computeWindow(p); got != want {
			return fmt.Errorf("path %d: cached window %v, recomputed %v", i, got, want)
		}
		if got, want := p.seg, e.computeSegFor(p); got != want {
			return fmt.Errorf("path %d: cached segment %v, recomputed %v", i, got, want)
		}
		d := e.pathDeadline(i)
		if e.dirty&b == 0 && e.pathDeadlineCached(i) != d {
			return fmt.Errorf("path %d: cached deadline %v, recomputed %v (not marked dirty)", i, e.pathDeadlineCached(i), d)
		}
		slow = vtime.Earliest(slow, d)
		if p.state != PathUp || !p.hasActive {
			continue
		}
		if p.blockedUntil != 0 && e.paced&b == 0 {
			return fmt.Errorf("path %d: pacing block until %v but not in the paced set", i, p.blockedUntil)
		}
		if e.recheck&b != 0 || p.blockedUntil > now {
			continue
		}
		// Not to be visited: it must be unable to post for a reason other
		// than pacing.
		t := &e.transfers[p.activeSlot]
		ch := &t.chunks[p.activeChunk]
		clen := chunkLen(&t.plan, int(p.activeChunk))
		first := min(p.seg, clen-ch.posted)
		if (p.inflight == 0 || p.inflight < p.win+2*p.seg) && p.wrOut < e.cfg.MaxWRPerPath &&
			!(p.inflight > 0 && p.inflight+first > e.depth(p)) && e.freeWork >= 0 && ch.posted < clen {
			return fmt.Errorf("path %d: could post %v (in flight %v, window %v, segment %v, %d work requests) but is not in the recheck set",
				i, first, p.inflight, p.win, p.seg, p.wrOut)
		}
	}
	if e.spillAt != vtime.Never {
		if e.pendingN == 0 {
			return fmt.Errorf("spill deadline %v with no chunk pending", e.spillAt)
		}
		slow = vtime.Earliest(slow, e.spillAt)
	}
	var pendN [NumPriorities]int
	for _, s := range e.active {
		t := &e.transfers[s]
		for i := range t.chunks {
			if ch := &t.chunks[i]; ch.status == chunkPending && (i >= t.nextFresh || ch.queued) {
				pendN[t.prio]++
			}
		}
	}
	for c := range pendN {
		if e.plain {
			break // per-class counts are kept only when not plain
		}
		if pendN[c] != e.cls[c].pendingN || (pendN[c] > 0) != (e.clsPend&(1<<c) != 0) {
			return fmt.Errorf("class %d: %d chunks pending, counted %d (pending mask %08b)", c, pendN[c], e.cls[c].pendingN, e.clsPend)
		}
		if (len(e.cls[c].slots) > 0) != (e.clsLive&(1<<c) != 0) {
			return fmt.Errorf("class %d: %d live transfers, live mask %08b", c, len(e.cls[c].slots), e.clsLive)
		}
	}
	if got := e.Deadline(); got != slow {
		return fmt.Errorf("Deadline() = %v, recomputed %v", got, slow)
	}
	return nil
}
