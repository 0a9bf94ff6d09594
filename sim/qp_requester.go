package sim

import (
	"time"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

func seqLT(a, b uint32) bool { return int32(a-b) < 0 }
func seqLE(a, b uint32) bool { return int32(a-b) <= 0 }

// PostSend appends work requests to the send queue, like ibv_post_send(3).
// It returns how many were posted: all, or fewer with ErrQueueFull (send
// queue full), ErrBadWR or ErrQPError.
func (q *QP) PostSend(wrs []qp.SendWR) (int, error) {
	if q.state == qpError {
		return 0, ErrQPError
	}
	if q.peer < 0 {
		return 0, ErrNotConnected
	}
	mtu := units.Bytes(q.nic.mtu)
	for i := range wrs {
		wr := &wrs[i]
		if (wr.Op != qp.OpWrite && wr.Op != qp.OpWriteImm && wr.Op != qp.OpRead) || wr.Len < 0 || wr.Len > MaxMessage ||
			(wr.Len == 0 && wr.Op != qp.OpWriteImm) {
			if i > 0 {
				q.nic.activate(q)
			}
			return i, ErrBadWR
		}
		if q.sqN == len(q.sq) && len(q.sq) < int(q.sqMax) {
			q.growSQ()
		}
		if q.sqN == len(q.sq) {
			if i > 0 {
				q.nic.activate(q)
			}
			return i, qp.ErrQueueFull
		}
		np := uint32((wr.Len + mtu - 1) / mtu)
		if np == 0 {
			np = 1
		}
		e := &q.sq[(q.sqHd+q.sqN)&(len(q.sq)-1)]
		e.wr = *wr
		e.first = q.sndEnd
		e.npkts = np
		q.sqN++
		q.sndEnd += np
		if wr.Op == qp.OpRead {
			q.readState().inSQ++
		}
	}
	if len(wrs) > 0 {
		q.nic.activate(q)
	}
	return len(wrs), nil
}

// hasData reports whether the QP has packets to send: the requester's, or
// READ responses.
func (q *QP) hasData() bool {
	return q.state == qpReady && (seqLT(q.sndNxt, q.sndEnd) || q.rd != nil && q.rd.n > 0)
}

// window returns the NIC congestion controller's window, units.MaxBytes
// if none.
func (q *QP) window() units.Bytes {
	if q.cc == nil {
		return units.MaxBytes
	}
	return q.cc.Window()
}

// inFlight estimates the payload bytes in flight: unacknowledged packets
// times the MTU.
func (q *QP) inFlight() units.Bytes {
	return units.Bytes(q.maxSent-q.sndUna) * units.Bytes(q.nic.mtu)
}

// nextPacket builds the packet at sndNxt and advances the cursor.
func (q *QP) nextPacket(now Time) *Packet {
	n := q.nic
	if q.hasResp() {
		return q.nextResponse(now)
	}
	if !seqLT(q.sndNxt, q.sndEnd) {
		panic("sim: BUG: QP scheduled with nothing to send")
	}
	e := &q.sq[(q.sqHd+q.cur)&(len(q.sq)-1)]
	if e.wr.Op == qp.OpRead {
		return q.nextReadRequest(now, e)
	}
	off := q.curOf
	pay := min(units.Bytes(n.mtu), e.wr.Len-off)
	size := n.header + int32(pay) + int32(n.intHeader)
	p := n.w.NewPacket()
	p.Kind = KindData
	p.Dst = q.peer
	p.QPN = q.peerQPN
	p.PSN = q.sndNxt
	p.Payload = uint16(pay)
	p.Flow = q.flow
	p.SrcPort = q.srcPort
	p.sentAt = uint32(now / Nanosecond)
	if !n.noECT {
		p.flags |= flagECT
	}
	if off == 0 {
		p.flags |= flagFirst
		if q.peerRegion > 0 || e.wr.RKey != 0 {
			// the responder checks the RETH: carry its fields
			x := n.w.newExt()
			x.reth, x.rkey, x.remote, x.msgLen = true, e.wr.RKey, int64(e.wr.Remote), int64(e.wr.Len)
			p.ext = x
		}
		if n.roce {
			size += RETHHeader
		}
	}
	if off+pay >= e.wr.Len {
		p.flags |= flagLast
		if e.wr.Op == qp.OpWriteImm {
			p.flags |= flagImm
			p.Imm = e.wr.Imm
			if n.roce {
				size += ImmDtHeader
			}
		}
		q.cur++
		q.curOf = 0
	} else {
		q.curOf = off + pay
	}
	p.Size = uint16(size)
	if seqLT(q.sndNxt, q.maxSent) {
		q.c.Retransmits++
	} else {
		q.maxSent = q.sndNxt + 1
	}
	q.sndNxt++
	if q.cc != nil && q.cc.Window() != units.MaxBytes {
		// A NIC CC with a window is ACK-clocked: every packet asks for an
		// ACK (the BTH AckReq bit). Otherwise a window that shrinks below
		// the bytes in flight would wait, until the RC timeout, for ACKs
		// the responder is coalescing.
		p.flags |= flagAckReq
	}
	q.c.TxPackets++
	q.c.TxBytes += uint64(pay)
	if q.rto.l.at == 0 && n.rto != Forever {
		q.rto.Reset(now + n.rto)
	}
	r := q.rateLimit
	if q.cc != nil {
		q.cc.OnSend(cc.Sent{Now: now.VTime(), Bytes: pay, InFlight: q.inFlight()})
		q.armCC(now)
		if cr := q.cc.Rate(); r == 0 || cr < r {
			r = cr
		}
	}
	if r > 0 && r < q.lineRate {
		q.paceFrom, q.paceWire = max(q.nextTx, now), units.Bytes(size+WireOverhead)
		q.nextTx = q.paceFrom + TxTime(r, q.paceWire)
	}
	return p
}

// repace recomputes when the next packet may start after the NIC CC's rate
// changed: one gap at the new rate after the last paced packet's start
// (HPCC ns-3 RdmaHw::ChangeRate moves its next-available time the same
// way), so that a QP cut to a low rate and then recovered does not wait
// out the long gap of the low rate.
func (q *QP) repace(now Time) {
	if q.paceWire == 0 || q.nextTx <= now {
		return // nothing paced is pending
	}
	r := q.ccRate
	if q.rateLimit > 0 && q.rateLimit < r {
		r = q.rateLimit
	}
	next := q.paceFrom
	if r > 0 && r < q.lineRate {
		next += TxTime(r, q.paceWire)
	}
	next = max(next, now)
	if next == q.nextTx {
		return
	}
	q.nextTx = next
	if q.active {
		q.nic.active[q.actIdx].nextTx = next
		q.nic.port.kick(now)
	}
}

// armCC re-arms the congestion controller's timer at its deadline and
// refreshes the arbiter's copy of its window.
func (q *QP) armCC(now Time) {
	if q.active {
		q.nic.active[q.actIdx].win = q.cc.Window()
	}
	if r := q.cc.Rate(); r != q.ccRate {
		q.ccRate = r
		q.repace(now)
	}
	d := q.cc.Deadline()
	if d == 0 {
		q.ccTimer.Stop()
		return
	}
	at := max(FromVTime(d), now)
	if at != q.ccTimer.l.at {
		q.ccTimer.Reset(at)
	}
}

// payload returns the payload bytes of PSNs [from, to) of the send queue:
// MTU-sized packets, less the shortfall of each message's last packet,
// so that a rate controller's acknowledged bytes match the bytes it was
// told were sent (HPCC compares the two to update once per RTT).
func (q *QP) payload(from, to uint32) units.Bytes {
	mtu := units.Bytes(q.nic.mtu)
	b := units.Bytes(to-from) * mtu
	for i := 0; i < q.sqN; i++ {
		e := &q.sq[(q.sqHd+i)&(len(q.sq)-1)]
		last := e.first + e.npkts - 1
		if seqLT(last, from) {
			continue
		}
		if !seqLT(last, to) {
			break
		}
		if short := units.Bytes(e.npkts)*mtu - e.wr.Len; short > 0 {
			b -= short
		}
	}
	return b
}

// seek moves the send cursor to PSN psn (sndUna <= psn <= sndEnd).
func (q *QP) seek(psn uint32) {
	q.sndNxt = psn
	mtu := units.Bytes(q.nic.mtu)
	for i := 0; i < q.sqN; i++ {
		e := &q.sq[(q.sqHd+i)&(len(q.sq)-1)]
		if seqLT(psn, e.first+e.npkts) {
			q.cur = i
			q.curOf = units.Bytes(psn-e.first) * mtu
			return
		}
	}
	q.cur = q.sqN
	q.curOf = 0
}

// goBack restarts transmission from PSN psn (go-back-N).
func (q *QP) goBack(psn uint32) {
	if !seqLT(psn, q.sndNxt) {
		return
	}
	q.seek(psn)
	if q.hasData() {
		q.nic.activate(q)
	}
}

// onAck handles an ACK or NAK (p.PSN is the responder's expected PSN: every
// earlier PSN has been received).
func (q *QP) onAck(p *Packet, now Time) {
	if q.state != qpReady || q.peer < 0 {
		return
	}
	// An ACK never completes a READ, whose PSNs the responder counts as
	// received with the request: its responses do (read.go).
	e := q.capAck(p.PSN)
	progress := seqLT(q.sndUna, e) && seqLE(e, q.maxSent)
	if progress && !q.advance(e, p, now) {
		return
	}
	if p.Kind == KindNakAccess {
		q.c.NAKsReceived++
		q.fail(qp.StatusRemoteAccess, now)
		return
	}
	if p.Kind == KindNak {
		q.c.NAKsReceived++
		if !progress {
			if q.retries >= q.nic.cfg.RetryCount {
				q.fail(qp.StatusRetryExceeded, now)
				return
			}
			q.retries++
		}
		if e := p.PSN; seqLE(q.sndUna, e) {
			q.goBack(e)
		}
	}
}

// advance acknowledges every PSN before e (sndUna < e <= maxSent): it
// completes the work requests whose last packet is among them and feeds
// the NIC's congestion controller from p, an ACK or NAK (not a READ
// response, whose send time and telemetry are the responder's). It reports
// false if a completion handler left the QP out of the ready state.
func (q *QP) advance(e uint32, p *Packet, now Time) bool {
	var acked units.Bytes
	if q.cc != nil { // only a rate controller reads it
		acked = q.payload(q.sndUna, e)
	}
	q.sndUna = e
	q.retries = 0
	if seqLT(q.sndNxt, e) {
		q.seek(e)
	}
	// complete every WR whose last packet is acknowledged
	for q.sqN > 0 {
		h := &q.sq[q.sqHd]
		if !seqLE(h.first+h.npkts, e) {
			break
		}
		q.doneWR = h.wr
		wr := &q.doneWR
		q.sqHd = (q.sqHd + 1) & (len(q.sq) - 1)
		q.sqN--
		q.cur--
		q.c.WRsDone++
		q.c.AckedBytes += uint64(wr.Len)
		if wr.Op == qp.OpRead {
			q.rd.inSQ--
		}
		nh := copy(q.hopsBuf[:], p.INT())
		if q.nic.w.tracer != nil {
			q.nic.w.trace(TrSendDone, q.nic.name, q.qpn, e, int64(wr.Len))
		}
		if q.handler != nil {
			q.handler.SendDone(q, wr, qp.StatusOK, now, q.hopsBuf[:nh])
		}
		if q.state != qpReady {
			return false
		}
	}
	if q.cur < 0 {
		q.cur, q.curOf = 0, 0
	}
	if q.active && !q.hasData() {
		// An ACK beyond the go-back-N cursor (for packets sent before
		// a retransmission) can leave nothing to send: leave the
		// arbiter, which would otherwise build a packet past sndEnd
		// from a stale send-queue entry.
		q.nic.deactivate(q)
	}
	if q.sndUna == q.maxSent {
		q.rto.Stop()
	} else if q.nic.rto != Forever {
		q.rto.Reset(now + q.nic.rto)
	}
	if q.cc != nil && p.Kind != KindReadResp {
		a := cc.Ack{Now: now.VTime(), Acked: acked, InFlight: q.inFlight()}
		a.RTT = time.Duration(uint32(now/Nanosecond) - p.sentAt)
		for i, h := range p.INT() {
			if i < cc.MaxHops {
				a.Hops[i] = cc.INTHop(h)
				a.NHops = i + 1
			}
		}
		q.cc.OnAck(a)
		q.armCC(now)
		if q.active || q.hasData() {
			q.nic.port.kick(now)
		}
	}
	return true
}

// Fire implements Handler for the retry timer: no progress for the ACK
// timeout means go back to the oldest unacknowledged packet, or, once the
// retry count is spent, the error state.
func (q *QP) Fire(now Time) {
	if q.state != qpReady || !seqLT(q.sndUna, q.maxSent) {
		return
	}
	q.c.Timeouts++
	if q.nic.w.tracer != nil {
		q.nic.w.trace(TrTimeout, q.nic.name, q.qpn, q.sndUna, int64(q.retries))
	}
	if q.retries >= q.nic.cfg.RetryCount {
		q.fail(qp.StatusRetryExceeded, now)
		return
	}
	q.retries++
	if q.cc != nil {
		q.cc.OnTimeout(now.VTime())
		q.armCC(now)
	}
	q.rto.Reset(now + q.nic.rto)
	q.goBack(q.sndUna)
}

// onCNP handles a congestion notification for this requester.
func (q *QP) onCNP(now Time) {
	q.c.CNPsReceived++
	if q.cc != nil && q.state == qpReady {
		q.cc.OnCNP(cc.CNP{Now: now.VTime(), Count: 1})
		q.armCC(now)
	}
}
