package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/qp"
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

// QPHandler receives a QP's completions, synchronously from inside the
// event loop. hops (INT stamps of the acknowledgement that completed the
// work request) is valid only during the call.
type QPHandler interface {
	SendDone(q *QP, wr *qp.SendWR, st qp.Status, at Time, hops []qp.INTHop)
	RecvImm(q *QP, imm uint32, n units.Bytes, at Time)
}

// QPConfig configures a queue pair.
type QPConfig struct {
	// SrcPort is the RoCEv2 UDP source port (ECMP entropy); 0 draws one
	// from the world's RNG in 49152..65535.
	SrcPort uint16
	// RateLimit is the QP's hardware rate limit
	// (ibv_modify_qp_rate_limit(3)); 0 means none.
	RateLimit units.BitRate
	// Handler receives completions; nil discards them.
	Handler QPHandler
	// Path is an opaque index reported back through the handler's QP.Path.
	Path int
	// Region is the size of the memory region the QP's peer may write as
	// a responder; a write outside it is NAKed with a remote access error
	// and fails the requester's QP (IBV_WC_REM_ACCESS_ERR). 0 means
	// unlimited.
	Region units.Bytes
	// Access, if set, checks the READ requests and keyed writes (RKey
	// set) the QP's peer sends it as a responder; a request it refuses is
	// NAKed with a remote access error. nil refuses them all.
	Access AccessChecker
}

// QPCounters are a QP's cumulative counters: the requester's and the
// responder's halves.
type QPCounters struct {
	// requester
	TxPackets    uint64 // data packets sent, including retransmissions
	TxBytes      uint64 // payload bytes sent, including retransmissions
	Retransmits  uint64 // data packets sent again (go-back-N)
	AckedBytes   uint64 // payload bytes of completed work requests
	WRsDone      uint64 // work requests completed successfully
	NAKsReceived uint64
	Timeouts     uint64 // retry-timer expirations
	CNPsReceived uint64
	// responder
	RxPackets  uint64 // data packets accepted in order
	RxBytes    uint64 // payload bytes accepted in order
	ECNMarked  uint64 // CE-marked data packets received
	CNPsSent   uint64
	NAKsSent   uint64
	AcksSent   uint64
	OOSDrops   uint64 // out-of-sequence packets discarded
	Duplicates uint64 // already-received packets discarded
}

// QP is a reliable-connected queue pair. As a requester it holds a send
// queue of work requests and sends them as PSN-numbered packets; as a
// responder it accepts packets in PSN order only (go-back-N: anything else
// is discarded, and the first gap is NAKed), acknowledges cumulatively and
// reports WRITE WITH IMM arrivals.
//
// PSNs are unwrapped 32-bit counters (Deviation: IB wraps at 2^24; the
// simulator never runs 2^32 packets on one QP).
type QP struct {
	// Fields by cache line (QPs come from line-aligned slabs; a QP is a
	// whole number of lines, TestHotLayout): sending, pacing and the
	// peer, congestion control and the retry timer, the CC timer, the
	// counters (requester's line, responder's line), the responder; the
	// rest is cold.

	// line 0: the send cursor
	nic     *NIC
	sq      []sqEntry   // send queue: a ring of posted, not yet completed work requests
	sqHd    int         // its oldest entry
	cur     int         // index (from sqHd) of the WR holding sndNxt
	curOf   units.Bytes // byte offset of sndNxt in that WR
	sndNxt  uint32      // next PSN to send
	maxSent uint32      // highest PSN sent + 1

	// line 1: window, pacing and the peer
	sndUna     uint32 // oldest unacknowledged PSN
	sndEnd     uint32 // PSN after the last posted packet
	peer       int32  // remote endpoint id, -1 until connected
	peerQPN    uint32
	flow       uint64
	srcPort    uint16
	state      uint8 // qpReady or qpError
	active     bool
	peerRegion units.Bytes // the peer responder's region (0: unbounded)
	rateLimit  units.BitRate
	nextTx     Time // earliest start of the next packet (pacing)
	lineRate   units.BitRate

	// line 2
	cc  cc.Algorithm
	rto Timer

	// line 3
	ccTimer Timer
	actIdx  int // index in nic.active while active
	ccEv    ccEvent

	// lines 4 and 5
	c QPCounters

	// line 6: responder
	ePSN     uint32
	lastNak  uint32
	msgBytes units.Bytes
	unacked  int
	lastCNP  Time
	nakAt    Time
	dupAt    Time
	region   units.Bytes
	lastDup  uint32
	cnpSent  bool
	nakSent  bool
	dupAcked bool

	handler QPHandler
	sqN     int // posted work requests not yet completed
	retries int
	qpn     uint32
	path    int
	hopsBuf [MaxHops]qp.INTHop
	doneWR  qp.SendWR // the work request being completed

	// Pacing memory, so that a rate change re-paces the next packet as
	// HPCC ns-3's RdmaHw::ChangeRate does: the last packet's start and its
	// wire bytes, and the NIC CC rate they were paced at.
	paceFrom Time
	paceWire units.Bytes
	ccRate   units.BitRate
	sqMax    int32    // the send queue's depth (MaxSendWR rounded up to a power of two)
	rd       *qpRead  // RDMA READ state (read.go), nil until the QP reads or is read
	_        [48]byte // to a whole number of lines
}

