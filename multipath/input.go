// Inputs: completions, probe replies, counter readings, link events and
// timers, each stamped with now; and Deadline, the one timer the driver arms.

package multipath

import (
	"math"
	"time"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// OnCompletion feeds one send completion (or a failed post, with OK false)
// at now. Unknown and stale work ids are counted and ignored.
func (e *Engine) OnCompletion(now vtime.Time, c *Completion) {
	e.repick = true
	idx := int(uint32(c.WorkID)) - 1
	gen := uint32(c.WorkID >> 32)
	if idx < 0 || idx >= len(e.work) || e.work[idx].gen != gen || e.work[idx].kind == workFree {
		e.stale++
		return
	}
	w := e.work[idx] // copy: the slot is freed below
	e.freeWorkSlot(idx)
	e.touch(int(w.path))
	p := &e.paths[w.path]
	p.wrOut--
	if w.kind == workProbe {
		e.onProbeDone(now, p, int(w.path), w.postAt, c.OK, c.Reason)
		return
	}
	p.inflight -= w.len
	e.segmentDone(now, &w)
	if !c.OK {
		if w.postAt >= p.upAt && p.state == PathUp {
			// The queue pair is in the error state, which flushes the
			// rest of its work: no fence needed, a reset before the probe.
			p.qpErr = true
			e.lose(now, int(w.path), PathQuarantined, c.Reason, false)
		}
		return
	}
	e.sample(now, p, w.len, w.postAt, c)
	t := &e.transfers[w.slot]
	if !t.live || t.gen != w.tgen || int(w.chunk) >= len(t.chunks) {
		return
	}
	ch := &t.chunks[w.chunk]
	if ch.attempt != w.attempt || ch.status == chunkDone || ch.status == chunkPending {
		return // an older attempt finishing late
	}
	ch.acked += w.len
	if ch.status == chunkPosted && ch.acked >= chunkLen(&t.plan, int(w.chunk)) {
		e.chunkDone(now, w.slot, w.chunk, int(w.path), now.Sub(w.postAt))
	}
}

// sample updates a path's RTT, rate and CC state from one OK completion.
func (e *Engine) sample(now vtime.Time, p *path, n units.Bytes, postAt vtime.Time, c *Completion) {
	raw := now.Sub(postAt)
	if raw < 0 {
		raw = 0
	}
	// TIMELY §4.1: the completion time of a segment includes its own
	// serialisation; subtract it at line rate to get the network RTT.
	if n != p.txLen {
		p.txLen, p.txTime = n, p.cfg.LineRate.TxTime(n)
	}
	rtt := raw - p.txTime
	if rtt < time.Nanosecond {
		rtt = time.Nanosecond
	}
	if p.srtt == 0 {
		p.srtt, p.rawSRTT, p.rawVar = rtt, raw, raw/2
	} else {
		// RFC 6298 §2.3 gains.
		d := p.rawSRTT - raw
		if d < 0 {
			d = -d
		}
		p.rawVar += (d - p.rawVar) / 4
		p.rawSRTT += (raw - p.rawSRTT) / 8
		p.srtt += (rtt - p.srtt) / 8
	}
	if p.minRTT == 0 || rtt < p.minRTT {
		p.minRTT = rtt
	}
	// Delivery rate: bytes over the time since the later of the previous
	// completion and this work request's post (a busy path's service rate).
	from := max(p.lastAck, postAt)
	if dt := now.Sub(from); dt > 0 {
		s := units.RateOf(n, dt)
		p.rateEst += units.BitRate(float64(s-p.rateEst) * rateGain)
		p.rateEst = p.rateEst.Clamp(units.Mbps, p.cfg.LineRate)
	}
	p.lastAck = now
	p.bytes += n
	if c.NHops > 0 {
		ack := cc.Ack{Now: now, Acked: n, RTT: rtt, InFlight: p.inflight, ECNMarked: c.ECNMarked, NHops: c.NHops}
		ack.Hops = c.Hops
		p.alg.OnAck(ack)
	} else {
		// Built in the call's argument space: the Ack, with its INT hop
		// array, is 304 bytes, and a local copy would cost a second copy.
		p.alg.OnAck(cc.Ack{Now: now, Acked: n, RTT: rtt, InFlight: p.inflight, ECNMarked: c.ECNMarked})
	}
	e.syncRate(now, p)
}

// syncRate pushes the CC rate into the path's pacer (or marks it for an
// ActSetRate with hardware pacing) and refreshes the cached effective rate.
func (e *Engine) syncRate(now vtime.Time, p *path) {
	e.refreshRate(p)
	if p.pacer == nil {
		if e.cfg.Pacing.Hardware {
			if r := min(p.ccRate, p.cfg.LineRate); r != p.hwRate {
				p.hwRate = r
				e.hwSet |= bitOf(p.idx)
			}
		}
		return
	}
	r := min(p.ccRate, p.cfg.LineRate)
	if r != p.pacedRate {
		p.pacer.SetRate(now, r)
		p.pacedRate = r
	}
}

// OnProbeReply feeds an RTT measured by a backend's own ping-pong probe on
// path i (backends whose probes complete as work requests use
// OnCompletion instead).
func (e *Engine) OnProbeReply(now vtime.Time, i int, rtt time.Duration) {
	if i < 0 || i >= len(e.paths) || rtt <= 0 {
		return
	}
	p := &e.paths[i]
	if p.srtt == 0 {
		p.srtt = rtt
	} else {
		p.srtt += (rtt - p.srtt) / 8
	}
	if p.minRTT == 0 || rtt < p.minRTT {
		p.minRTT = rtt
	}
	e.refreshRate(p)
	if e.rec != nil {
		e.event(EvProbe, now)
		e.ev.Path, e.ev.RTT = i, rtt
		e.rec.Record(&e.ev)
	}
}

// OnCounters feeds a reading of path i's cumulative counters: CE-marked
// packets and CNPs received. The first reading is a baseline; a reading
// lower than the previous one is taken as a counter reset.
func (e *Engine) OnCounters(now vtime.Time, i int, ecnMarked, cnps uint64) {
	if i < 0 || i >= len(e.paths) {
		return
	}
	p := &e.paths[i]
	if !p.sawCounters {
		p.sawCounters, p.cntECN, p.cntCNP = true, ecnMarked, cnps
		return
	}
	e.repick = true
	dE, dC := ecnMarked-p.cntECN, cnps-p.cntCNP
	if ecnMarked < p.cntECN {
		dE = ecnMarked
	}
	if cnps < p.cntCNP {
		dC = cnps
	}
	p.cntECN, p.cntCNP = ecnMarked, cnps
	if dE == 0 && dC == 0 {
		return
	}
	p.ecn += dE
	p.cnps += dC
	p.marks += dE + dC
	if dC > 0 {
		p.alg.OnCNP(cc.CNP{Now: now, Count: int(min(dC, math.MaxInt32))})
		e.syncRate(now, p)
		if e.rec != nil {
			e.event(EvCNP, now)
			e.ev.Path, e.ev.ECN = i, dC
			e.rec.Record(&e.ev)
		}
	}
}

// OnPathDown reports that path i is down (link down, QP torn down). Its
// chunks are requeued; it is not probed until OnPathUp. reason should be
// a static string.
func (e *Engine) OnPathDown(now vtime.Time, i int, reason string) {
	e.repick = true
	if i < 0 || i >= len(e.paths) {
		return
	}
	if s := e.paths[i].state; s == PathDown || s == PathDead {
		return
	}
	e.lose(now, i, PathDown, reason, true)
}

// OnPathUp reports that path i is back; it is probed before reuse.
func (e *Engine) OnPathUp(now vtime.Time, i int) {
	e.repick = true
	if i < 0 || i >= len(e.paths) {
		return
	}
	p := &e.paths[i]
	if p.state != PathDown {
		return
	}
	e.setState(i, PathQuarantined)
	p.until = now
	p.probeFail = 0
}

// OnReset reports the outcome of the queue-pair reset of path i that an
// ActReset (or an ActProbe with Reset) asked for. ok means the backend's
// Reset returned without error: by its contract (qp.Resetter) every work
// request outstanding on the path was flushed and none of them can reach
// the peer any more, so the engine writes them all off at once (their
// completions, if the backend still reports them, are stale and ignored)
// and their transfers may now be reported. A failed reset leaves them
// outstanding until they complete; the path's next probe asks for a reset
// again.
func (e *Engine) OnReset(now vtime.Time, i int, ok bool) {
	if i < 0 || i >= len(e.paths) {
		return
	}
	e.repick = true
	e.touch(i)
	p := &e.paths[i]
	fenced := p.fencing
	p.fencing = false
	if !ok {
		p.qpErr = true
		return
	}
	p.qpErr = false
	for idx := range e.work {
		w := &e.work[idx]
		if w.kind == workFree || int(w.path) != i {
			continue
		}
		id := uint64(w.gen)<<32 | uint64(idx+1)
		if id == p.probeID && !fenced {
			continue // an ActProbe's reset: the probe is posted after it
		}
		wc := *w
		e.freeWorkSlot(idx)
		p.wrOut--
		if wc.kind == workProbe {
			e.onProbeDone(now, p, i, wc.postAt, false, "reset")
			continue
		}
		p.inflight -= wc.len
		e.segmentDone(now, &wc)
	}
}

// OnTimer runs the engine's timers due at now: CC timers, pacing wake-ups
// (nothing to do: Actions retries), stall timeouts and quarantine expiry
// (Actions sends the probes). Early or repeated calls are harmless.
func (e *Engine) OnTimer(now vtime.Time) {
	e.repick = true
	// Only paths whose deadline is due can have a CC timer or a stall
	// due: a path's deadline is the earliest of both (pathDeadline).
	e.refreshDeadlines()
	var due pathSet
	e.due(now, 1, &due)
	for ; due != 0; due &= due - 1 {
		i := due.first()
		p := &e.paths[i]
		e.mark(bitOf(i))
		if d := p.alg.Deadline(); d != 0 && d <= now {
			p.alg.OnTimer(now)
			e.syncRate(now, p)
		}
		if p.state != PathUp {
			continue
		}
		if id, ok := e.oldest(p); ok {
			w := &e.work[int(uint32(id))-1]
			if now >= w.postAt.Add(e.timeout(p)) {
				p.alg.OnTimeout(now)
				e.syncRate(now, p)
				e.lose(now, i, PathQuarantined, "stalled", true)
			}
		}
	}
}

// timeout is path p's stall timeout: 2·srtt + 4·rttvar of the post→
// completion time, at least Config.MinTimeout.
func (e *Engine) timeout(p *path) time.Duration {
	return max(e.cfg.MinTimeout, 2*p.rawSRTT+4*p.rawVar)
}

// Deadline returns the earliest instant the engine needs OnTimer or
// Actions to run again, 0 if none. It recomputes only the deadlines of
// paths whose state changed since the last call (sets.go).
func (e *Engine) Deadline() vtime.Time {
	e.refreshDeadlines()
	if d := min(e.dlTree[1], e.spillAt); d != vtime.Never {
		return d
	}
	return 0
}
