// Package mem is an in-memory qp backend on virtual time, for tests,
// examples and demos: a Network of paths, each a FIFO server with a rate
// and a one-way delay, that really copies bytes from the sender's region
// into the receiver's.
//
// # Model
//
// A work request posted on path p at time t starts serialising at
// max(t, when p's previous work request finished), takes Len/Rate, lands in
// the receiver's region one Delay later (a WRITE WITH IMM then produces a
// receive completion) and completes at the sender one more Delay later (the
// RC acknowledgement). So an idle path's completion time for n bytes is
// n·8/Rate + 2·Delay.
//
// A READ (qp.OpRead) posted at t leaves once the path's earlier writes have
// been serialised (the request itself takes no time), reaches the
// receiver one Delay later, where its key, range and rights are checked
// (qp.Exposer; a violation answers StatusRemoteAccess one Delay later),
// and its response is serialised at Rate in the other direction (the
// reverse link is a FIFO server of its own, so reads and writes on one path
// overlap as on a full-duplex link), lands one Delay after that and
// completes at once: an idle path reads n bytes in n·8/Rate + 2·Delay, as
// it writes them. Deviation: the bytes are copied from the receiver's
// memory when the response lands, not while the responder's NIC sends
// it. Completions on a path are reported in post order, as on an RC queue
// pair.
//
// Reset (qp.Resetter) fences a path: its work requests that have not landed
// never will, and every outstanding one completes at once with
// StatusFlushed, as moving an RC queue pair to the error state and back
// does. A failed path stays failed (the link is still down).
//
// Send regions: besides Config.SendRegion, buffers registered with
// AddSendRegion (qp.SendRegions) can be sent from; a write reads its bytes
// when it lands.
//
// Stall injection: Pause holds a path's writes and READs where they are
// (they have left the sender but do not land, as on a congested or paused
// link), and Resume lets them land, at the resume time, in order. A Reset
// of a paused path flushes the held work: it never lands.
//
// Failure injection: a path can fail at a given time (FailAt) or on demand
// (Fail). From then on nothing lands: the oldest outstanding work request
// completes with StatusRetryExceeded after RetryTimeout (as an RC QP's
// transport retries run out) and the rest, and anything posted later, with
// StatusFlushed, as a QP in the error state flushes them. Congestion
// injection: CNPEvery counts one CNP and one CE-marked packet for every so
// many bytes a path carries.
//
// The Network owns the virtual clock. Drivers advance it with AdvanceTo
// (or Run) and read it with Now; nothing here sleeps or starts goroutines.
// A Network and its connections are not safe for concurrent use.
package mem

