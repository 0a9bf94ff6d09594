package sim

import (
	"errors"

	"github.com/mptx-dev/mptx/units"
)

// Errors returned by QP.PostSend.
var (
	// ErrQPError: the QP is in the error state (retry exhaustion); the
	// driver treats the path as down.
	ErrQPError = errors.New("sim: QP in error state")
	// ErrBadWR: the work request is malformed (opcode or length).
	ErrBadWR = errors.New("sim: bad work request")
	// ErrNotConnected: the QP has no peer yet (QP.Connect).
	ErrNotConnected = errors.New("sim: QP not connected")
)

// MaxMessage is the largest RDMA message (IBA: 2^31 bytes).
const MaxMessage = units.Bytes(1) << 31

// NIC is a RoCEv2 NIC port: it owns RC queue pairs, segments their work
// requests into MTU packets, arbitrates among them at line rate (packet by
// packet round robin over QPs that have data, are within their rate limit
// and within their NIC congestion controller's window), acknowledges what
// it receives, generates CNPs as the DCQCN notification point, and runs
// go-back-N loss recovery with the RC retry timer.
//
// A NIC never queues data: its port pulls the next packet from the arbiter
// when the wire is free, so a QP's packets are created at transmission
// time. Received data is consumed at line rate (the NIC's receive side never
// backpressures; Deviation: NICs that send PFC are not modelled).
type NIC struct {
	// Fields by cache line (a NIC is 256 bytes, a size class whose slots
	// the Go allocator keeps line-aligned; TestHotLayout): the arbiter
	// and receive path, then the per-packet configuration (copies of cfg
	// fields); the rest is cold.

	// line 0
	w      *World
	port   *Port
	qps    []*QP
	active []activeQP // QPs with packets to send, in arbitration order

	// line 1
	rr          int
	rto         Time
	ackEvery    int  // cfg.AckEvery
	cnpInterval Time // cfg.CNPInterval
	nakInterval Time // cfg.NAKInterval
	intHeader   units.Bytes
	id          int32
	mtu         int32
	header      int32 // data packet header bytes (cfg.Header, or DataHeaders)
	noECT       bool
	roce        bool // RoCEv2 framing: RETH and ImmDt on top of header
	ackData     bool // cfg.AckInDataClass

	net  *Network
	name string
	host *Host
	rail int
	cfg  *NICConfig // shared by the host's NICs
	_    [80]byte   // to 256 bytes (TestHotLayout)
}

// QPNs are unique in a network: the NIC's id in the high bits, then
// qpnBase plus the QP's index on the NIC (0 and 1 are IB's SMI and GSI; a
// real QPN has 24 bits, Deviation: these use up to 32).
const (
	qpnBase  = 0x100
	qpnShift = 20
	qpnMask  = 1<<qpnShift - 1
)

// ID returns the NIC's endpoint id (its address in route tables).
func (n *NIC) ID() int { return int(n.id) }

// Name returns the NIC's name, "host/nicR".
func (n *NIC) Name() string { return n.name }

// Host returns the host the NIC belongs to.
func (n *NIC) Host() *Host { return n.host }

// Rail returns the NIC's index on its host.
func (n *NIC) Rail() int { return n.rail }

// Port returns the NIC's port.
func (n *NIC) Port() *Port { return n.port }

// Config returns the NIC's configuration with defaults applied.
func (n *NIC) Config() NICConfig { return *n.cfg }

// QPs returns the NIC's queue pairs, in creation order.
func (n *NIC) QPs() []*QP { return n.qps }

// Receive implements Sink: a frame arrived from the NIC's link.
func (n *NIC) Receive(p *Packet) {
	now := n.w.now
	switch p.Kind {
	case KindPFC:
		n.port.onPFC(p, now)
	case KindData, KindAck, KindNak, KindNakAccess, KindCNP, KindReadReq, KindReadResp:
		i := int(p.QPN&qpnMask) - qpnBase
		if p.QPN>>qpnShift != uint32(n.id) || i < 0 || i >= len(n.qps) {
			n.port.c.NoRoute++
			break
		}
		q := n.qps[i]
		switch p.Kind {
		case KindData, KindReadReq:
			q.onData(p, now)
		case KindReadResp:
			q.onReadResp(p, now)
		case KindCNP:
			q.onCNP(now)
		default:
			q.onAck(p, now)
		}
	}
	n.w.FreePacket(p)
}

// activeQP is an arbiter entry. It caches what the arbiter checks for
// every packet (the pacing deadline and the congestion window), so that
// scanning the QPs that cannot send touches only this array.
type activeQP struct {
	q      *QP
	nextTx Time        // copy of q.nextTx
	win    units.Bytes // the NIC CC's window, units.MaxBytes if none
}

// activate puts q in the arbiter and starts the port if it is idle.
func (n *NIC) activate(q *QP) {
	if !q.active {
		q.active = true
		q.actIdx = len(n.active)
		n.active = append(n.active, activeQP{q: q, nextTx: q.nextTx, win: q.window()})
	}
	n.port.kick(n.w.now)
}

// deactivate removes q from the arbiter, keeping the order of the others.
func (n *NIC) deactivate(q *QP) {
	if !q.active {
		return
	}
	q.active = false
	i := q.actIdx
	copy(n.active[i:], n.active[i+1:])
	n.active[len(n.active)-1] = activeQP{}
	n.active = n.active[:len(n.active)-1]
	for j := i; j < len(n.active); j++ {
		n.active[j].q.actIdx = j
	}
	if n.rr > i {
		n.rr--
	}
	if n.rr >= len(n.active) {
		n.rr = 0
	}
}

// pull is the line-rate arbiter: it returns the next data packet to put on
// the wire, or nil, in which case it has armed the port's timer for when a
// rate-limited QP may send again.
func (n *NIC) pull(now Time) *Packet {
	na := len(n.active)
	var wake Time
	for i := 0; i < na; i++ {
		idx := n.rr + i
		if idx >= na {
			idx -= na
		}
		a := &n.active[idx]
		if a.nextTx > now {
			if wake == 0 || a.nextTx < wake {
				wake = a.nextTx
			}
			continue
		}
		q := a.q
		if !q.hasResp() && (a.win != units.MaxBytes && q.inFlight() >= a.win || q.readBlocked()) {
			continue // (READ responses go out whatever the requester's window)
		}
		n.rr = idx + 1
		if n.rr >= na {
			n.rr = 0
		}
		p := q.nextPacket(now)
		if !q.hasData() {
			n.deactivate(q)
		} else {
			a.nextTx = q.nextTx
		}
		return p
	}
	if wake != 0 {
		n.port.tx.resetEarlier(n.w, n.port, wake)
	}
	return nil
}

// sendCtrl queues a control packet on the NIC's port.
func (n *NIC) sendCtrl(p *Packet) { n.port.enqueueCtrl(p, n.w.now) }
