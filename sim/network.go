package sim

import (
	"fmt"
	"strconv"

	"github.com/mptx-dev/mptx/units"
)

// Host is a server with one or more NICs (rails).
type Host struct {
	name  string
	index int
	nics  []*NIC
}

// Name returns the host's name.
func (h *Host) Name() string { return h.name }

// Index returns the host's position in Network.Hosts.
func (h *Host) Index() int { return h.index }

// NICs returns the host's NICs, one per rail.
func (h *Host) NICs() []*NIC { return h.nics }

// NIC returns the host's NIC on rail r.
func (h *Host) NIC(r int) *NIC { return h.nics[r] }

// Node is a switch or a NIC: something a cable can attach to.
type Node interface {
	Name() string
	node()
}

func (*Switch) node() {}
func (*NIC) node()    {}

// Network is a fabric inside one World: switches, hosts with their NICs,
// and the cables between them. Build it with AddSwitch, AddHost and Link
// (or a sim/topo builder), then call Build once to size the switch buffers
// and compute shortest-path ECMP routes.
//
// A Network belongs to its World and, like it, is not safe for concurrent
// use.
type Network struct {
	W        *World
	Switches []*Switch
	Hosts    []*Host
	NICs     []*NIC // indexed by endpoint id
	Cables   []*Cable

	watchdog WatchdogConfig
	storms   []PauseStorm
	built    bool
	portBuf  []Port // slab the next ports are cut from
	qpBuf    []QP   // slab the next QPs are cut from
}

// NewNetwork returns an empty network in w.
func NewNetwork(w *World) *Network { return &Network{W: w} }

// SetWatchdog configures the PFC watchdog of every port; call before Build.
func (n *Network) SetWatchdog(cfg WatchdogConfig) error {
	if n.built {
		return fmt.Errorf("sim: SetWatchdog after Build")
	}
	if cfg.Threshold < 0 || cfg.Restore < 0 {
		return fmt.Errorf("sim: WatchdogConfig Threshold = %v, Restore = %v (valid: >= 0)", cfg.Threshold, cfg.Restore)
	}
	if cfg.Restore == 0 {
		cfg.Restore = 10 * cfg.Threshold
	}
	n.watchdog = cfg
	return nil
}

// Storms returns the watchdog's reports so far.
func (n *Network) Storms() []PauseStorm { return n.storms }

// AddSwitch adds a switch.
func (n *Network) AddSwitch(name string, cfg SwitchConfig) (*Switch, error) {
	if n.built {
		return nil, fmt.Errorf("sim: AddSwitch(%q) after Build", name)
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("switch %s: %w", name, err)
	}
	s := &Switch{w: n.W, net: n, id: len(n.Switches), name: name, cfg: c, seed: c.Seed, lossy: c.Lossy, spray: c.Spray}
	if s.seed == 0 {
		s.seed = n.W.rng.Uint64()
	}
	n.Switches = append(n.Switches, s)
	return s, nil
}

