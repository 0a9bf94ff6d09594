package sim

import (
	"slices"

	"github.com/mptx-dev/mptx/units"
)

// Switch is an output-queued switch with a shared buffer. Each port has a
// strict-priority control class (PFC, ACK/NAK, CNP) and one data class that
// is lossless (PFC) or lossy (drop-tail), RED/ECN marking at egress and
// optional INT stamping. Forwarding is by destination: a table maps each
// endpoint to a group of equal-cost egress ports, and the member is chosen
// by hashing the packet's 5-tuple (including the UDP source port) with the
// switch's own seed, or at random per packet in spray mode.
//
// Buffer accounting follows the HPCC ns-3 SwitchMmu: bytes are charged to
// the ingress port when a data packet is admitted and released when it
// starts transmission at the egress. Control packets are not charged
// (Deviation: they are few and small; real switches give them a separate
// reserved pool).
type Switch struct {
	// Fields by cache line (a Switch is 384 bytes, a size class whose
	// slots the Go allocator keeps line-aligned; TestHotLayout):
	// forwarding, then buffer accounting; the rest is cold.

	// line 0: forwarding
	w *World
	// broute is route compressed by blocks of 1<<bshift consecutive
	// destinations: a block's entry is the route every destination in it
	// shares, or viaRoute when they differ (see compressRoutes).
	broute []uint32
	ports  []*Port
	lossy  bool  // cfg.Lossy
	spray  bool  // cfg.Spray
	bshift uint8 // log2 of broute's block

	// line 1: ECMP hashing and the shared buffer
	seed       uint64
	gports     []int32
	sharedCap  int64
	sharedUsed int64
	hdrmUsed   int64
	reserve    int64

	// line 2: thresholds
	xoff, xon int64 // static thresholds (0 = dynamic)
	resumeOff int64
	alphaNum  int64 // dynamic threshold = free·alphaNum >> 16
	egressLim int64
	egressA   int64 // lossy dynamic threshold = free·egressA >> 16
	built     bool

	// route maps a destination endpoint to its egress: n<<24 | x, where n
	// is the number of equal-cost ports and x the port itself (n = 1) or
	// the group's offset in gports (n > 1); 0 means unreachable. The
	// forwarding path reads broute and comes here only for blocks whose
	// destinations take different routes.
	route  []uint32
	net    *Network
	id     int
	name   string
	groups []group
	cfg    SwitchConfig
	last   uint32   // the group addGroup returned last (route building)
	_      [12]byte // to 384 bytes
}

type group struct{ off, n int32 }

// noRoute marks an unreachable destination in a route table.
const noRoute = 0

// viaRoute marks a block of Switch.broute whose destinations do not share
// one route: look the destination up in Switch.route. No route entry has
// it (a group of no ports at offset 2²⁴−1).
const viaRoute = 0xffffff

// maxBlockShift bounds the block of Switch.broute: 64 destinations.
const maxBlockShift = 6

// compressRoutes builds broute from route for blocks of 1<<shift
// destinations. A block is uniform when every destination in it has the
// same entry; the last block, when partial, is never uniform (Switch.route
// then bounds the destination).
func (s *Switch) compressRoutes(shift uint8) {
	blk := 1 << shift
	nb := (len(s.route) + blk - 1) / blk
	if cap(s.broute) >= nb {
		s.broute = s.broute[:nb]
	} else {
		s.broute = make([]uint32, nb)
	}
	s.bshift = shift
	for b := range s.broute {
		s.broute[b] = s.blockRoute(b)
	}
}

// blockRoute returns block b's broute entry.
func (s *Switch) blockRoute(b int) uint32 {
	blk := 1 << s.bshift
	lo := b * blk
	if lo+blk > len(s.route) {
		return viaRoute
	}
	r := s.route[lo]
	for _, e := range s.route[lo+1 : lo+blk] {
		if e != r {
			return viaRoute
		}
	}
	return r
}

// blockShift picks the block size of the switches' compressed route
// tables: the largest (up to 64 destinations) for which at least 7/8 of
// the blocks of all switches are uniform, so that the tables the
// forwarding path reads are as small as possible and rarely defer to the
// full ones. A fat tree's or leaf-spine's hosts, numbered leaf by leaf,
// give blocks of a leaf's hosts.
func blockShift(sws []*Switch, ndst int) uint8 {
	for sh := uint8(maxBlockShift); sh > 0; sh-- {
		blk := 1 << sh
		if blk > ndst {
			continue
		}
		var total, uniform int
		for _, s := range sws {
			s.bshift = sh
			for b := 0; b < (len(s.route)+blk-1)/blk; b++ {
				total++
				if s.blockRoute(b) != viaRoute {
					uniform++
				}
			}
		}
		if total > 0 && 8*uniform >= 7*total {
			return sh
		}
	}
	return 0
}

