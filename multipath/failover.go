// Failover: probing quarantined and dead paths, taking a path out of use
// (requeueing its chunks), and failing transfers when no path is left.

package multipath

import (
	"fmt"
	"strings"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/vtime"
)

// fences emits ActReset for paths lost with work outstanding that nothing
// else will flush (see lose).
func (e *Engine) fences(dst []Action, n int) int {
	for ; e.fenceSet != 0 && n < len(dst); n++ {
		i := e.fenceSet.first()
		e.fenceSet &^= bitOf(i)
		p := &e.paths[i]
		p.fence, p.fencing = false, true
		e.mark(bitOf(i))
		dst[n] = Action{Kind: ActReset, Path: i}
	}
	return n
}

// probes emits probes for quarantined paths whose backoff has passed and,
// with ProbeInterval, for idle paths. Without ProbeInterval only paths
// that are not up can need one.
func (e *Engine) probes(now vtime.Time, dst []Action, n int) int {
	m := e.all
	if e.cfg.ProbeInterval == 0 {
		m &^= e.up
	}
	for ; m != 0; m &= m - 1 {
		if n >= len(dst) {
			break
		}
		i := m.first()
		p := &e.paths[i]
		if p.probeID != 0 || p.wrOut >= e.cfg.MaxWRPerPath+1 || p.fence || p.fencing {
			continue
		}
		due := (p.state == PathQuarantined || p.state == PathDead) && now >= p.until
		idle := e.cfg.ProbeInterval > 0 && p.state == PathUp && p.wrOut == 0 && now >= p.lastProbe.Add(e.cfg.ProbeInterval)
		if !due && !idle {
			continue
		}
		id, ok := e.allocWork(workProbe, i, 0, 0, 0, 0, now)
		if !ok {
			break
		}
		if due {
			p.fromDead = p.state == PathDead
			e.setState(i, PathProbing)
		}
		p.probeID = id
		p.lastProbe = now
		p.probes++
		dst[n] = Action{Kind: ActProbe, Path: i, WorkID: id, HasImm: true, ImmData: chunk.ProbeImm, Reset: p.qpErr && due}
		n++
	}
	return n
}

func (e *Engine) onProbeDone(now vtime.Time, p *path, i int, postAt vtime.Time, ok bool, reason string) {
	p.probeID = 0
	e.touch(i)
	if ok {
		rtt := now.Sub(postAt)
		if p.state == PathProbing {
			p.qpErr = false
			e.setState(i, PathUp)
			p.upAt = now
			p.probeFail = 0
			p.reason, p.probeReason = "", ""
			p.blockedUntil = 0
			if e.rec != nil {
				e.event(EvPathUp, now)
				e.ev.Path = i
				e.rec.Record(&e.ev)
			}
		}
		e.OnProbeReply(now, i, rtt)
		return
	}
	if p.state == PathUp {
		p.qpErr = true
		e.lose(now, i, PathQuarantined, reason, false)
		return
	}
	if p.state != PathProbing {
		return
	}
	// A failed work request leaves an RC queue pair in the error state,
	// whatever took the path out of use first (a stall, say): the next
	// probe must reset it.
	p.qpErr = true
	p.probeFail++
	p.probeReason = reason
	if p.fromDead || p.probeFail >= e.cfg.MaxProbeFailures {
		e.setState(i, PathDead)
		p.until = now.Add(e.cfg.QuarantineMax)
		e.checkUsable(now)
		return
	}
	e.setState(i, PathQuarantined)
	p.backoff = min(2*p.backoff, e.cfg.QuarantineMax)
	p.until = now.Add(p.backoff)
	if e.rec != nil {
		e.event(EvPathQuarantine, now)
		e.ev.Path, e.ev.Reason, e.ev.Latency = i, reason, p.backoff
		e.rec.Record(&e.ev)
	}
}

// lose takes path i out of use: state becomes to (PathQuarantined or
// PathDown), its chunks are requeued, and transfers fail if no path is left.
// With fence set (a stall, a link reported down: the queue pair is not in
// the error state, so nothing flushes its outstanding work requests) and
// work outstanding, the next Actions asks the driver to reset the queue
// pair (ActReset): the requeued chunks' transfers cannot be reported done
// while an abandoned attempt may still land.
func (e *Engine) lose(now vtime.Time, i int, to PathState, reason string, fence bool) {
	p := &e.paths[i]
	if fence && p.wrOut > 0 {
		p.fence = true
		e.fenceSet |= bitOf(i)
	}
	wasUp := p.state == PathUp
	e.setState(i, to)
	p.reason = reason
	p.upAt = vtime.Never
	e.dropSuspended(i)
	e.setActive(i, false)
	p.blockedUntil = 0
	if to == PathQuarantined {
		p.backoff = min(max(2*p.backoff, e.cfg.QuarantineMin), e.cfg.QuarantineMax)
		p.until = now.Add(p.backoff)
	}
	if wasUp {
		p.downs++
		e.requeuePath(now, i, reason)
	}
	if e.rec != nil {
		e.event(EvPathDown, now)
		e.ev.Path, e.ev.Reason = i, reason
		e.rec.Record(&e.ev)
		if to == PathQuarantined {
			e.event(EvPathQuarantine, now)
			e.ev.Path, e.ev.Reason, e.ev.Latency = i, reason, p.backoff
			e.rec.Record(&e.ev)
		}
	}
	e.checkUsable(now)
}

// requeuePath puts every unfinished chunk attempt on path i back in its
// transfer's requeue list.
func (e *Engine) requeuePath(now vtime.Time, i int, reason string) {
	for _, slot := range e.active {
		t := &e.transfers[slot]
		for j := range t.chunks {
			ch := &t.chunks[j]
			if (ch.status != chunkActive && ch.status != chunkPosted) || int(ch.path) != i {
				continue
			}
			ch.status = chunkPending
			ch.posted, ch.acked = 0, 0
			ch.queued = true
			ch.next = -1
			if t.reqTail >= 0 {
				t.chunks[t.reqTail].next = int32(j)
			} else {
				t.reqHead = int32(j)
			}
			t.reqTail = int32(j)
			t.requeues++
			e.paths[i].requeues++
			e.addPending(t, chunkLen(&t.plan, j), 1)
			if e.rec != nil {
				e.event(EvChunkRequeue, now)
				e.ev.Transfer, e.ev.Chunk, e.ev.Path, e.ev.Attempt, e.ev.Reason = t.id, uint32(j), i, ch.attempt, reason
				e.rec.Record(&e.ev)
			}
		}
	}
}

// checkUsable fails every live transfer when no path is usable.
func (e *Engine) checkUsable(now vtime.Time) {
	for i := range e.paths {
		if e.paths[i].state.usable() {
			return
		}
	}
	if len(e.active) == 0 {
		return
	}
	report := e.pathReport()
	for len(e.active) > 0 {
		slot := e.active[0]
		err := fmt.Errorf("%w for transfer %d (%d of %d chunks done): %s",
			ErrNoPath, e.transfers[slot].id, e.transfers[slot].done, e.transfers[slot].plan.Count, report)
		e.decide(now, slot, err)
	}
}

// pathReport describes every path and why it is not usable.
func (e *Engine) pathReport() string {
	var b strings.Builder
	for i := range e.paths {
		p := &e.paths[i]
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "path %d (%s): %s", i, p.cfg.Name, p.state)
		if p.reason != "" {
			fmt.Fprintf(&b, " (%s)", p.reason)
		}
		if p.probeFail > 0 {
			fmt.Fprintf(&b, " after %d failed probes (last: %s)", p.probeFail, p.probeReason)
		}
	}
	return b.String()
}
