// Posting: the actions a round emits, and the segments of each path's active
// chunk that its window, send queue and token buckets allow.

package multipath

import (
	"time"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Actions fills dst with what the driver should do now and returns how
// many actions it wrote. Call it again while it fills dst completely.
func (e *Engine) Actions(now vtime.Time, dst []Action) int {
	n := 0
	for n < len(dst) && e.noteLen > 0 {
		nt := e.notes[e.noteHead]
		e.notes[e.noteHead] = note{}
		e.noteHead = (e.noteHead + 1) % len(e.notes)
		e.noteLen--
		dst[n] = Action{Kind: nt.kind, Transfer: nt.id, Err: nt.err}
		n++
	}
	if e.fenceSet != 0 {
		n = e.fences(dst, n)
	}
	if e.cfg.ProbeInterval > 0 || e.up != e.all {
		n = e.probes(now, dst, n)
	}
	for ; e.hwSet != 0 && n < len(dst); n++ {
		i := e.hwSet.first()
		e.hwSet &^= bitOf(i)
		dst[n] = Action{Kind: ActSetRate, Path: i, Rate: e.paths[i].hwRate}
	}
	// Pacing blocks that have passed: visit those paths again.
	for m := e.paced; m != 0; m &= m - 1 {
		if i := m.first(); e.paths[i].blockedUntil <= now {
			e.paced &^= bitOf(i)
			e.recheck |= bitOf(i)
		}
	}
	np := len(e.paths)
	for n < len(dst) {
		progress := false
		// Visit the paths in round-robin order from rrPath, skipping
		// those whose recheck bit is clear: they could not post at their
		// last visit and nothing that could change that has happened.
		// Visiting path i changes no other path's bit, so the set read
		// at the start of the pass is the one a path-by-path check would
		// see.
		for r := rotated(e.recheck, e.rrPath, np, e.all); r != 0 && n < len(dst); r &= r - 1 {
			i := e.rrPath + pathSet(r).first()
			if i >= np {
				i -= np
			}
			e.recheck &^= bitOf(i)
			p := &e.paths[i]
			if p.state != PathUp || !p.hasActive || p.blockedUntil > now {
				continue
			}
			// A pacing block that has passed is over even if the window
			// now holds the path: Deadline must not keep returning it.
			if p.blockedUntil != 0 {
				p.blockedUntil = 0
				e.mark(bitOf(i))
			}
			if (p.inflight == 0 || p.inflight < p.win+2*p.seg) && p.wrOut < e.cfg.MaxWRPerPath {
				var moved bool
				n, moved = e.post(now, i, dst, n)
				progress = progress || moved
			}
		}
		e.rrPath++
		if e.rrPath >= np {
			e.rrPath = 0
		}
		if n < len(dst) && e.pendingN > 0 && (e.repick || progress) {
			if i, cls := e.pick(now); i >= 0 && e.assign(now, i, cls) {
				progress = true
			} else {
				e.repick = false
			}
		}
		if !progress {
			break
		}
	}
	return n
}

// depth is how many bytes path p's active chunk may have posted and not
// yet completed. A completion comes only after a whole work request
// crossed, so the engine's in-flight count overstates the bytes in the
// network by up to one segment being serialised and one queued behind
// it: the window plus two segments, or a path with a window of one BDP
// could not keep its pipe full. A chunk of a class below the engine's
// deep class (priority.go) shares that allowance with the other paths of
// its NIC: what a higher-priority chunk finds queued ahead of it in the
// NIC is then one path's allowance, not one per path.
func (e *Engine) depth(p *path) units.Bytes {
	if p.activeCls < e.deepCls {
		d, _ := e.shallow(p)
		return d
	}
	return p.win + 2*p.seg
}

// shallow returns the depth and the work-request size of a chunk below
// the deep class on p. When its share is less than a segment, it is
// posted in smaller work requests (whole MTUs), so that the NIC's paths
// together keep one path's allowance, not a segment each.
func (e *Engine) shallow(p *path) (depth, seg units.Bytes) {
	depth, seg = p.win+2*p.seg, p.seg
	if p.nicPaths > 1 {
		depth /= units.Bytes(p.nicPaths)
	}
	if depth < seg {
		seg = max(p.cfg.MTU, depth/p.cfg.MTU*p.cfg.MTU)
	}
	return depth, seg
}

// window is path p's effective window: the CC window capped by
// MaxInFlight and, with software pacing and a rate-based algorithm below
// line rate, by one rate × base-RTT product (at least one MTU). The pacer
// enforces the rate; the window bounds what can pile up in the NIC's send
// queue while PFC pauses the port: posted work requests leave at line rate
// once the pause lifts, so a backlog posted at an old, higher rate would
// otherwise undo a rate cut and keep the queue above Kmin long enough for
// DCQCN to cut again and again. Hardware pacing drains the backlog at the
// rate itself. Without pacing (PacingConfig.Disabled) nothing enforces a
// rate-based algorithm's rate: that is what "pacing off" means.
func (e *Engine) window(p *path) units.Bytes { return p.win }

func (e *Engine) computeWindow(p *path) units.Bytes {
	w := min(p.ccWin, p.maxInFlight)
	if p.pacer != nil {
		if r := p.ccRate; r < p.cfg.LineRate {
			w = min(w, max(r.BytesIn(p.cfg.BaseRTT), p.cfg.MTU))
		}
	}
	return w
}

// segFor is the work-request size for path p: Config.Segment (or the
// pacer's, sized for the path's line rate), shrunk to half the path's
// effective window, in whole MTUs, when that window is smaller than two
// segments. Feedback on a window-based path arrives per completion, so a
// segment larger than the window would stretch the control loop to one
// segment time (at a collapsed window, many milliseconds) instead of about
// an RTT.
func (e *Engine) segFor(p *path) units.Bytes { return p.seg }

func (e *Engine) computeSegFor(p *path) units.Bytes {
	if e.cfg.Pacing.Hardware && p.ccWin == units.MaxBytes {
		return p.segBase // the NIC paces a rate-based path: whole chunks
	}
	w := p.win
	if w >= 2*p.segBase {
		return p.segBase
	}
	mtu := p.cfg.MTU
	return max(mtu, min(p.segBase, w/2/mtu*mtu))
}

// post posts as many segments of path i's active chunk as window, queue
// depth and pacing allow. Actions calls it for a path that is up, has an
// active chunk and is not held back by pacing.
func (e *Engine) post(now vtime.Time, i int, dst []Action, n int) (int, bool) {
	p := &e.paths[i]
	slot, idx := p.activeSlot, p.activeChunk
	t := &e.transfers[slot]
	ch := &t.chunks[idx]
	clen := chunkLen(&t.plan, int(idx))
	moved := false
	// Cheap checks first: a path whose window or send queue is full needs
	// no pacer reads.
	segMax := p.seg
	depth := p.win + 2*segMax
	if p.activeCls < e.deepCls {
		depth, segMax = e.shallow(p)
	}
	if first := min(segMax, clen-ch.posted); (p.inflight > 0 && p.inflight+first > depth) ||
		p.wrOut >= e.cfg.MaxWRPerPath || e.freeWork < 0 || ch.posted >= clen {
		return n, false
	}
	// Read the pacers once per call and settle once at the end: a burst
	// of several segments costs two bucket reads and two updates, not
	// four per segment.
	avail, pb, qb := units.MaxBytes, units.MaxBytes, units.MaxBytes
	if p.pacer != nil {
		pb = p.pacer.Budget(now)
		if p.port != nil {
			qb = p.port.Budget(now)
		}
		avail = min(pb, qb)
	}
	var sent units.Bytes
	paced := false
	chOff := chunkOff(&t.plan, int(idx))
	for n < len(dst) && ch.posted < clen {
		seg := min(segMax, clen-ch.posted)
		if p.inflight > 0 && p.inflight+seg > depth {
			break
		}
		if p.wrOut >= e.cfg.MaxWRPerPath || e.freeWork < 0 {
			break
		}
		if seg > avail {
			paced = true
			break
		}
		avail -= seg
		sent += seg
		off := chOff + ch.posted
		last := ch.posted+seg == clen
		id, _ := e.allocWork(workSegment, i, slot, idx, ch.attempt, seg, now)
		a := &dst[n]
		*a = Action{
			Kind: ActPost, Path: i, WorkID: id, Transfer: t.id, Chunk: idx,
			Offset: off, Local: t.local + off, Remote: t.remote + off, Len: seg, Attempt: ch.attempt,
		}
		if last {
			a.HasImm = true
			a.ImmData, _ = chunk.EncodeImm(t.tag, idx)
		}
		n++
		ch.posted += seg
		p.inflight += seg
		p.alg.OnSend(cc.Sent{Now: now, Bytes: seg, InFlight: p.inflight})
		moved = true
		if last {
			ch.status = chunkPosted
			if e.skipped != 0 {
				e.guardServed(p)
			}
			if p.hasSusp { // a chunk set aside goes on (priority.go)
				e.resume(i)
			} else {
				e.setActive(i, false)
			} // a chunk set aside goes on (priority.go)
			if ch.acked >= clen { // completions raced ahead (cannot happen on RC, but be exact)
				e.chunkDone(now, slot, idx, i, 0)
			}
		}
	}
	if n == len(dst) && p.hasActive {
		e.recheck |= bitOf(i) // stopped by the full buffer: go on next call
	}
	if moved {
		e.refreshCC(p) // OnSend may move a window (HPCC's update mark)
	}
	if p.pacer != nil {
		if sent > 0 {
			p.pacer.OnSent(now, sent)
			if p.port != nil {
				p.port.OnSent(now, sent)
			}
		}
		if paced {
			// Wake when both buckets hold the next segment: each
			// bucket's refill time for its deficit after the budgets
			// read above (Refill is NextSend's arithmetic without its
			// bucket reads).
			seg := min(segMax, clen-ch.posted)
			wait := p.pacer.Refill(seg - (pb - sent))
			if d := seg - (qb - sent); p.port != nil && d > 0 {
				wait = max(wait, p.port.Refill(d))
			}
			p.blockedUntil = now.Add(max(wait, time.Nanosecond))
			e.paced |= bitOf(i)
			e.mark(bitOf(i))
		}
	}
	return n, moved
}

// effRate is path p's effective rate in bytes per nanosecond, as cached
// by refreshRate.
func (e *Engine) effRate(p *path) float64 { return p.eff }

// refreshRate recomputes p's cached CC rate and window and its effective
// rate after anything they depend on changed (sample and OnProbeReply
// change the RTT and delivery-rate estimates; every call into p's CC
// algorithm is followed by refreshRate or refreshCC), and its effective
// window and segment size when the CC's rate or window moved. Between
// refreshes the engine reads the cached values instead of calling Rate and
// Window (cc.Algorithm's queries are side-effect free). A changed window or
// segment size sends Actions back to the path; the CC's deadline may have
// moved, so the path's deadline is recomputed.
func (e *Engine) refreshRate(p *path) {
	r, w := p.alg.Rate(), p.alg.Window()
	e.mark(bitOf(p.idx))
	changed := r != p.ccRate || w != p.ccWin
	p.ccRate, p.ccWin = r, w
	p.eff = e.computeEffRate(p)
	if changed {
		e.refreshWindow(p)
	}
}

// refreshCC is refreshRate after a CC call that changed nothing else
// (OnSend): the effective rate is recomputed only if the CC's rate or
// window moved.
func (e *Engine) refreshCC(p *path) {
	r, w := p.alg.Rate(), p.alg.Window()
	e.mark(bitOf(p.idx))
	if r != p.ccRate || w != p.ccWin {
		p.ccRate, p.ccWin = r, w
		p.eff = e.computeEffRate(p)
		e.refreshWindow(p)
	}
}

// refreshWindow recomputes p's effective window and segment size from the
// cached CC rate and window.
func (e *Engine) refreshWindow(p *path) {
	oldWin, oldSeg := p.win, p.seg
	p.win = e.computeWindow(p)
	p.seg = e.computeSegFor(p)
	if p.win != oldWin || p.seg != oldSeg {
		e.recheck |= bitOf(p.idx)
	}
}

func (e *Engine) computeEffRate(p *path) float64 {
	r := min(p.rateEst, p.ccRate, p.cfg.LineRate)
	if s := p.srtt; s > 0 {
		if w := p.ccWin; w < units.MaxBytes {
			r = min(r, units.RateOf(w, s))
		}
	}
	if r < units.Mbps {
		r = units.Mbps
	}
	return float64(r) / 8e9
}
