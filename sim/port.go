package sim

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// Sink is anything that accepts packets: the far end of a link (a NIC; a
// switch receives through its port's ingress side). Receive takes
// ownership of p.
type Sink interface {
	Receive(p *Packet)
}

// Port is the transmit side of one end of a cable: an output queue with a
// strict-priority control class (PFC frames first, then ACK/NAK/CNP) above
// the data class, a serialiser at the line rate, and the cable's
// propagation to the far end. It is an htsim Queue and Pipe in one element,
// with one pending transmit event (a Timer) and one pending delivery event.
//
// A switch port's data class is a FIFO fed by the switch; a NIC port has no
// data FIFO: when the wire is free it asks its NIC for the next packet (the
// NIC's arbiter), so data never queues inside a NIC.
//
// PFC: the data class stops starting new transmissions while the far end
// has paused it (the frame on the wire completes); control frames are never
// paused.
type Port struct {
	// Fields are grouped by cache line (a Port is allocated 64-byte
	// aligned): what queueing a frame on a busy port touches, what a
	// frame's delivery touches, what starting a transmission touches
	// besides, the data queue's accounting, ECN marking, and a switch
	// port's ingress accounting; the rest is cold.

	// line 0: transmit state
	busyUntil Time
	tx        lazy // next transmission start; the Port is its handler
	data      fifo
	nic       *NIC // owner when on a NIC
	storm     bool // watchdog recovery in progress
	paused    bool // data class paused by the far end
	pfcWant   bool // pause state we want the far end to be in
	pfcSent   bool // pause state we last sent
	ecnOn     bool
	intOn     bool

	// line 1: the wire
	w         *World
	pipe      pipe    // frames on the wire, in arrival order
	peerPort  *Port   // the far end's port when it is on a switch (its receive side)
	peerSw    *Switch // its switch
	peerNIC   *NIC    // the far end when it is a NIC
	loss      float64
	downs     uint16 // times the link went down (mod 2¹⁶): frames sent before a failure are lost
	pipeArmed bool   // a delivery event is pending
	up        bool
	lossy     bool // loss > 0

	// line 2: transmission
	ser    Serialiser
	ctrl   fifo
	sw     *Switch // owner when on a switch
	delay  Time
	remote *Port // the far end's transmit side (cold; fills the line)

	// line 3: the data queue's accounting and the per-frame counters
	// (PortCounters' hot fields; Counters merges them)
	qBytes   int64
	qLast    Time // last change of qBytes (queue-length integral)
	qIntHi   uint64
	qIntLo   uint64 // ∫ qBytes dt in byte·ps (128-bit)
	queueMax units.Bytes
	txAck    uint64 // ACK and NAK frames transmitted
	txBytes  uint64
	txData   uint64

	// line 4: ECN marking and INT stamping
	ecn         ECNConfig
	ecnSlope    float64 // Pmax/(Kmax−Kmin), per byte
	ecnExpected float64
	ecnMarks    uint64
	rate        units.BitRate

	// OnMark, if set, is called for every ECT packet leaving the port
	// with the queue it leaves behind, the RED probability and the
	// decision (for tests and traces; nil normally).
	OnMark func(q units.Bytes, p float64, marked bool)

	// line 5: a switch port's receive side: buffer accounting of the data
	// it admitted (HPCC ns-3 SwitchMmu's per-ingress counters)
	inBytes     int64 // data bytes held (reserve + shared part)
	inHdrm      int64 // headroom bytes held
	inHdrmCap   int64
	ingressMax  units.Bytes
	headroomMax units.Bytes
	index       int  // port number on the owner
	inPaused    bool // we sent XOFF upstream

	c        PortCounters // the cold counters
	name     string
	cable    *Cable
	pausedAt Time
	stormEnd Time
	wd       Timer
	wdEv     watchdogEvent
	_        [48]byte // to a whole number of cache lines (TestHotLayout)
}