// Name returns the switch's name.
func (s *Switch) Name() string { return s.name }

// Ports returns the switch's ports; the slice is owned by the switch.
func (s *Switch) Ports() []*Port { return s.ports }

// Config returns the switch's configuration with defaults applied.
func (s *Switch) Config() SwitchConfig { return s.cfg }

// BufferUsed returns the shared and headroom bytes in use.
func (s *Switch) BufferUsed() (shared, headroom units.Bytes) {
	return units.Bytes(s.sharedUsed), units.Bytes(s.hdrmUsed)
}

// receive handles a frame that arrived on port in (its receive side).
func (s *Switch) receive(p *Packet, in *Port) {
	now := s.w.now
	if p.Kind == KindPFC {
		in.onPFC(p, now)
		s.w.FreePacket(p)
		return
	}
	out := s.egress(p)
	if out < 0 {
		in.c.NoRoute++
		in.drop(p)
		return
	}
	op := s.ports[out]
	if !p.dataClass() {
		op.enqueueCtrl(p, now)
		return
	}
	if op.storm {
		op.c.WatchdogDrops++
		op.drop(p)
		return
	}
	if s.lossy {
		if !s.admitLossy(in, op, p) {
			op.c.Drops++
			op.drop(p)
			return
		}
	} else if !s.admitLossless(in, p, now) {
		in.c.Drops++
		in.drop(p)
		return
	}
	op.enqueueData(p, now)
}

// egress picks the output port for p, -1 if unroutable.
func (s *Switch) egress(p *Packet) int {
	d := uint(p.Dst)
	if d>>s.bshift >= uint(len(s.broute)) {
		return -1
	}
	r := s.broute[d>>s.bshift]
	if r == viaRoute {
		if d >= uint(len(s.route)) {
			return -1
		}
		r = s.route[d]
	}
	n := r >> 24
	if n == 1 {
		return int(r & 0xffffff)
	}
	if n == 0 {
		return -1
	}
	var h uint64
	if s.spray && p.isData() {
		h = s.w.rng.Uint64()
	} else {
		h = mix64(p.Flow ^ s.seed)
	}
	// Lemire's multiply-shift reduction of the top 32 bits onto [0, n).
	i := uint32(((h >> 32) * uint64(n)) >> 32)
	return int(s.gports[r&0xffffff+i])
}

// threshold returns the current XOFF threshold on an ingress port's shared
// bytes.
func (s *Switch) threshold() int64 {
	if s.xoff > 0 {
		return s.xoff
	}
	free := s.sharedCap - s.sharedUsed
	if free <= 0 {
		return 0
	}
	return int64((uint64(free) * uint64(s.alphaNum)) >> 16)
}

func (s *Switch) sharedOf(in *Port) int64 {
	if in.inBytes > s.reserve {
		return in.inBytes - s.reserve
	}
	return 0
}

// admitLossless charges a data packet to its ingress port (HPCC ns-3
// SwitchMmu::CheckIngressAdmission/UpdateIngressAdmission) and sends XOFF
// upstream when the port crosses its threshold. It reports false when the
// headroom overflowed: a lossless drop, the sign of too little headroom.
func (s *Switch) admitLossless(in *Port, p *Packet, now Time) bool {
	sz := int64(p.Size)
	nb := in.inBytes + sz
	th := s.threshold()
	switch {
	case nb <= s.reserve:
		in.inBytes = nb
	case s.sharedOf(in)+sz > th || s.sharedUsed+sz > s.sharedCap:
		if in.inHdrm+sz > in.inHdrmCap {
			return false
		}
		in.inHdrm += sz
		s.hdrmUsed += sz
	default:
		in.inBytes = nb
		s.sharedUsed += min(sz, nb-s.reserve)
	}
	p.in = uint16(in.index)
	p.flags |= flagAcct
	if units.Bytes(in.inBytes+in.inHdrm) > in.ingressMax || units.Bytes(in.inHdrm) > in.headroomMax {
		in.ingressMax = max(in.ingressMax, units.Bytes(in.inBytes+in.inHdrm))
		in.headroomMax = max(in.headroomMax, units.Bytes(in.inHdrm))
	}
	if !in.inPaused && (in.inHdrm > 0 || s.sharedOf(in) >= th) {
		in.inPaused = true
		in.sendPFC(true, now)
	}
	return true
}