// AddHost adds a host with nics NICs (rails) configured by cfg.
func (n *Network) AddHost(name string, nics int, cfg NICConfig) (*Host, error) {
	if n.built {
		return nil, fmt.Errorf("sim: AddHost(%q) after Build", name)
	}
	if nics < 1 || nics > 64 {
		return nil, fmt.Errorf("sim: AddHost(%q): %d NICs (valid: 1..64)", name, nics)
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	h := &Host{name: name, index: len(n.Hosts)}
	for r := 0; r < nics; r++ {
		nic := &NIC{
			w: n.W, net: n, id: int32(len(n.NICs)), name: name + "/nic" + strconv.Itoa(r),
			host: h, rail: r, cfg: &c, rto: AckTimeoutDuration(c.AckTimeout), mtu: int32(c.MTU),
			ackEvery: c.AckEvery, cnpInterval: c.CNPInterval, nakInterval: c.NAKInterval,
			intHeader: c.INTHeader, noECT: c.NoECT, header: int32(c.Header), roce: c.Header == 0,
			ackData: c.AckInDataClass,
		}
		if nic.roce {
			nic.header = DataHeaders
		}
		n.NICs = append(n.NICs, nic)
		h.nics = append(h.nics, nic)
	}
	n.Hosts = append(n.Hosts, h)
	return h, nil
}

// Cable is a full-duplex link between two ports.
type Cable struct {
	net  *Network
	name string
	a, b *Port
	up   bool
}

// Name returns "endA<->endB".
func (c *Cable) Name() string { return c.name }

// Ends returns the two ports: a transmits towards b's owner and b towards
// a's.
func (c *Cable) Ends() (a, b *Port) { return c.a, c.b }

// Up reports whether the cable is up.
func (c *Cable) Up() bool { return c.up }

type linkChange struct {
	c  *Cable
	up bool
}

func (e *linkChange) Fire(now Time) { e.c.set(e.up, now) }

// SetDown schedules the cable to fail at instant at (>= now): frames on the wire or
// transmitted while it is down are lost, and its ports stop honouring any
// pause they had received. Routing does not change (the fabric blackholes
// the link's traffic, as it does until routing converges).
func (c *Cable) SetDown(at Time) { c.net.W.At(at, &linkChange{c: c, up: false}) }

// SetUp schedules the cable to come back at instant at (>= now); each end re-sends
// the pause state its ingress wants.
func (c *Cable) SetUp(at Time) { c.net.W.At(at, &linkChange{c: c, up: true}) }

func (c *Cable) set(up bool, now Time) {
	if c.up == up {
		return
	}
	c.up = up
	if c.net.W.tracer != nil {
		k := TrLinkDown
		if up {
			k = TrLinkUp
		}
		c.net.W.trace(k, c.name, 0, 0, 0)
	}
	for _, p := range [2]*Port{c.a, c.b} {
		p.up = up
		if !up {
			p.downs++
			p.unpause(now)
			continue
		}
		if p.pfcWant {
			p.pfcSent = false
		}
		p.kick(now)
	}
}

// portSlab is how many ports a network allocates at once: over 32 KiB,
// which the Go allocator serves as a large object at a page boundary, so
// that each Port starts on a cache line and its hot fields occupy the
// lines they are grouped in (a Port allocated alone starts 8 bytes into
// its slot, after a type header).
const portSlab = 64

// qpSlab is how many QPs a network allocates at once: over 32 KiB, so
// line-aligned (see portSlab).
const qpSlab = 40

// newQP returns a zero QP from the network's slab.
func (n *Network) newQP() *QP {
	if len(n.qpBuf) == 0 {
		n.qpBuf = make([]QP, qpSlab)
	}
	q := &n.qpBuf[0]
	n.qpBuf = n.qpBuf[1:]
	return q
}

func (n *Network) newPort(name string, idx int, cfg LinkConfig) *Port {
	if len(n.portBuf) == 0 {
		n.portBuf = make([]Port, portSlab)
	}
	p := &n.portBuf[0]
	n.portBuf = n.portBuf[1:]
	*p = Port{
		w: n.W, index: idx, name: name, rate: cfg.Rate, ser: NewSerialiser(cfg.Rate),
		delay: cfg.Delay, loss: cfg.Loss, lossy: cfg.Loss > 0, up: true, qLast: n.W.now,
	}
	return p
}

// attach creates node x's end of a cable and returns its port.
func (n *Network) attach(x Node, cfg LinkConfig) (*Port, error) {
	switch v := x.(type) {
	case *Switch:
		idx := len(v.ports)
		p := n.newPort(v.name+":p"+strconv.Itoa(idx), idx, cfg)
		p.sw = v
		v.ports = append(v.ports, p)
		return p, nil
	case *NIC:
		if v.port != nil {
			return nil, fmt.Errorf("sim: NIC %s already has a link", v.name)
		}
		p := n.newPort(v.name, 0, cfg)
		p.nic = v
		v.port = p
		return p, nil
	}
	return nil, fmt.Errorf("sim: cannot link a %T", x)
}

// Link connects a and b with a cable.
func (n *Network) Link(a, b Node, cfg LinkConfig) (*Cable, error) {
	if n.built {
		return nil, fmt.Errorf("sim: Link after Build")
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("link %s-%s: %w", a.Name(), b.Name(), err)
	}
	if a == b {
		return nil, fmt.Errorf("sim: Link(%s, %s): a node cannot link to itself", a.Name(), b.Name())
	}
	pa, err := n.attach(a, cfg)
	if err != nil {
		return nil, err
	}
	pb, err := n.attach(b, cfg)
	if err != nil {
		return nil, err
	}
	for _, e := range [2][2]*Port{{pa, pb}, {pb, pa}} {
		if far := e[1]; far.sw != nil {
			e[0].peerPort, e[0].peerSw = far, far.sw
		} else {
			e[0].peerNIC = far.nic
		}
	}
	pa.remote, pb.remote = pb, pa
	c := &Cable{net: n, name: pa.name + "<->" + pb.name, a: pa, b: pb, up: true}
	pa.cable, pb.cable = c, c
	n.Cables = append(n.Cables, c)
	return c, nil
}

// maxFrame returns the wire bytes of the largest data frame the network's
// NICs send (at least the default MTU's), for PFC headroom.
func (n *Network) maxFrame() int64 {
	m := int64(DataHeaders + RETHHeader + ImmDtHeader + DefaultMTU + WireOverhead)
	for _, nic := range n.NICs {
		m = max(m, int64(nic.frame(int(nic.mtu)))+RETHHeader+ImmDtHeader+WireOverhead)
	}
	return m
}

// frame returns the frame bytes of a data packet of pay payload bytes
// without the RoCE extension headers.
func (n *NIC) frame(pay int) units.Bytes {
	return units.Bytes(int(n.header) + pay + int(n.intHeader))
}

// Build sizes every switch's buffer, computes shortest-path ECMP routes
// from every switch to every NIC, and arms the watchdog. It must be called
// once, after the last AddSwitch/AddHost/Link and before traffic.
func (n *Network) Build() error {
	if n.built {
		return fmt.Errorf("sim: Build called twice")
	}
	for _, nic := range n.NICs {
		if nic.port == nil {
			return fmt.Errorf("sim: NIC %s is not linked", nic.name)
		}
	}
	frame := n.maxFrame()
	for _, s := range n.Switches {
		if err := s.buildMMU(frame); err != nil {
			return err
		}
	}
	n.computeRoutes()
	if n.watchdog.Threshold > 0 {
		for _, s := range n.Switches {
			for _, p := range s.ports {
				p.armWatchdog()
			}
		}
		for _, nic := range n.NICs {
			nic.port.armWatchdog()
		}
	}
	n.built = true
	for _, s := range n.Switches {
		s.built = true
	}
	return nil
}

func (s *Switch) buildMMU(maxWireFrame int64) error {
	c := &s.cfg
	buf := int64(c.Buffer)
	np := int64(len(s.ports))
	if c.Lossy {
		s.sharedCap = buf
		s.egressLim = int64(c.EgressLimit)
		s.egressA = int64(c.EgressAlpha * 65536)
	} else {
		s.reserve = int64(c.PFC.Reserve)
		var hdrm int64
		for _, p := range s.ports {
			h := int64(c.PFC.Headroom)
			if h == 0 {
				// Bytes that can still arrive after we decide to pause:
				// two propagation delays of line rate (the PAUSE going
				// up, the data already on the wire coming down) plus three
				// maximum frames (one ahead of the PAUSE here, one being
				// sent upstream, one of reaction slack).
				h = int64(units.BitRate(p.rate).BytesIn((2*p.delay).Duration()+1)) + 3*maxWireFrame
			}
			p.inHdrmCap = h
			hdrm += h
		}
		s.sharedCap = buf - hdrm - np*s.reserve
		if s.sharedCap <= 0 {
			return fmt.Errorf("sim: switch %s: Buffer %v is smaller than its %d ports' headroom and reserve (%v); raise SwitchConfig.Buffer", s.name, c.Buffer, np, units.Bytes(hdrm+np*s.reserve))
		}
		s.xoff, s.xon = int64(c.PFC.XOff), int64(c.PFC.XOn)
		s.resumeOff = int64(c.PFC.ResumeOffset)
		s.alphaNum = int64(c.PFC.Alpha * 65536)
	}
	for _, p := range s.ports {
		if c.ECN != nil {
			p.setECN(c.ECN)
		}
		p.intOn = c.INT
	}
	return nil
}

// computeRoutes fills every switch's table with, for each destination NIC,
// the egress ports on shortest paths to it (breadth-first search from each
// NIC; hosts do not forward). The searches run over a compact copy of the
// graph (node numbers of each switch port's far end), so that they touch
// a few contiguous arrays rather than every Port.
func (n *Network) computeRoutes() {
	ns := len(n.Switches)
	total := ns + len(n.NICs)
	nodeOf := func(p *Port) int32 {
		if p.sw != nil {
			return int32(p.sw.id)
		}
		return int32(ns) + p.nic.id
	}
	// far[off[u]:off[u+1]] are the far ends of switch u's ports, in port
	// order; nicSw[d] is the node NIC d's cable leads to.
	off := make([]int32, ns+1)
	for i, s := range n.Switches {
		off[i+1] = off[i] + int32(len(s.ports))
	}
	far := make([]int32, off[ns])
	for i, s := range n.Switches {
		for j, p := range s.ports {
			far[int(off[i])+j] = nodeOf(p.remote)
		}
	}
	nicSw := make([]int32, len(n.NICs))
	for d, nic := range n.NICs {
		nicSw[d] = nodeOf(nic.port.remote)
	}
	dist := make([]int32, total)
	queue := make([]int32, 0, total)
	dedup := make([]map[string]uint32, ns)
	for i, s := range n.Switches {
		s.route = make([]uint32, len(n.NICs))
		dedup[i] = map[string]uint32{}
	}
	var members []int32
	for d := range n.NICs {
		for i := range dist {
			dist[i] = -1
		}
		src := int32(ns + d)
		dist[src] = 0
		queue = queue[:0]
		if v := nicSw[d]; dist[v] < 0 {
			dist[v] = 1
			if v < int32(ns) {
				queue = append(queue, v)
			}
		}
		for h := 0; h < len(queue); h++ {
			u := queue[h]
			for _, v := range far[off[u]:off[u+1]] {
				if dist[v] < 0 {
					dist[v] = dist[u] + 1
					if v < int32(ns) {
						queue = append(queue, v)
					}
				}
			}
		}
		for i, s := range n.Switches {
			if dist[i] < 0 {
				s.route[d] = noRoute
				continue
			}
			members = members[:0]
			for j, v := range far[off[i]:off[i+1]] {
				if dist[v] == dist[i]-1 && (v < int32(ns) || v == src) {
					members = append(members, int32(j))
				}
			}
			s.route[d] = s.addGroup(members, dedup[i])
		}
	}
	sh := blockShift(n.Switches, len(n.NICs))
	for _, s := range n.Switches {
		s.compressRoutes(sh)
	}
}

// Path returns the ports a packet from src to dst with 5-tuple hash flow
// traverses (by ECMP hashing, as a data packet without spraying would), or
// nil if dst is unreachable.
func (n *Network) Path(src, dst *NIC, flow uint64) []*Port {
	var ports []*Port
	p := src.port
	probe := Packet{Kind: KindAck, Dst: dst.id, Flow: flow}
	for hops := 0; hops < 64; hops++ {
		ports = append(ports, p)
		r := p.remote
		if r.nic != nil {
			if r.nic == dst {
				return ports
			}
			return nil
		}
		out := r.sw.egress(&probe)
		if out < 0 {
			return nil
		}
		p = r.sw.ports[out]
	}
	return nil
}

// PathOf returns the ports q's data packets traverse.
func (n *Network) PathOf(q *QP) []*Port {
	if q.peer < 0 {
		return nil
	}
	return n.Path(q.nic, n.NICs[q.peer], q.flow)
}

// baseRTT estimates the empty-path round trip between two NICs for the
// given flow: each hop's serialisation of a full data packet and
// propagation out, an ACK's serialisation and propagation back. It also
// returns the number of switches on the path.
func (n *Network) baseRTT(src, dst *NIC, flow uint64, mtu int) (Time, int) {
	path := n.Path(src, dst, flow)
	data := src.frame(mtu) + WireOverhead
	ack := units.Bytes(AckSize+WireOverhead) + src.intHeader
	var rtt Time
	for _, p := range path {
		rtt += TxTime(p.rate, data) + TxTime(p.rate, ack) + 2*p.delay
	}
	return rtt, max(len(path)-1, 0)
}

// BaseRTT returns the empty-path round trip of q's data and ACKs.
func (n *Network) BaseRTT(q *QP) Time {
	if q.peer < 0 {
		return 0
	}
	rtt, _ := n.baseRTT(q.nic, n.NICs[q.peer], q.flow, int(q.nic.mtu))
	return rtt
}

// watchdogEvent runs a port's PFC watchdog.
type watchdogEvent struct{ p *Port }

func (p *Port) network() *Network {
	if p.sw != nil {
		return p.sw.net
	}
	return p.nic.net
}

func (p *Port) wdThreshold() Time { return p.network().watchdog.Threshold }

func (p *Port) armWatchdog() {
	p.wdEv.p = p
	p.wd.Init(p.w, &p.wdEv)
}

// Fire either detects a port paused for the whole threshold or ends a
// recovery period.
func (e *watchdogEvent) Fire(now Time) {
	p := e.p
	n := p.network()
	if p.storm {
		p.storm = false
		if p.paused {
			p.pausedAtWD(now)
		}
		p.kick(now)
		return
	}
	if !p.paused {
		return
	}
	st := PauseStorm{Port: p, Since: p.pausedAt, Detected: now}
	n.storms = append(n.storms, st)
	p.c.WatchdogTriggers++
	if p.w.tracer != nil {
		p.w.trace(TrWatchdog, p.name, 0, 0, int64(now-p.pausedAt))
	}
	if n.watchdog.OnStorm != nil {
		n.watchdog.OnStorm(st)
	}
	if !n.watchdog.Recover {
		return
	}
	p.storm = true
	p.wd.Reset(now + n.watchdog.Restore)
	for pkt := p.data.head; pkt != nil && p.sw != nil; pkt = p.data.head { // a NIC's data queue holds only ACKs: kept
		p.data.pop()
		p.integrate(now)
		p.qBytes -= int64(pkt.Size)
		if pkt.flags&flagAcct != 0 {
			p.sw.release(pkt)
		}
		p.c.WatchdogDrops++
		p.drop(pkt)
	}
	p.kick(now)
}

// pausedAtWD restarts the watchdog's measurement of a continuing pause.
func (p *Port) pausedAtWD(now Time) {
	p.wd.Reset(now + p.wdThreshold())
}
