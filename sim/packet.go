package sim

import (
	"strconv"

	"github.com/mptx-dev/mptx/qp"
)

// RoCEv2 frame layout, in bytes. Every frame the simulator moves is sized
// from these constants; serialisation adds WireOverhead on top of the frame.
//
//	data packet:  Eth 14 | IPv4 20 | UDP 8 | BTH 12 | [RETH 16] | payload | [ImmDt 4] | ICRC 4 | FCS 4
//	ACK / NAK:    Eth 14 | IPv4 20 | UDP 8 | BTH 12 | AETH 4 | ICRC 4 | FCS 4           = 66
//	CNP:          Eth 14 | IPv4 20 | UDP 8 | BTH 12 | reserved 16 | ICRC 4 | FCS 4      = 78
//	PFC frame:    MAC control (opcode 0x0101), padded to the 64-byte minimum
//	on the wire:  + preamble and SFD 8 + inter-frame gap 12
//
// The RETH (RDMA extended transport header) rides on the first packet of a
// WRITE, the ImmDt on the last packet of a WRITE WITH IMM (IBTA Vol. 1
// §9.3 and RoCEv2 Annex A17). No VLAN tag is counted: PFC priority is taken
// from DSCP, as on current RoCE deployments. A middle data packet with the
// default 4096-byte payload is therefore 4158 bytes long and occupies 4178
// bytes of wire time, a goodput efficiency of 4096/4178 = 98.04 %.
const (
	EthHeader    = 14
	EthFCS       = 4
	IPv4Header   = 20
	UDPHeader    = 8
	BTHHeader    = 12
	RETHHeader   = 16
	ImmDtHeader  = 4
	AETHHeader   = 4
	ICRCBytes    = 4
	CNPReserved  = 16
	PreambleSFD  = 8
	IFG          = 12
	WireOverhead = PreambleSFD + IFG // bytes of wire time per frame beyond the frame itself

	// DataHeaders is the per-packet overhead of every data packet.
	DataHeaders = EthHeader + IPv4Header + UDPHeader + BTHHeader + ICRCBytes + EthFCS // 62
	// AckSize is the frame size of an ACK or NAK.
	AckSize = DataHeaders + AETHHeader // 66
	// CNPSize is the frame size of a congestion notification packet.
	CNPSize = DataHeaders + CNPReserved // 78
	// PFCSize is the frame size of a PFC pause frame.
	PFCSize = 64

	// RoCEv2Port is the UDP destination port of RoCEv2.
	RoCEv2Port = 4791
	// DefaultMTU is the default payload bytes per data packet (the 4096
	// RoCE path MTU).
	DefaultMTU = 4096
)

// Kind is what a packet is. The simulator models RoCEv2 and PFC only.
type Kind uint8