// PortCounters are a port's cumulative counters. Queue figures are of the
// data class, in frame bytes.
type PortCounters struct {
	TxPackets   uint64 // frames transmitted (all kinds): TxData + TxAck + TxCNP + TxPFC
	TxBytes     uint64 // frame bytes transmitted (all kinds)
	TxData      uint64 // data frames transmitted
	TxAck       uint64 // ACK and NAK frames transmitted
	TxCNP       uint64 // CNPs transmitted
	TxPFC       uint64 // PFC frames transmitted: PauseSent + ResumeSent
	ECNMarks    uint64 // data packets marked CE here
	ECNExpected float64
	// ECNExpected is the sum of the RED marking probabilities of the ECT
	// packets that left this port: the mean of ECNMarks.
	Drops      uint64 // data packets dropped for lack of buffer (ingress headroom overflow is counted on the ingress port)
	NoRoute    uint64 // packets with no route, counted on the ingress port
	LinkDrops  uint64 // frames lost because the link was down
	LossDrops  uint64 // frames lost to random link loss
	PauseSent  uint64 // PFC XOFF frames sent (this port's ingress was congested)
	ResumeSent uint64 // PFC XON frames sent
	PauseRecv  uint64 // PFC XOFF frames received (this port's data class paused)
	ResumeRecv uint64
	PausedTime Time // total time the data class was paused
	QueueMax   units.Bytes
	// IngressMax and HeadroomMax are the most data bytes the switch held
	// from this port's ingress, and the most of them in PFC headroom.
	IngressMax  units.Bytes
	HeadroomMax units.Bytes
	// QueueMean is the time-average data queue since the start.
	QueueMean        float64
	WatchdogTriggers uint64
	WatchdogDrops    uint64 // packets dropped by watchdog recovery
}

// Name returns the port's name, "owner:pN".
func (p *Port) Name() string { return p.name }

// Index returns the port's number on its switch or NIC.
func (p *Port) Index() int { return p.index }

// Rate returns the line rate.
func (p *Port) Rate() units.BitRate { return p.rate }

// Delay returns the propagation delay to the far end.
func (p *Port) Delay() Time { return p.delay }

// Remote returns the far end's port.
func (p *Port) Remote() *Port { return p.remote }

// Cable returns the cable the port belongs to.
func (p *Port) Cable() *Cable { return p.cable }

// Switch returns the owning switch, nil for a NIC port.
func (p *Port) Switch() *Switch { return p.sw }

// NIC returns the owning NIC, nil for a switch port.
func (p *Port) NIC() *NIC { return p.nic }

// Up reports whether the link is up.
func (p *Port) Up() bool { return p.up }

// Paused reports whether the port's data class is paused by the far end.
func (p *Port) Paused() bool { return p.paused }

// Queue returns the data-class queue length in frame bytes.
func (p *Port) Queue() units.Bytes { return units.Bytes(p.qBytes) }

