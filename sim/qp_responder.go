package sim

import (
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// onData is the responder: accept in order, NAK the first gap, ACK
// cumulatively, and send a CNP for CE marks at most once per CNPInterval.
func (q *QP) onData(p *Packet, now Time) {
	n := q.nic
	if p.flags&flagCE != 0 {
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
	switch {
	case p.Kind == KindReadReq && seqLE(p.PSN, q.ePSN):
		q.onReadReq(p, now) // read.go
	case p.PSN == q.ePSN && p.flags&flagFirst != 0 && p.ext != nil && p.ext.reth && p.ext.rkey != 0 &&
		!q.allowed(p.ext.rkey, p.ext.remote, p.ext.msgLen, qp.AccessWrite):
		// A keyed write outside its exposure or without the right.
		q.c.NAKsSent++
		q.sendAck(KindNakAccess, p)
	case p.PSN == q.ePSN && p.flags&flagFirst != 0 && q.region > 0 && p.ext != nil && p.ext.reth && p.ext.rkey == 0 &&
		(p.ext.remote < 0 || p.ext.remote+p.ext.msgLen > int64(q.region)):
		// RETH outside the region: NAK with a remote access error and
		// accept nothing more of the message.
		q.c.NAKsSent++
		q.sendAck(KindNakAccess, p)
	case p.PSN == q.ePSN:
		q.ePSN++
		q.c.RxPackets++
		q.c.RxBytes += uint64(p.Payload)
		q.msgBytes += units.Bytes(p.Payload)
		q.unacked++
		last := p.flags&flagLast != 0
		if last {
			nb := q.msgBytes
			q.msgBytes = 0
			if p.flags&flagImm != 0 {
				if n.w.tracer != nil {
					n.w.trace(TrRecvDone, n.name, q.qpn, p.PSN, int64(nb))
				}
				if q.handler != nil {
					q.handler.RecvImm(q, p.Imm, nb, now)
				}
			}
		}
		if last || q.unacked >= n.ackEvery || p.flags&flagAckReq != 0 {
			q.sendAck(KindAck, p)
		}
	case seqLT(p.PSN, q.ePSN):
		q.c.Duplicates++
		if !q.dupAcked || q.lastDup != q.ePSN || now-q.dupAt >= n.nakInterval {
			q.dupAcked, q.lastDup, q.dupAt = true, q.ePSN, now
			q.sendAck(KindAck, p)
		}
	default:
		q.c.OOSDrops++
		if !q.nakSent || q.lastNak != q.ePSN || now-q.nakAt >= n.nakInterval {
			q.nakSent, q.lastNak, q.nakAt = true, q.ePSN, now
			q.c.NAKsSent++
			if n.w.tracer != nil {
				n.w.trace(TrNAKSent, n.name, q.peerQPN, q.ePSN, 0)
			}
			q.sendAck(KindNak, p)
		}
	}
}

// ctrlPacket builds a control packet to the peer requester.
func (q *QP) ctrlPacket(k Kind, size uint16) *Packet {
	c := q.nic.w.NewPacket()
	c.Kind = k
	if q.nic.ackData {
		c.flags |= flagDataClass
	}
	c.Size = size
	c.Dst = q.peer
	c.QPN = q.peerQPN
	c.Flow = q.flow
	c.SrcPort = q.srcPort
	return c
}

// sendAck acknowledges everything before ePSN (ACK) or asks for go-back-N
// from ePSN (NAK), echoing the data packet's send time and INT stamps.
func (q *QP) sendAck(k Kind, data *Packet) {
	q.unacked = 0
	c := q.ctrlPacket(k, AckSize+uint16(q.nic.intHeader))
	c.PSN = q.ePSN
	c.sentAt = data.sentAt
	// the ACK takes over the data packet's telemetry
	c.ext, data.ext = data.ext, nil
	q.c.AcksSent++
	q.nic.sendCtrl(c)
}