import (
	"fmt"
	"sync"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/internal/cqring"
	"github.com/mptx-dev/mptx/qp/internal/sendreg"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// PathConfig configures one in-memory path.
type PathConfig struct {
	Rate  units.BitRate // serialisation rate; required
	Delay time.Duration // one-way delay; 0 means 5 µs
	// FailAt, if set, fails the path at that instant.
	FailAt vtime.Time
	// CNPEvery, if > 0, counts one CNP (and one ECN-marked packet) per
	// CNPEvery bytes the path carries.
	CNPEvery units.Bytes
	// NIC is the local NIC index reported in PathInfo.
	NIC int
}

// Config configures a Network.
type Config struct {
	Paths []PathConfig
	// SendRegion and RecvRegion are the registered regions; writes copy
	// between them. A nil SendRegion sends zeros (timing only).
	SendRegion []byte
	RecvRegion []byte
	// RetryTimeout is how long a failed path takes to report
	// StatusRetryExceeded; 0 means 1 ms.
	RetryTimeout time.Duration
	// MaxSendWR is the send queue depth per path; 0 means 1024.
	MaxSendWR int
	// Seed seeds the keys and addresses Receiver.Expose draws.
	Seed uint64
}

type evKind uint8

const (
	evLand       evKind = iota + 1 // a write's last byte reaches the receiver
	evComplete                     // the completion reaches the sender's queue
	evReadArrive                   // a READ request reaches the receiver
	evReadLand                     // a READ response's last byte reaches the sender
)

type event struct {
	at   vtime.Time
	seq  uint64
	kind evKind
	path int
	wr   qp.SendWR
	st   qp.Status
	// done is when the work request completes if all goes well: the
	// acknowledgement's arrival (writes) or the response's (reads),
	// held back behind the path's earlier work requests.
	done vtime.Time
	// land is when a READ's response has fully arrived.
	land vtime.Time
	// src is the sender's memory the work request names (its region at
	// Local, or the registered send region): a write's payload, read when
	// it lands (nil sends zeros); a READ's destination, written when its
	// response lands (nil drops the bytes).
	src []byte
}

// Network is an in-memory fabric with one sender Conn and one Receiver.
type Network struct {
	cfg   Config
	now   vtime.Time
	seq   uint64
	heap  []event
	paths []memPath
	infos []qp.PathInfo

	sendQ      cqring.Ring // grows: the virtual world never waits for Poll
	recvQ      cqring.Ring
	connClosed bool
	recvClosed bool
	conn       Conn
	recv       Receiver
	regs       sendreg.Table // qp.SendRegions

	// The exposed ranges (qp.Exposer), guarded by expMu: Expose and
	// RevokeKey may come from any goroutine.
	expMu   sync.Mutex
	exps    map[uint32]*exposure
	expRand uint64 // splitmix64 state for keys and addresses
}

// exposure is one range the receiver exposed.
type exposure struct {
	qp.Exposure
	mem []byte
}

type memPath struct {
	cfg       PathConfig
	busyUntil vtime.Time // the forward link (writes, READ requests) is busy until then
	rbusy     vtime.Time // the reverse link (READ responses) is busy until then
	lastDone  vtime.Time // the latest completion time handed out: each later one is at least 1 ns after it (completions in post order)
	failed    bool
	failAt    vtime.Time
	retryDone bool // the StatusRetryExceeded completion has been issued
	out       int  // outstanding work requests
	carried   units.Bytes
	counters  qp.Counters
	bytes     units.Bytes // bytes landed
	paused    bool
	held      []event // writes due to land while paused, in order
}

// New builds a Network at time vtime.Epoch.
func New(cfg Config) (*Network, error) {
	if len(cfg.Paths) == 0 {
		return nil, fmt.Errorf("mem: Config.Paths is empty (valid: at least 1 path)")
	}
	for i, p := range cfg.Paths {
		if p.Rate <= 0 {
			return nil, fmt.Errorf("mem: Config.Paths[%d].Rate = %d bit/s (valid: > 0)", i, p.Rate)
		}
		if p.Delay < 0 {
			return nil, fmt.Errorf("mem: Config.Paths[%d].Delay = %v (valid: >= 0)", i, p.Delay)
		}
		if p.CNPEvery < 0 {
			return nil, fmt.Errorf("mem: Config.Paths[%d].CNPEvery = %d (valid: >= 0)", i, p.CNPEvery)
		}
	}
	if cfg.RetryTimeout == 0 {
		cfg.RetryTimeout = time.Millisecond
	}
	if cfg.MaxSendWR == 0 {
		cfg.MaxSendWR = 1024
	}
	n := &Network{cfg: cfg, now: vtime.Epoch, exps: map[uint32]*exposure{}, expRand: cfg.Seed ^ 0x6d70_7478_6d65_6d00}
	n.paths = make([]memPath, len(cfg.Paths))
	n.infos = make([]qp.PathInfo, len(cfg.Paths))
	for i, p := range cfg.Paths {
		if p.Delay == 0 {
			p.Delay = 5 * time.Microsecond
		}
		n.paths[i] = memPath{cfg: p}
		n.infos[i] = qp.PathInfo{
			QPN: uint32(0x100 + i), Device: fmt.Sprintf("mem%d", p.NIC), Port: 1, NIC: p.NIC,
			SrcPort: uint16(49152 + i), LineRate: p.Rate, BaseRTT: 2 * p.Delay, MTU: 4096, Hops: 1,
		}
	}
	n.heap = make([]event, 0, 1024)
	n.sendQ.Init(1024)
	n.recvQ.Init(1024)
	n.conn.n = n
	n.recv.n = n
	return n, nil
}

// Conn returns the sender side.
func (n *Network) Conn() *Conn { return &n.conn }

// Receiver returns the receiver side.
func (n *Network) Receiver() *Receiver { return &n.recv }

// Now returns the network's virtual time.
func (n *Network) Now() vtime.Time { return n.now }

// Next returns the time of the next pending event, 0 if none.
func (n *Network) Next() vtime.Time {
	next := vtime.Time(0)
	if len(n.heap) > 0 {
		next = n.heap[0].at
	}
	for i := range n.paths {
		p := &n.paths[i]
		if !p.failed && p.cfg.FailAt != 0 {
			next = vtime.Earliest(next, p.cfg.FailAt)
		}
	}
	return next
}

// AdvanceTo runs every event due at or before t and sets the clock to t
// (never backwards).
func (n *Network) AdvanceTo(t vtime.Time) {
	for {
		for i := range n.paths {
			p := &n.paths[i]
			if !p.failed && p.cfg.FailAt != 0 && p.cfg.FailAt <= t && (len(n.heap) == 0 || p.cfg.FailAt <= n.heap[0].at) {
				n.now = max(n.now, p.cfg.FailAt)
				n.fail(i)
			}
		}
		if len(n.heap) == 0 || n.heap[0].at > t {
			break
		}
		ev := n.pop()
		n.now = max(n.now, ev.at)
		n.run(&ev)
	}
	n.now = max(n.now, t)
}

// Fail fails path i now (see the package doc).
func (n *Network) Fail(i int) { n.fail(i) }

// Pause stalls path i now: writes due to land are held until Resume (see
// the package doc).
func (n *Network) Pause(i int) { n.paths[i].paused = true }

// Resume ends a Pause of path i: the held writes land now, in order.
func (n *Network) Resume(i int) {
	p := &n.paths[i]
	p.paused = false
	for _, ev := range p.held {
		ev.at = n.now
		n.push(ev)
	}
	clear(p.held)
	p.held = p.held[:0]
}

// PathBytes returns the bytes that landed through path i.
func (n *Network) PathBytes(i int) units.Bytes { return n.paths[i].bytes }

func (n *Network) fail(i int) {
	p := &n.paths[i]
	if p.failed {
		return
	}
	p.failed = true
	p.failAt = n.now
	p.paused = false
	for _, ev := range p.held { // held writes never land either
		n.push(ev)
	}
	p.held = p.held[:0]
	// Work requests that have not landed yet never will: re-time their
	// completions. Walk the heap and rewrite this path's events.
	first := true
	// Collect in order of sequence so the oldest gets the retry error.
	var minSeq uint64 = ^uint64(0)
	for j := range n.heap {
		ev := &n.heap[j]
		if ev.path == i && ev.kind != evComplete && ev.seq < minSeq {
			minSeq = ev.seq
		}
	}
	for j := range n.heap {
		ev := &n.heap[j]
		if ev.path != i || ev.kind == evComplete {
			continue
		}
		ev.kind = evComplete
		if ev.seq == minSeq && first {
			ev.st = qp.StatusRetryExceeded
			ev.at = n.now.Add(n.cfg.RetryTimeout)
			p.retryDone = true
			first = false
		} else {
			ev.st = qp.StatusFlushed
			ev.at = n.now.Add(n.cfg.RetryTimeout)
		}
	}
	n.heapify()
}

func (n *Network) run(ev *event) {
	p := &n.paths[ev.path]
	switch ev.kind {
	case evLand:
		if p.paused {
			p.held = append(p.held, *ev)
			return
		}
		wr := &ev.wr
		if !n.write(wr, ev.src) {
			n.push(event{at: n.now.Add(p.cfg.Delay), kind: evComplete, path: ev.path, wr: *wr, st: qp.StatusRemoteAccess})
			return
		}
		p.bytes += wr.Len
		if wr.Op == qp.OpWriteImm {
			pushGrow(&n.recvQ, qp.Completion{Path: ev.path, QPN: n.infos[ev.path].QPN, Op: qp.OpRecvImm, Status: qp.StatusOK, Bytes: wr.Len, Imm: wr.Imm, At: n.now})
		}
		n.push(event{at: ev.done, kind: evComplete, path: ev.path, wr: *wr, st: qp.StatusOK})
	case evReadArrive:
		if p.paused { // a stalled path holds READs too
			p.held = append(p.held, *ev)
			return
		}
		// The responder checks the request; a violation is NAKed.
		if !n.readable(&ev.wr) {
			n.push(event{at: n.now.Add(p.cfg.Delay), kind: evComplete, path: ev.path, wr: ev.wr, st: qp.StatusRemoteAccess})
			return
		}
		n.push(event{at: ev.land, kind: evReadLand, path: ev.path, wr: ev.wr, done: ev.done, src: ev.src})
	case evReadLand:
		if n.connClosed {
			// The requester's queue pairs are gone: a response has
			// nowhere to land (on verbs the NIC drops it), and the
			// requester's memory may already be reused.
			return
		}
		if p.paused {
			p.held = append(p.held, *ev)
			return
		}
		wr := &ev.wr
		if !n.read(wr, ev.src) { // revoked while the response was under way
			n.push(event{at: n.now, kind: evComplete, path: ev.path, wr: *wr, st: qp.StatusRemoteAccess})
			return
		}
		p.bytes += wr.Len
		n.push(event{at: ev.done, kind: evComplete, path: ev.path, wr: *wr, st: qp.StatusOK})
	case evComplete:
		p.out--
		pushGrow(&n.sendQ, qp.Completion{ID: ev.wr.ID, Path: ev.path, QPN: n.infos[ev.path].QPN, Op: ev.wr.Op, Status: ev.st, Bytes: ev.wr.Len, At: n.now})
	}
}

// Conn is the sender side of a Network; it implements qp.Conn,
// qp.Resetter and qp.SendRegions.
type Conn struct{ n *Network }

var (
	_ qp.Conn        = (*Conn)(nil)
	_ qp.Resetter    = (*Conn)(nil)
	_ qp.SendRegions = (*Conn)(nil)
)

// AddSendRegion implements qp.SendRegions: work requests naming the id
// returned (SendWR.Region) copy from buf when they land, so buf must stay
// unchanged until they have completed.
func (c *Conn) AddSendRegion(buf []byte) (uint32, error) {
	if c.n.connClosed {
		return 0, qp.ErrClosed
	}
	return c.n.regs.Add("mem", buf)
}

// RemoveSendRegion implements qp.SendRegions.
func (c *Conn) RemoveSendRegion(id uint32) error { return c.n.regs.Remove("mem", id) }

// Reset implements qp.Resetter: every work request outstanding on path
// completes now with StatusFlushed, and those that had not landed (those
// a Pause holds included) never will.
func (c *Conn) Reset(path int) error {
	n := c.n
	if n.connClosed {
		return qp.ErrClosed
	}
	if path < 0 || path >= len(n.paths) {
		return fmt.Errorf("mem: Reset: path %d out of range [0, %d)", path, len(n.paths))
	}
	for j := range n.heap {
		if ev := &n.heap[j]; ev.path == path {
			ev.kind, ev.st, ev.at = evComplete, qp.StatusFlushed, n.now
		}
	}
	n.heapify()
	p := &n.paths[path]
	for _, ev := range p.held {
		ev.kind, ev.st, ev.at = evComplete, qp.StatusFlushed, n.now
		n.push(ev)
	}
	p.held = p.held[:0]
	p.busyUntil, p.rbusy, p.lastDone = n.now, n.now, n.now
	return nil
}

// Paths implements qp.Conn.
func (c *Conn) Paths() []qp.PathInfo { return c.n.infos }

// PostSend implements qp.Conn.
func (c *Conn) PostSend(path int, wrs []qp.SendWR) (int, error) {
	n := c.n
	if n.connClosed {
		return 0, qp.ErrClosed
	}
	if path < 0 || path >= len(n.paths) {
		return 0, fmt.Errorf("mem: PostSend: path %d out of range [0, %d)", path, len(n.paths))
	}
	p := &n.paths[path]
	for k := range wrs {
		wr := &wrs[k]
		if wr.Op != qp.OpWrite && wr.Op != qp.OpWriteImm && wr.Op != qp.OpRead {
			return k, fmt.Errorf("mem: PostSend: wrs[%d].Op = %v (valid: WRITE, WRITE_WITH_IMM, RDMA_READ)", k, wr.Op)
		}
		region := n.cfg.SendRegion
		if wr.Region != 0 {
			var ok bool
			if region, ok = n.regs.Lookup(wr.Region); !ok {
				return k, fmt.Errorf("mem: PostSend: wrs[%d].Region = %#x is not registered (AddSendRegion)", k, wr.Region)
			}
		}
		if wr.Len < 0 || (region != nil && (wr.Local < 0 || wr.Local+wr.Len > units.Bytes(len(region)))) {
			return k, fmt.Errorf("mem: PostSend: wrs[%d] local range [%d, %d) outside the send region %#x (%d B)", k, wr.Local, wr.Local+wr.Len, wr.Region, len(region))
		}
		var src []byte
		if region != nil && wr.Len > 0 {
			src = region[wr.Local : wr.Local+wr.Len]
		}
		if p.out >= n.cfg.MaxSendWR {
			return k, qp.ErrQueueFull
		}
		p.out++
		if p.failed {
			// A QP reports its error only when the retries run out
			// (failAt + RetryTimeout); work posted before that completes
			// after the retry error, flushed, as on an RC QP.
			st := qp.StatusFlushed
			at := max(n.now, p.failAt.Add(n.cfg.RetryTimeout))
			if !p.retryDone {
				st, at = qp.StatusRetryExceeded, max(n.now, p.failAt).Add(n.cfg.RetryTimeout)
				p.retryDone = true
			}
			n.push(event{at: at, kind: evComplete, path: path, wr: *wr, st: st})
			continue
		}
		if p.cfg.CNPEvery > 0 {
			before := p.carried / p.cfg.CNPEvery
			p.carried += wr.Len
			if d := uint64(p.carried/p.cfg.CNPEvery - before); d > 0 {
				p.counters.CNPReceived += d
				p.counters.ECNMarked += d
			}
		}
		start := max(n.now, p.busyUntil)
		if wr.Op == qp.OpRead {
			// The request leaves behind the earlier writes and takes no
			// time; the response queues on the reverse link.
			arrive := start.Add(p.cfg.Delay)
			rstart := max(arrive, p.rbusy)
			p.rbusy = rstart.Add(p.cfg.Rate.TxTime(wr.Len))
			land := p.rbusy.Add(p.cfg.Delay)
			p.lastDone = max(p.lastDone+1, land)
			n.push(event{at: arrive, kind: evReadArrive, path: path, wr: *wr, land: land, done: p.lastDone, src: src})
			continue
		}
		done := start.Add(p.cfg.Rate.TxTime(wr.Len))
		p.busyUntil = done
		p.lastDone = max(p.lastDone+1, done.Add(2*p.cfg.Delay))
		n.push(event{at: done.Add(p.cfg.Delay), kind: evLand, path: path, wr: *wr, done: p.lastDone, src: src})
	}
	return len(wrs), nil
}

// Poll implements qp.Conn.
func (c *Conn) Poll(dst []qp.Completion) (int, error) {
	if c.n.connClosed {
		return 0, qp.ErrClosed
	}
	return c.n.sendQ.Pop(dst), nil
}

// Counters implements qp.Conn.
func (c *Conn) Counters(path int) (qp.Counters, error) {
	if path < 0 || path >= len(c.n.paths) {
		return qp.Counters{}, fmt.Errorf("mem: Counters: path %d out of range [0, %d)", path, len(c.n.paths))
	}
	return c.n.paths[path].counters, nil
}

// Caps implements qp.Conn.
func (c *Conn) Caps() qp.Caps {
	return qp.Caps{CarriesData: true, Timestamps: true, CNPCounters: true, ECNCounters: true,
		MaxSendWR: c.n.cfg.MaxSendWR, MaxMessageBytes: units.GiB, Read: true}
}

// Close implements qp.Conn. Nothing more is posted, and a READ response
// still under way is dropped: it never lands in the requester's memory,
// which the caller may reuse once Close returns.
func (c *Conn) Close() error { c.n.connClosed = true; return nil }

// Receiver is the receiving side of a Network; it implements qp.Receiver
// and qp.Exposer.
type Receiver struct{ n *Network }

var (
	_ qp.Receiver = (*Receiver)(nil)
	_ qp.Exposer  = (*Receiver)(nil)
)

// Expose implements qp.Exposer. Keys and addresses are drawn from
// Config.Seed: a nonzero key not in use, and a page-aligned address in
// [2^32, 2^46), as a user-space virtual address would be.
func (r *Receiver) Expose(mem []byte, access qp.Access) (qp.Exposure, error) {
	n := r.n
	if access == 0 || access&^qp.AccessMask != 0 {
		return qp.Exposure{}, fmt.Errorf("mem: Expose: access %#x (valid: AccessRead, AccessWrite or both)", uint8(access))
	}
	if len(mem) == 0 {
		return qp.Exposure{}, fmt.Errorf("mem: Expose: empty range (valid: at least 1 byte)")
	}
	n.expMu.Lock()
	defer n.expMu.Unlock()
	if n.recvClosed {
		return qp.Exposure{}, qp.ErrClosed
	}
	var key uint32
	for key == 0 || n.exps[key] != nil {
		key = uint32(n.draw())
	}
	addr := 1<<32 + n.draw()%(1<<34)<<12
	e := &exposure{Exposure: qp.Exposure{Key: key, Addr: addr, Len: units.Bytes(len(mem)), Access: access}, mem: mem}
	n.exps[key] = e
	return e.Exposure, nil
}

// RevokeKey implements qp.Exposer.
func (r *Receiver) RevokeKey(key uint32) error {
	n := r.n
	n.expMu.Lock()
	defer n.expMu.Unlock()
	if n.exps[key] == nil {
		return fmt.Errorf("mem: Revoke: key %#x is not exposed", key)
	}
	delete(n.exps, key)
	return nil
}

// draw returns the next splitmix64 value. Called with expMu held.
func (n *Network) draw() uint64 {
	n.expRand += 0x9e3779b97f4a7c15
	z := n.expRand
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// span returns the bytes of exposure e that [addr, addr+n) names, if it
// lies within e.
func (e *exposure) span(addr units.Bytes, n units.Bytes) ([]byte, bool) {
	if addr < 0 || n < 0 || uint64(addr) < e.Addr {
		return nil, false
	}
	off := uint64(addr) - e.Addr
	if off > uint64(e.Len) || uint64(n) > uint64(e.Len)-off {
		return nil, false
	}
	return e.mem[off : off+uint64(n)], true
}

// readable checks a READ request against its key, range and rights.
func (n *Network) readable(wr *qp.SendWR) bool {
	n.expMu.Lock()
	defer n.expMu.Unlock()
	e := n.exps[wr.RKey]
	if e == nil || e.Access&qp.AccessRead == 0 {
		return false
	}
	_, ok := e.span(wr.Remote, wr.Len)
	return ok
}

// read lands a READ's response: it copies the range into dst, the
// sender's memory (nil: nowhere), unless the key was revoked meanwhile.
// The copy runs under expMu, so that once RevokeKey returns nothing reads
// the range.
func (n *Network) read(wr *qp.SendWR, dst []byte) bool {
	n.expMu.Lock()
	defer n.expMu.Unlock()
	e := n.exps[wr.RKey]
	if e == nil || e.Access&qp.AccessRead == 0 {
		return false
	}
	src, ok := e.span(wr.Remote, wr.Len)
	if !ok {
		return false
	}
	copy(dst, src)
	return true
}

// write lands a write of src (nil: zeros) in the receive region (RKey 0)
// or an exposed range with AccessWrite; false means a remote access error.
func (n *Network) write(wr *qp.SendWR, src []byte) bool {
	var dst []byte
	if wr.RKey == 0 {
		if end := wr.Remote + wr.Len; wr.Remote < 0 || end > units.Bytes(len(n.cfg.RecvRegion)) {
			return false
		}
		dst = n.cfg.RecvRegion[wr.Remote : wr.Remote+wr.Len]
	} else {
		n.expMu.Lock()
		defer n.expMu.Unlock()
		e := n.exps[wr.RKey]
		if e == nil || e.Access&qp.AccessWrite == 0 {
			return false
		}
		var ok bool
		if dst, ok = e.span(wr.Remote, wr.Len); !ok {
			return false
		}
	}
	if len(dst) > 0 {
		if src != nil {
			copy(dst, src)
		} else {
			clear(dst)
		}
	}
	return true
}

// Poll implements qp.Receiver.
func (r *Receiver) Poll(dst []qp.Completion) (int, error) {
	if r.n.recvClosed {
		return 0, qp.ErrClosed
	}
	return r.n.recvQ.Pop(dst), nil
}

// Region implements qp.Receiver.
func (r *Receiver) Region() []byte { return r.n.cfg.RecvRegion }

// Close implements qp.Receiver; it revokes every exposed range.
func (r *Receiver) Close() error {
	r.n.expMu.Lock()
	r.n.recvClosed = true
	clear(r.n.exps)
	r.n.expMu.Unlock()
	return nil
}

// ---------------------------------------------------------------------------
// event heap (typed, allocation-free once grown) and completion queues

func (n *Network) push(ev event) {
	n.seq++
	ev.seq = n.seq
	n.heap = append(n.heap, ev)
	n.up(len(n.heap) - 1)
}

func (n *Network) pop() event {
	h := n.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	n.heap = h[:last]
	if last > 0 {
		n.down(0)
	}
	return top
}

func (n *Network) less(i, j int) bool {
	a, b := &n.heap[i], &n.heap[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (n *Network) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !n.less(i, p) {
			break
		}
		n.heap[i], n.heap[p] = n.heap[p], n.heap[i]
		i = p
	}
}

func (n *Network) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(n.heap) {
			return
		}
		m := l
		if r := l + 1; r < len(n.heap) && n.less(r, l) {
			m = r
		}
		if !n.less(m, i) {
			return
		}
		n.heap[i], n.heap[m] = n.heap[m], n.heap[i]
		i = m
	}
}

func (n *Network) heapify() {
	for i := len(n.heap)/2 - 1; i >= 0; i-- {
		n.down(i)
	}
}

// pushGrow queues c on q, growing q when it is full: completions accumulate
// in virtual time until the driver polls, and nothing bounds how long that
// is.
func pushGrow(q *cqring.Ring, c qp.Completion) {
	if q.Full() {
		q.Grow()
	}
	q.Push(c)
}