// Packet kinds.
const (
	KindData      Kind = iota + 1 // an RDMA WRITE / WRITE WITH IMM segment
	KindAck                       // cumulative acknowledgement (AETH syndrome ACK)
	KindNak                       // NAK, PSN sequence error: go back to PSN
	KindNakAccess                 // NAK, remote access error: the write fell outside the region
	KindCNP                       // RoCEv2 congestion notification packet
	KindPFC                       // 802.1Qbb priority flow control frame
	KindReadReq                   // an RDMA READ request (RETH, no payload), requester to responder
	KindReadResp                  // an RDMA READ response segment, responder to requester
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case KindData:
		return "data"
	case KindAck:
		return "ack"
	case KindNak:
		return "nak"
	case KindNakAccess:
		return "nak-access"
	case KindCNP:
		return "cnp"
	case KindPFC:
		return "pfc"
	case KindReadReq:
		return "read-req"
	case KindReadResp:
		return "read-resp"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Packet flags.
const (
	flagECT   uint8 = 1 << iota // ECN-capable transport (RoCEv2 sets ECT(0))
	flagCE                      // congestion experienced
	flagFirst                   // first packet of a message (carries RETH)
	flagLast                    // last packet of a message
	flagImm                     // carries ImmDt (last packet of WRITE WITH IMM)
	flagPause                   // PFC frame: XOFF (set) or XON (clear); see flagDataClass
	flagAcct                    // counted in a switch's ingress buffer accounting
	flagFree                    // in the pool
)

// flagAckReq is the BTH AckReq bit on a data packet: the responder
// acknowledges it at once (IBTA Vol. 1 §9.7.5.1.3). It shares flagPause's
// bit, which only PFC frames use.
const flagAckReq = flagPause

// flagDataClass marks an ACK, NAK or CNP that travels in the data class
// (NICConfig.AckInDataClass). It shares flagPause's bit, which only PFC
// frames use.
const flagDataClass = flagPause

// dataClass reports whether the packet travels in the data class: data,
// and control packets sent with NICConfig.AckInDataClass.
func (p *Packet) dataClass() bool {
	return p.isData() || (p.Kind != KindPFC && p.flags&flagDataClass != 0)
}

// isData reports whether the packet is a data packet: a WRITE segment, a
// READ request or a READ response segment.
func (p *Packet) isData() bool {
	return p.Kind == KindData || p.Kind == KindReadReq || p.Kind == KindReadResp
}

// MaxHops is the number of in-band telemetry stamps a packet can carry.
const MaxHops = 8

// Packet is one frame in flight: 64 bytes, exactly one cache line (the
// pool allocates packets in line-aligned blocks, so touching a packet costs
// one line). Packets come from the world's pool (World.NewPacket) and are
// owned by exactly one element at a time: the queue or link holding it, or
// the element processing it, which either hands it on or frees it. What
// few packets carry beyond the basic headers — INT stamps and the RETH
// fields a responder with a bounded region checks — lives out of line in a
// pooled extension.
type Packet struct {
	next    *Packet // intrusive FIFO link (queues, links and the pool)
	Flow    uint64  // hash of the 5-tuple (ECMP key)
	ext     *pktExt // INT stamps, RETH; nil for most packets
	arrive  Time    // on a link: when it reaches the far end
	Dst     int32   // destination endpoint (NIC) id
	QPN     uint32  // destination QP number
	PSN     uint32  // data: the packet's PSN; ACK/NAK: the responder's expected PSN
	Imm     uint32  // immediate data (flagImm)
	sentAt  uint32  // data: NIC send time, ns mod 2³²; ACK/NAK: its echo
	Size    uint16  // frame bytes (headers + payload), without preamble and IFG
	Payload uint16  // data payload bytes
	in      uint16  // ingress port index at the current switch
	SrcPort uint16  // UDP source port (ECMP entropy)
	epoch   uint16  // the current link's down-count when transmitted
	Kind    Kind
	flags   uint8
}

// pktExt is a packet's out-of-line part.
type pktExt struct {
	hops   intHops
	nhops  uint8
	reth   bool   // remote and msgLen are set
	rkey   uint32 // RETH: the key the request names (0: the responder's region)
	remote int64  // RETH: offset in the responder's region, or an address in rkey's space
	msgLen int64  // RETH: the message's length
}

// intHops is a packet's telemetry.
type intHops [MaxHops]qp.INTHop

// INT returns the packet's in-band telemetry stamps (valid while the
// packet is).
func (p *Packet) INT() []qp.INTHop {
	if p.ext == nil {
		return nil
	}
	return p.ext.hops[:p.ext.nhops]
}

// CE reports whether the packet is marked congestion experienced.
func (p *Packet) CE() bool { return p.flags&flagCE != 0 }

// ECT reports whether the packet is ECN-capable.
func (p *Packet) ECT() bool { return p.flags&flagECT != 0 }

// Last reports whether the packet is the last of its message.
func (p *Packet) Last() bool { return p.flags&flagLast != 0 }

// control reports whether the packet travels in the strict-priority control
// class (everything but data).
func (p *Packet) control() bool { return !p.isData() }

// fifo is an intrusive singly linked FIFO of packets.
type fifo struct{ head, tail *Packet }

func (q *fifo) push(p *Packet) {
	if q.tail == nil {
		q.head = p
	} else {
		q.tail.next = p
	}
	q.tail = p
}

func (q *fifo) pop() *Packet {
	p := q.head
	if p == nil {
		return nil
	}
	q.head = p.next
	if q.head == nil {
		q.tail = nil
	}
	p.next = nil
	return p
}

// mix64 is the splitmix64 finaliser: a fast bijective mixer with full
// avalanche, used for ECMP hashing.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// FlowHash hashes a RoCEv2 5-tuple (source and destination endpoint as the
// IP addresses, UDP, source port, destination port 4791). Switches mix it
// with their own seed to pick an ECMP member.
func FlowHash(src, dst int32, srcPort uint16) uint64 {
	h := mix64(uint64(uint32(src))<<32 | uint64(uint32(dst)))
	return mix64(h ^ (uint64(srcPort)<<24 | RoCEv2Port<<8 | 17))
}
