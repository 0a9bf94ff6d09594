package sim

import (
	"fmt"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

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