// admitLossy is drop-tail: the packet is admitted if its egress queue stays
// within the (static or dynamic) limit and the buffer has room.
func (s *Switch) admitLossy(in *Port, op *Port, p *Packet) bool {
	sz := int64(p.Size)
	if s.sharedUsed+sz > s.sharedCap {
		return false
	}
	lim := s.egressLim
	if lim == 0 {
		lim = int64((uint64(s.sharedCap-s.sharedUsed) * uint64(s.egressA)) >> 16)
	}
	if op.qBytes+sz > lim {
		return false
	}
	in.inBytes += sz
	s.sharedUsed += sz
	p.in = uint16(in.index)
	if units.Bytes(in.inBytes) > in.ingressMax {
		in.ingressMax = units.Bytes(in.inBytes)
	}
	p.flags |= flagAcct
	return true
}

// release returns a departing data packet's bytes to its ingress port and
// sends XON upstream when the port has drained (ns-3
// RemoveFromIngressAdmission and CheckShouldResume).
func (s *Switch) release(p *Packet) {
	in := s.ports[p.in]
	sz := int64(p.Size)
	p.flags &^= flagAcct
	if s.lossy {
		in.inBytes -= sz
		s.sharedUsed -= sz
		return
	}
	fromH := min(in.inHdrm, sz)
	in.inHdrm -= fromH
	s.hdrmUsed -= fromH
	rest := sz - fromH
	fromS := min(rest, s.sharedOf(in))
	in.inBytes -= rest
	s.sharedUsed -= fromS
	if in.inPaused && in.inHdrm == 0 {
		sh := s.sharedOf(in)
		var resume bool
		if s.xoff > 0 {
			resume = sh <= s.xon
		} else {
			resume = sh == 0 || sh+s.resumeOff <= s.threshold()
		}
		if resume {
			in.inPaused = false
			in.sendPFC(false, s.w.now)
		}
	}
}

// SetRoute replaces the forwarding entry for destination endpoint dst with
// the given egress ports (an ECMP group); no ports makes dst unreachable.
// Use it after Network.Build for custom (for example deadlock-prone)
// routing.
func (s *Switch) SetRoute(dst *NIC, ports ...*Port) {
	if !s.built {
		panic("sim: BUG: Switch.SetRoute before Network.Build")
	}
	b := int(dst.id) >> s.bshift
	if len(ports) == 0 {
		s.route[dst.id] = noRoute
		s.broute[b] = s.blockRoute(b)
		return
	}
	idx := make([]int32, len(ports))
	for i, p := range ports {
		if p.sw != s {
			panic("sim: BUG: Switch.SetRoute with a port of another node: " + p.name)
		}
		idx[i] = int32(p.index)
	}
	s.route[dst.id] = s.addGroup(idx, nil)
	s.broute[b] = s.blockRoute(b)
}

// addGroup returns the route entry for the group with exactly these ports,
// adding it if needed. dedup, when non-nil, maps a group's key to its
// entry.
func (s *Switch) addGroup(ports []int32, dedup map[string]uint32) uint32 {
	if len(ports) == 1 {
		return 1<<24 | uint32(ports[0])
	}
	if len(ports) > 255 {
		panic("sim: BUG: ECMP group of more than 255 ports on switch " + s.name)
	}
	if e := s.last; e>>24 == uint32(len(ports)) && slices.Equal(s.gports[e&0xffffff:int(e&0xffffff)+len(ports)], ports) {
		return e // destinations in id order mostly repeat the previous group
	}
	var key string
	if dedup != nil {
		b := make([]byte, 0, 4*len(ports))
		for _, p := range ports {
			b = append(b, byte(p), byte(p>>8), byte(p>>16), byte(p>>24))
		}
		key = string(b)
		if g, ok := dedup[key]; ok {
			s.last = g
			return g
		}
	} else {
	search:
		for _, g := range s.groups {
			if int(g.n) != len(ports) {
				continue
			}
			for j, p := range ports {
				if s.gports[int(g.off)+j] != p {
					continue search
				}
			}
			return uint32(g.n)<<24 | uint32(g.off)
		}
	}
	if len(s.gports)+len(ports) > 0xffffff {
		panic("sim: BUG: too many ECMP groups on switch " + s.name)
	}
	g := group{off: int32(len(s.gports)), n: int32(len(ports))}
	s.gports = append(s.gports, ports...)
	s.groups = append(s.groups, g)
	e := uint32(g.n)<<24 | uint32(g.off)
	if dedup != nil {
		dedup[key] = e
	}
	s.last = e
	return e
}

// RouteTo returns the egress ports the switch uses towards dst.
func (s *Switch) RouteTo(dst *NIC) []*Port {
	r := s.route[dst.id]
	n := int(r >> 24)
	if n == 1 {
		return []*Port{s.ports[r&0xffffff]}
	}
	out := make([]*Port, n)
	for i := range out {
		out[i] = s.ports[s.gports[int(r&0xffffff)+i]]
	}
	return out
}