// sqInitial is the send queue's starting capacity; it doubles as work
// requests are posted, up to the configured depth, so that thousands of
// mostly idle QPs do not each hold a full-depth queue.
const sqInitial = 16

const (
	qpReady uint8 = iota
	qpError
)

type sqEntry struct {
	wr    qp.SendWR
	first uint32 // PSN of the first packet
	npkts uint32
}

// ccEvent fires the NIC congestion controller's timer.
type ccEvent struct{ q *QP }

func (e *ccEvent) Fire(now Time) {
	q := e.q
	if q.cc == nil || q.state != qpReady {
		return
	}
	q.cc.OnTimer(now.VTime())
	q.armCC(now)
}

// NewQP creates a queue pair on the NIC. It must be connected to a peer QP
// (Connect) before it sends.
func (n *NIC) NewQP(cfg QPConfig) (*QP, error) {
	if n.port == nil {
		return nil, fmt.Errorf("sim: NIC %s has no link yet (Network.Link it first)", n.name)
	}
	if cfg.RateLimit < 0 {
		return nil, fmt.Errorf("sim: QPConfig.RateLimit = %v (valid: >= 0)", cfg.RateLimit)
	}
	if cfg.Region < 0 {
		return nil, fmt.Errorf("sim: QPConfig.Region = %v (valid: >= 0)", cfg.Region)
	}
	if len(n.qps) >= qpnMask-qpnBase {
		return nil, fmt.Errorf("sim: NIC %s has %d QPs (valid: fewer than %d)", n.name, len(n.qps), qpnMask-qpnBase)
	}
	depth := 1
	for depth < n.cfg.MaxSendWR {
		depth <<= 1
	}
	q := n.net.newQP()
	*q = QP{
		nic:       n,
		qpn:       uint32(n.id)<<qpnShift | uint32(qpnBase+len(n.qps)),
		path:      cfg.Path,
		peer:      -1,
		srcPort:   cfg.SrcPort,
		handler:   cfg.Handler,
		sq:        make([]sqEntry, min(depth, sqInitial)),
		sqMax:     int32(depth),
		rateLimit: cfg.RateLimit,
		lineRate:  n.port.rate,
		region:    cfg.Region,
	}
	if cfg.Access != nil {
		q.rd = &qpRead{access: cfg.Access}
	}
	if q.srcPort == 0 {
		q.srcPort = uint16(49152 + n.w.rng.IntN(16384))
	}
	q.rto.Init(n.w, q)
	q.ccEv.q = q
	q.ccTimer.Init(n.w, &q.ccEv)
	n.qps = append(n.qps, q)
	return q, nil
}

// Connect connects q to peer (both directions: each becomes the other's
// responder and requester), like the INIT→RTR→RTS transitions of
// ibv_modify_qp(3). NIC congestion control, if configured, is created here
// from the path's line rate and base RTT.
func (q *QP) Connect(peer *QP) error {
	for _, x := range [2]*QP{q, peer} {
		if x.peer >= 0 {
			return fmt.Errorf("sim: QP %s/%#x is already connected", x.nic.name, x.qpn)
		}
	}
	q.link(peer)
	peer.link(q)
	if err := q.initCC(); err != nil {
		return err
	}
	return peer.initCC()
}

func (q *QP) link(peer *QP) {
	q.peer = peer.nic.id
	q.peerRegion = peer.region
	q.peerQPN = peer.qpn
	q.flow = FlowHash(q.nic.id, q.peer, q.srcPort)
}

func (q *QP) initCC() error {
	if q.nic.cfg.RateControl == nil {
		return nil
	}
	rtt, hops := q.nic.net.baseRTT(q.nic, q.nic.net.NICs[q.peer], q.flow, int(q.nic.mtu))
	a, err := q.nic.cfg.RateControl(cc.PathInfo{
		LineRate: q.lineRate,
		BaseRTT:  rtt.Duration(),
		MTU:      units.Bytes(q.nic.mtu),
		Hops:     max(hops, 1),
	})
	if err != nil {
		return fmt.Errorf("sim: NIC %s rate control for QP %#x: %w", q.nic.name, q.qpn, err)
	}
	q.cc = a
	q.armCC(q.nic.w.now)
	return nil
}

// QPN returns the queue pair number.
func (q *QP) QPN() uint32 { return q.qpn }

// Path returns the opaque path index given at creation.
func (q *QP) Path() int { return q.path }

// NIC returns the QP's NIC.
func (q *QP) NIC() *NIC { return q.nic }

// SrcPort returns the QP's UDP source port.
func (q *QP) SrcPort() uint16 { return q.srcPort }

// Flow returns the hash of the QP's 5-tuple towards its peer.
func (q *QP) Flow() uint64 { return q.flow }

// Peer returns the remote endpoint id, -1 if not connected.
func (q *QP) Peer() int { return int(q.peer) }

