package sim

import (
	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// RDMA READ (IBTA Vol. 1 §9.4.4, §9.7.5.1.4; RoCEv2).
//
// The requester posts an OpRead work request. It takes one PSN per
// response packet (⌈Len/MTU⌉), as on a real RC queue pair, and goes out as
// one READ request packet: the headers and a RETH (remote address, rkey,
// length), no payload, in the data class (it queues behind data, is
// paused by PFC and may be CE-marked like any data packet). The responder
// accepts a request in PSN order like a write, checks its RETH against the
// key's range and rights (QPConfig.Access; a refusal is a remote access
// NAK that fails the requester's QP, IBV_WC_REM_ACCESS_ERR), counts the
// read's PSNs as received, and queues the read: its NIC then sends the
// response packets, PSN-numbered in the requester's space, through the
// same line-rate arbiter as its own requests (responses first), paced by
// the QP's rate limit and NIC congestion control, in the data class.
//
// Responses are implicit acknowledgements: one with PSN p acknowledges
// every earlier PSN. The requester accepts them in order only; a gap (a
// lost response) makes it go back to its oldest unacknowledged PSN, which
// re-sends the READ request for the rest of the read (at most once per
// NAKInterval), and its retry timer does the same when responses stop
// coming. A duplicate READ request is executed again: the responses it
// asks for replace those queued from its PSN on. The READ completes when
// its last response arrives; an ACK (for a later write, say) never
// completes it, because the responder counted the read's PSNs with the
// request, before sending a response.
//
// Congestion: the requester is the ECN notification point for responses.
// It counts CE-marked responses (QPCounters.ECNMarked of the requester's
// QP) and returns a CNP to the responder at most once per CNPInterval
// (QPCounters.CNPsSent), whose NIC congestion control, if any, cuts the
// responses' rate as a DCQCN reaction point does. A CE-marked request is
// answered with a CNP to the requester, as a write is.
//
// The requester keeps at most NICConfig.MaxRdAtomic READs outstanding
// (max_rd_atomic, ibv_modify_qp(3)); a READ beyond it waits in the send
// queue, holding back what follows it, as on a verbs QP.
//
// Deviations: responses carry no INT, and a requester's NIC congestion
// controller gets no OnAck for them (their send time and telemetry are the
// responder's); the responder keeps any number of reads queued (a verbs
// responder refuses more than max_dest_rd_atomic, which the requester's
// limit keeps it under).

// AccessChecker checks a READ request or keyed write against the
// responder's exposed ranges (qp.Exposer): key names the range, [addr,
// addr+n) the bytes, need the right. It is called once per request, from
// inside the event loop.
type AccessChecker interface {
	Allowed(key uint32, addr, n int64, need qp.Access) bool
}

// qpRead is a QP's READ state: the requester's and the responder's.
type qpRead struct {
	access AccessChecker

	// requester
	inSQ     int    // READ work requests in the send queue
	ackMax   uint32 // the highest ACK PSN held back behind an incomplete READ
	hasAck   bool
	rereq    bool // a re-request for rereqPSN was sent at rereqAt
	rereqPSN uint32
	rereqAt  Time

	// responder: reads to answer, a ring
	jobs []readJob
	hd   int
	n    int
}

// readJob is a read being answered: the next response's PSN and the
// bytes still to send.
type readJob struct {
	psn   uint32
	left  units.Bytes
	first bool
}

func (q *QP) readState() *qpRead {
	if q.rd == nil {
		q.rd = &qpRead{}
	}
	return q.rd
}

// hasResp reports whether the QP has READ responses to send.
func (q *QP) hasResp() bool { return q.rd != nil && q.rd.n > 0 && q.state == qpReady }

// allowed checks a request against the QP's AccessChecker (none refuses).
func (q *QP) allowed(key uint32, addr, n int64, need qp.Access) bool {
	return q.rd != nil && q.rd.access != nil && q.rd.access.Allowed(key, addr, n, need)
}

// readBlocked reports whether the requester's next work request is a READ
// it may not send yet: MaxRdAtomic READs are outstanding.
func (q *QP) readBlocked() bool {
	if q.rd == nil || q.rd.inSQ == 0 || !seqLT(q.sndNxt, q.sndEnd) {
		return false
	}
	mask := len(q.sq) - 1
	if q.sq[(q.sqHd+q.cur)&mask].wr.Op != qp.OpRead {
		return false
	}
	out := 0
	for i := 0; i < q.cur; i++ {
		if q.sq[(q.sqHd+i)&mask].wr.Op == qp.OpRead {
			out++
		}
	}
	return out >= q.nic.cfg.MaxRdAtomic
}

// capAck limits an acknowledgement to e to the PSNs before the oldest
// READ not fully answered; what it holds back is applied once the READ
// completes.
func (q *QP) capAck(e uint32) uint32 {
	if q.rd == nil || q.rd.inSQ == 0 {
		return e
	}
	mask := len(q.sq) - 1
	for i := 0; i < q.sqN; i++ {
		en := &q.sq[(q.sqHd+i)&mask]
		if !seqLT(en.first, e) {
			break
		}
		if en.wr.Op != qp.OpRead {
			continue
		}
		lim := en.first
		if seqLT(lim, q.sndUna) {
			lim = q.sndUna
		}
		if !seqLT(lim, e) {
			break
		}
		if !q.rd.hasAck || seqLT(q.rd.ackMax, e) {
			q.rd.ackMax, q.rd.hasAck = e, true
		}
		return lim
	}
	return e
}

// nextReadRequest builds the READ request for send-queue entry e, from
// the cursor (a re-request asks for the rest only), and moves the cursor
// past the read's PSNs.
func (q *QP) nextReadRequest(now Time, e *sqEntry) *Packet {
	n := q.nic
	off := q.curOf
	p := n.w.NewPacket()
	p.Kind = KindReadReq
	p.Dst = q.peer
	p.QPN = q.peerQPN
	p.PSN = q.sndNxt
	p.Flow = q.flow
	p.SrcPort = q.srcPort
	p.sentAt = uint32(now / Nanosecond)
	p.flags |= flagFirst | flagLast
	if !n.noECT {
		p.flags |= flagECT
	}
	x := n.w.newExt()
	x.reth, x.rkey, x.remote, x.msgLen = true, e.wr.RKey, int64(e.wr.Remote+off), int64(e.wr.Len-off)
	p.ext = x
	size := n.header + int32(n.intHeader)
	if n.roce {
		size += RETHHeader
	}
	p.Size = uint16(size)
	end := e.first + e.npkts
	if seqLT(q.sndNxt, q.maxSent) {
		q.c.Retransmits++
	}
	if seqLT(q.maxSent, end) {
		q.maxSent = end
	}
	q.sndNxt = end
	q.cur++
	q.curOf = 0
	q.c.TxPackets++
	if q.rto.l.at == 0 && n.rto != Forever {
		q.rto.Reset(now + n.rto)
	}
	q.pace(now, 0, size)
	return p
}

// pace charges a packet of size frame bytes (pay of them payload) to the
// QP's NIC congestion controller and paces the next one at the smaller of
// its rate and the QP's rate limit.
func (q *QP) pace(now Time, pay units.Bytes, size int32) {
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
}

// onReadReq is the responder's side of a READ request at or before ePSN
// (onData sends the ones past it a sequence NAK).
func (q *QP) onReadReq(p *Packet, now Time) {
	x := p.ext
	if x == nil || !x.reth || x.msgLen <= 0 || !q.allowed(x.rkey, x.remote, x.msgLen, qp.AccessRead) {
		if p.PSN == q.ePSN {
			q.c.NAKsSent++
			q.sendAck(KindNakAccess, p)
		}
		return
	}
	mtu := units.Bytes(q.nic.mtu)
	np := uint32((units.Bytes(x.msgLen) + mtu - 1) / mtu)
	rd := q.rd
	if p.PSN == q.ePSN {
		q.ePSN += np
		q.c.RxPackets++
		q.unacked = 0 // the responses acknowledge what came before
	} else {
		// A duplicate: execute it again. Its responses replace whatever
		// was queued from its PSN on (go-back-N re-sends what follows).
		q.c.Duplicates++
		rd.truncate(p.PSN, mtu)
		if !seqLE(p.PSN+np, q.ePSN) {
			return // malformed: asks past what was received
		}
	}
	rd.push(readJob{psn: p.PSN, left: units.Bytes(x.msgLen), first: true})
	q.nic.activate(q)
}

// push queues a read to answer.
func (rd *qpRead) push(j readJob) {
	if rd.n == len(rd.jobs) {
		nj := make([]readJob, max(8, 2*len(rd.jobs)))
		for i := 0; i < rd.n; i++ {
			nj[i] = rd.jobs[(rd.hd+i)%len(rd.jobs)]
		}
		rd.jobs, rd.hd = nj, 0
	}
	rd.jobs[(rd.hd+rd.n)%len(rd.jobs)] = j
	rd.n++
}

// truncate drops the queued responses from PSN psn on (mtu bytes each
// but a read's last).
func (rd *qpRead) truncate(psn uint32, mtu units.Bytes) {
	for rd.n > 0 {
		j := &rd.jobs[(rd.hd+rd.n-1)%len(rd.jobs)]
		if seqLT(j.psn, psn) {
			if keep := units.Bytes(psn-j.psn) * mtu; keep < j.left {
				j.left = keep
			}
			return
		}
		rd.n--
	}
}

// dropResponses forgets every read being answered (a reset of the
// requester: its old incarnation's reads are not answered any more).
func (q *QP) dropResponses() {
	if q.rd != nil {
		q.rd.n, q.rd.hd = 0, 0
	}
	if q.active && !q.hasData() {
		q.nic.deactivate(q)
	}
}

// nextResponse builds the next READ response packet.
func (q *QP) nextResponse(now Time) *Packet {
	n := q.nic
	rd := q.rd
	j := &rd.jobs[rd.hd]
	pay := min(units.Bytes(n.mtu), j.left)
	size := n.header + int32(pay)
	p := n.w.NewPacket()
	p.Kind = KindReadResp
	p.Dst = q.peer
	p.QPN = q.peerQPN
	p.PSN = j.psn
	p.Payload = uint16(pay)
	p.Flow = q.flow
	p.SrcPort = q.srcPort
	p.sentAt = uint32(now / Nanosecond)
	if !n.noECT {
		p.flags |= flagECT
	}
	if j.first {
		p.flags |= flagFirst
		if n.roce {
			size += AETHHeader // RDMA READ response first (or only) carries the AETH
		}
	}
	j.first = false
	j.psn++
	j.left -= pay
	if j.left == 0 {
		p.flags |= flagLast
		if n.roce && p.flags&flagFirst == 0 {
			size += AETHHeader // ... and the last
		}
		rd.hd = (rd.hd + 1) % len(rd.jobs)
		rd.n--
	}
	p.Size = uint16(size)
	q.c.TxPackets++
	q.c.TxBytes += uint64(pay)
	q.pace(now, pay, size)
	return p
}

// onReadResp is the requester's side of a READ response.
func (q *QP) onReadResp(p *Packet, now Time) {
	if q.state != qpReady || q.peer < 0 {
		return
	}
	n := q.nic
	if p.flags&flagCE != 0 {
		// The requester is the notification point for responses.
		q.c.ECNMarked++
		if !q.cnpSent || now-q.lastCNP >= n.cnpInterval {
			q.cnpSent = true
			q.lastCNP = now
			q.c.CNPsSent++
			c := q.ctrlPacket(KindCNP, CNPSize)
			c.PSN = p.PSN
			if n.w.tracer != nil {
				n.w.trace(TrCNPSent, n.name, q.peerQPN, p.PSN, 0)
			}
			n.sendCtrl(c)
		}
	}
	psn := p.PSN
	if seqLT(q.sndUna, psn) && seqLE(psn, q.maxSent) {
		// The response acknowledges every earlier PSN.
		if e := q.capAck(psn); seqLT(q.sndUna, e) && !q.advance(e, p, now) {
			return
		}
	}
	rd := q.rd
	if psn != q.sndUna {
		if seqLT(psn, q.sndUna) {
			q.c.Duplicates++
			return
		}
		// A response was lost: ask again from the first one missing.
		q.c.OOSDrops++
		if !rd.rereq || rd.rereqPSN != q.sndUna || now-rd.rereqAt >= n.nakInterval {
			rd.rereq, rd.rereqPSN, rd.rereqAt = true, q.sndUna, now
			q.goBack(q.sndUna)
		}
		return
	}
	if q.sqN == 0 {
		return
	}
	h := &q.sq[q.sqHd]
	if h.wr.Op != qp.OpRead || !seqLE(h.first, psn) || !seqLT(psn, h.first+h.npkts) {
		q.c.OOSDrops++ // not a response this QP waits for
		return
	}
	q.c.RxPackets++
	q.c.RxBytes += uint64(p.Payload)
	last := psn+1 == h.first+h.npkts
	if !q.advance(psn+1, p, now) {
		return
	}
	if rd.hasAck && seqLT(q.sndUna, rd.ackMax) {
		if e := q.capAck(rd.ackMax); seqLT(q.sndUna, e) && !q.advance(e, p, now) {
			return
		}
	}
	if !seqLT(q.sndUna, rd.ackMax) {
		rd.hasAck = false
	}
	if last && q.hasData() {
		n.activate(q) // a READ held back by MaxRdAtomic may go now
	}
}