// SetECN enables RED marking on the port with cfg, or disables it (nil).
func (p *Port) SetECN(cfg *ECNConfig) error {
	if cfg == nil {
		p.ecnOn = false
		return nil
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	p.setECN(cfg)
	return nil
}

func (p *Port) setECN(cfg *ECNConfig) {
	p.ecn, p.ecnOn = *cfg, true
	p.ecnSlope = cfg.Pmax / float64(cfg.Kmax-cfg.Kmin)
}

// ECN returns the port's RED configuration, nil if it does not mark.
func (p *Port) ECN() *ECNConfig {
	if !p.ecnOn {
		return nil
	}
	c := p.ecn
	return &c
}

// SetLoss sets the random loss probability of frames this port sends
// (0..1; PFC frames are never lost).
func (p *Port) SetLoss(prob float64) error {
	if !(prob >= 0 && prob <= 1) {
		return fmt.Errorf("sim: Port.SetLoss(%v) on %s (valid: 0..1)", prob, p.name)
	}
	p.loss, p.lossy = prob, prob > 0
	return nil
}

// Counters returns the port's counters as of now.
func (p *Port) Counters() PortCounters {
	c := p.c
	c.TxBytes, c.TxData, c.TxAck = p.txBytes, p.txData, p.txAck
	c.TxPFC = c.PauseSent + c.ResumeSent
	c.TxPackets = c.TxData + c.TxAck + c.TxCNP + c.TxPFC
	c.ECNMarks, c.ECNExpected = p.ecnMarks, p.ecnExpected
	c.QueueMax, c.IngressMax, c.HeadroomMax = p.queueMax, p.ingressMax, p.headroomMax
	now := p.w.now
	if p.paused {
		c.PausedTime += now - p.pausedAt
	}
	hi, lo := p.qIntHi, p.qIntLo
	if now > p.qLast {
		h, l := bits.Mul64(uint64(p.qBytes), uint64(now-p.qLast))
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi += h + carry
	}
	if el := now - Start; el > 0 {
		c.QueueMean = (float64(hi)*(1<<64) + float64(lo)) / float64(el)
	}
	return c
}

// integrate accounts the queue length since the last change.
func (p *Port) integrate(now Time) {
	if now > p.qLast {
		h, l := bits.Mul64(uint64(p.qBytes), uint64(now-p.qLast))
		var carry uint64
		p.qIntLo, carry = bits.Add64(p.qIntLo, l, 0)
		p.qIntHi += h + carry
		p.qLast = now
	}
}

// pipe is a link's frames in flight, in arrival order: a FIFO linked
// through the packets themselves, each carrying its arrival time, so that
// delivering a frame touches the frame and the port and nothing else.
type pipe struct{ head, tail *Packet }

func (q *pipe) push(p *Packet) {
	if q.tail == nil {
		q.head = p
	} else {
		q.tail.next = p
	}
	q.tail = p
}

func (q *pipe) pop() *Packet {
	p := q.head
	q.head = p.next
	if q.head == nil {
		q.tail = nil
	}
	p.next = nil
	return p
}

// portPipe is a Port as the handler of its delivery events (the Port
// itself handles its transmit timer): a distinct type for the same
// pointer, so that neither event needs a field of its own.
type portPipe Port

// Fire delivers the frames at the head of the link.
func (e *portPipe) Fire(now Time) {
	p := (*Port)(e)
	p.pipeArmed = false
	for h := p.pipe.head; h != nil && h.arrive <= now; h = p.pipe.head {
		if n := h.next; n != nil {
			// the next frame's arrival time is read when the delivery
			// event is re-armed, after the far end has handled this one
			prefetch(unsafe.Pointer(n))
		}
		p.deliver(p.pipe.pop())
	}
	if h := p.pipe.head; h != nil && !p.pipeArmed {
		p.pipeArmed = true
		p.w.At(h.arrive, e)
	}
}

// deliver hands a frame that finished crossing the link to the far end,
// unless the link failed while it was on the wire or it is lost at random.
func (p *Port) deliver(pkt *Packet) {
	if !p.up || pkt.epoch != p.downs {
		p.c.LinkDrops++
		p.drop(pkt)
		return
	}
	if p.lossy && pkt.Kind != KindPFC && p.w.rng.Float64() < p.loss {
		p.c.LossDrops++
		p.drop(pkt)
		return
	}
	if p.peerSw != nil {
		p.peerSw.receive(pkt, p.peerPort)
		return
	}
	p.peerNIC.Receive(pkt)
}

// drop frees a packet lost at or after this port (its buffer accounting has
// already been released).
func (p *Port) drop(pkt *Packet) {
	if p.w.tracer != nil {
		p.w.trace(TrDrop, p.name, pkt.QPN, pkt.PSN, int64(pkt.Size))
	}
	p.w.FreePacket(pkt)
}

// enqueueData appends a data packet to a switch port's queue.
func (p *Port) enqueueData(pkt *Packet, now Time) {
	p.integrate(now)
	p.data.push(pkt)
	p.qBytes += int64(pkt.Size)
	if units.Bytes(p.qBytes) > p.queueMax {
		p.queueMax = units.Bytes(p.qBytes)
	}
	p.kick(now)
}

// enqueueCtrl appends a control packet (ACK, NAK, CNP).
func (p *Port) enqueueCtrl(pkt *Packet, now Time) {
	if pkt.flags&flagDataClass != 0 {
		// A NIC's ACK in the data class (NICConfig.AckInDataClass): a NIC
		// port has no data queue of its own (its arbiter supplies data), so
		// the queue holds these ACKs, sent before data and held by a pause.
		p.data.push(pkt)
	} else {
		p.ctrl.push(pkt)
	}
	p.kick(now)
}

// kick starts a transmission now if the wire is free, or makes sure one is
// attempted when it becomes free.
func (p *Port) kick(now Time) {
	if now >= p.busyUntil {
		p.startNext(now)
		return
	}
	p.tx.resetEarlier(p.w, p, p.busyUntil)
}

// Fire implements Handler for the transmit timer's entries.
func (p *Port) Fire(now Time) {
	if !p.tx.fire(p.w, p, now) {
		return
	}
	if now < p.busyUntil {
		if p.more() {
			p.tx.reset(p.w, p, p.busyUntil)
		}
		return
	}
	p.startNext(now)
}

// dataBlocked reports whether the data class may not start a frame.
func (p *Port) dataBlocked() bool { return p.paused && !p.storm }

// more reports whether the port has something it could send.
func (p *Port) more() bool {
	if p.pfcWant != p.pfcSent || p.ctrl.head != nil {
		return true
	}
	if p.dataBlocked() {
		return false
	}
	if p.nic != nil {
		return len(p.nic.active) > 0 || p.data.head != nil
	}
	return p.data.head != nil
}

// startNext starts transmitting the next frame, if any, at now (the wire is
// free).
func (p *Port) startNext(now Time) {
	var pkt *Packet
	switch {
	case p.pfcWant != p.pfcSent:
		pkt = p.pfcFrame()
	case p.ctrl.head != nil:
		pkt = p.ctrl.pop()
	case p.dataBlocked():
		return
	case p.nic != nil:
		if pkt = p.data.pop(); pkt == nil { // data-class ACKs go first
			pkt = p.nic.pull(now)
		}
	default:
		pkt = p.data.pop()
		if pkt != nil {
			p.dequeued(pkt, now)
		}
	}
	if pkt == nil {
		return
	}
	ser := p.ser.Time(int64(pkt.Size) + WireOverhead)
	p.busyUntil = now + ser
	p.txBytes += uint64(pkt.Size)
	switch pkt.Kind {
	case KindData, KindReadReq, KindReadResp:
		p.txData++
	case KindAck, KindNak, KindNakAccess:
		p.txAck++
	case KindCNP:
		p.c.TxCNP++
	}
	if !p.up {
		p.c.LinkDrops++
		p.drop(pkt)
	} else {
		pkt.epoch = p.downs
		at := p.busyUntil + p.delay
		pkt.arrive = at
		p.pipe.push(pkt)
		if !p.pipeArmed {
			p.pipeArmed = true
			p.w.At(at, (*portPipe)(p))
		}
	}
	if p.more() {
		p.tx.reset(p.w, p, p.busyUntil)
	}
}

// dequeued does the egress processing of a switch data packet that starts
// transmission: buffer release, ECN marking and INT stamping.
func (p *Port) dequeued(pkt *Packet, now Time) {
	p.integrate(now)
	p.qBytes -= int64(pkt.Size)
	if pkt.flags&flagAcct != 0 {
		p.sw.release(pkt)
	}
	if p.ecnOn && pkt.flags&flagECT != 0 {
		q := units.Bytes(p.qBytes)
		var prob float64 // ECNConfig.Prob with the division precomputed
		switch {
		case q <= p.ecn.Kmin:
		case q > p.ecn.Kmax:
			prob = 1
		default:
			prob = float64(q-p.ecn.Kmin) * p.ecnSlope
		}
		p.ecnExpected += prob
		marked := prob >= 1 || (prob > 0 && p.w.rng.Float64() < prob)
		if marked {
			pkt.flags |= flagCE
			p.ecnMarks++
		}
		if p.OnMark != nil {
			p.OnMark(q, prob, marked)
		}
	}
	if p.intOn && pkt.Kind == KindData {
		if pkt.ext == nil {
			pkt.ext = p.w.newExt()
		}
		x := pkt.ext
		if x.nhops >= MaxHops {
			return
		}
		x.hops[x.nhops] = qp.INTHop{
			QLen:    units.Bytes(p.qBytes),
			TxBytes: units.Bytes(p.txBytes + uint64(pkt.Size)),
			TS:      now.VTime(),
			Rate:    p.rate,
		}
		x.nhops++
	}
}

// pfcFrame builds the PFC frame that brings the far end to pfcWant.
func (p *Port) pfcFrame() *Packet {
	pkt := p.w.NewPacket()
	pkt.Kind = KindPFC
	pkt.Size = PFCSize
	pkt.Dst = -1
	p.pfcSent = p.pfcWant
	if p.pfcWant {
		pkt.flags |= flagPause
		p.c.PauseSent++
		if p.w.tracer != nil {
			p.w.trace(TrPauseSent, p.name, 0, 0, 0)
		}
	} else {
		p.c.ResumeSent++
		if p.w.tracer != nil {
			p.w.trace(TrResumeSent, p.name, 0, 0, 0)
		}
	}
	return pkt
}

// sendPFC asks the far end to pause (true) or resume (false) its data class.
// The frame goes out ahead of everything else at the next frame boundary;
// a newer request that arrives before the frame is sent replaces it.
func (p *Port) sendPFC(pause bool, now Time) {
	p.pfcWant = pause
	if p.pfcWant != p.pfcSent {
		p.kick(now)
	}
}

// onPFC applies a PFC frame received from the far end.
func (p *Port) onPFC(pkt *Packet, now Time) {
	if pkt.flags&flagPause != 0 {
		p.c.PauseRecv++
		if !p.paused {
			p.paused = true
			p.pausedAt = now
			if p.wd.w != nil && !p.storm {
				p.wd.Reset(now + p.wdThreshold())
			}
		}
		return
	}
	p.c.ResumeRecv++
	p.unpause(now)
}

// unpause ends a pause and restarts the data class.
func (p *Port) unpause(now Time) {
	if !p.paused {
		return
	}
	p.paused = false
	p.c.PausedTime += now - p.pausedAt
	if p.wd.w != nil && !p.storm {
		p.wd.Stop()
	}
	p.kick(now)
}