// Err reports whether the QP is in the error state.
func (q *QP) Err() bool { return q.state == qpError }

// Counters returns the QP's counters.
func (q *QP) Counters() QPCounters { return q.c }

// CC returns the NIC congestion controller, nil if none.
func (q *QP) CC() cc.Algorithm { return q.cc }

// Outstanding returns the number of posted work requests not yet completed.
func (q *QP) Outstanding() int { return q.sqN }

// SendQueueDepth returns the send queue capacity.
func (q *QP) SendQueueDepth() int { return int(q.sqMax) }

// growSQ doubles the send queue's capacity (up to its depth), keeping the
// entries in order from index 0.
func (q *QP) growSQ() {
	n := min(2*len(q.sq), int(q.sqMax))
	sq := make([]sqEntry, n)
	for i := 0; i < q.sqN; i++ {
		sq[i] = q.sq[(q.sqHd+i)&(len(q.sq)-1)]
	}
	q.sq, q.sqHd = sq, 0
}

// SetRateLimit sets the QP's hardware rate limit (0: none), as
// ibv_modify_qp_rate_limit(3) does; it applies from the next packet.
func (q *QP) SetRateLimit(r units.BitRate) error {
	if r < 0 {
		return fmt.Errorf("sim: rate limit %v (valid: >= 0)", r)
	}
	q.rateLimit = r
	if q.nextTx > q.nic.w.now {
		q.nextTx = q.nic.w.now
		if q.active {
			q.nic.active[q.actIdx].nextTx = q.nextTx
			q.nic.port.kick(q.nic.w.now)
		}
	}
	return nil
}

// RateLimit returns the hardware rate limit (0: none).
func (q *QP) RateLimit() units.BitRate { return q.rateLimit }

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

// fail moves the QP to the error state: the oldest outstanding work request
// completes with st, every other with StatusFlushed (ibv_poll_cq(3)).
func (q *QP) fail(st qp.Status, now Time) {
	q.state = qpError
	q.rto.Stop()
	q.ccTimer.Stop()
	q.nic.deactivate(q)
	if q.nic.w.tracer != nil {
		q.nic.w.trace(TrQPError, q.nic.name, q.qpn, q.sndUna, int64(q.sqN))
	}
	for q.sqN > 0 {
		q.doneWR = q.sq[q.sqHd].wr
		q.sqHd = (q.sqHd + 1) & (len(q.sq) - 1)
		q.sqN--
		if q.handler != nil {
			q.handler.SendDone(q, &q.doneWR, st, now, nil)
		}
		st = qp.StatusFlushed
	}
	q.cur, q.curOf = 0, 0
	if q.rd != nil {
		q.rd.inSQ = 0
	}
}

// Reset fences a QP and brings it back to ready together with its connected
// peer, as a verbs driver does with ibv_modify_qp(3) to the error state and
// then RESET → INIT → RTR → RTS on both ends. A QP not yet in the error
// state (a stalled one) is failed first, which flushes its outstanding
// work requests (StatusFlushed); one in the error state was flushed
// already. Both ends restart at a fresh PSN a quarter of the sequence space
// past the old incarnation's, so packets of the old one still in the
// fabric are taken as duplicates and deliver nothing. The QP's rate control
// keeps its state. Deviation: both ends change state at once, where a real
// driver takes a control-channel round trip.
func (q *QP) Reset(peer *QP) error {
	if peer == nil || q.peer != peer.nic.id || q.peerQPN != peer.qpn {
		return fmt.Errorf("sim: Reset of QP %s/%#x: the peer given is not its connected peer", q.nic.name, q.qpn)
	}
	now := q.nic.w.now
	if q.state != qpError {
		// A fence of a working QP (a stall): flush its outstanding work
		// first, as ibv_modify_qp(3) to the error state does.
		q.fail(qp.StatusFlushed, now)
	}
	psn := q.sndEnd + 1<<30
	q.sndUna, q.sndNxt, q.sndEnd, q.maxSent = psn, psn, psn, psn
	q.retries = 0
	q.cur, q.curOf = 0, 0
	q.nextTx = 0
	q.state = qpReady
	if q.cc != nil {
		q.armCC(now)
	}
	peer.ePSN = psn
	peer.msgBytes = 0
	peer.unacked = 0
	peer.nakSent, peer.dupAcked = false, false
	peer.dropResponses() // the old incarnation's READs are answered no more
	if q.nic.w.tracer != nil {
		q.nic.w.trace(TrQPReset, q.nic.name, q.qpn, psn, 0)
	}
	return nil
}

// Close moves the QP to the error state, flushing outstanding work
// requests.
func (q *QP) Close() {
	if q.state != qpError {
		q.fail(qp.StatusFlushed, q.nic.w.now)
	}
}

// onCNP handles a congestion notification for this requester.
func (q *QP) onCNP(now Time) {
	q.c.CNPsReceived++
	if q.cc != nil && q.state == qpReady {
		q.cc.OnCNP(cc.CNP{Now: now.VTime(), Count: 1})
		q.armCC(now)
	}
}

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
