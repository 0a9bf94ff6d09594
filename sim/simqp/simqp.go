// Package simqp is the simulator's qp backend: it exposes queue pairs of a
// sim.Network as a qp.Conn (the sender's several RC QPs to one peer, each
// with its own UDP source port so that ECMP spreads them) and a qp.Receiver
// (WRITE WITH IMM arrivals), and drives a stepper (the mptx engine's
// driver) in the simulation's virtual time.
//
// # Time
//
// Completions carry Completion.At = the simulation clock in nanoseconds
// (sim.Time.VTime). The driver's deadlines (vtime.Time, ns) become
// simulation instants exactly (×1000 ps).
//
// # Driving
//
// Conn and Receiver call a notify hook, synchronously from inside the event
// loop, whenever a completion becomes pollable. Drive connects the hook to a
// Stepper: each notification schedules one coalesced Step at the current
// instant, and the deadline Step returns arms one timer. Nothing here
// starts goroutines or reads a clock, so a run is a pure function of the
// world's seed.
//
// # Allocation
//
// Posting, completion delivery and polling allocate nothing once the
// completion rings have grown to their working size.
package simqp

import (
	"errors"
	"fmt"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Options configures Connect.
type Options struct {
	// QPs is the number of paths (RC QPs) of the connection; 0 means 1.
	QPs int
	// Rails maps path i to the NIC rail it uses on both hosts; nil spreads
	// paths round-robin over the rails both hosts have.
	Rails []int
	// SrcPorts gives each path's UDP source port; nil or 0 entries draw one
	// from the world's RNG.
	SrcPorts []uint16
	// RateLimit is an initial per-QP hardware rate limit; 0 means none.
	RateLimit units.BitRate
	// Region is the size of the receive region the receiver advertises;
	// writes outside it fail with qp.StatusRemoteAccess. 0 means unlimited.
	Region units.Bytes
}

// Conn is the sender's side of a simulated connection. It implements
// qp.Conn, qp.RateLimiter and qp.INTReader. Like every simulator object it
// is used from the simulation's goroutine only.
type Conn struct {
	net    *sim.Network
	qps    []*sim.QP // requester QPs, by path
	rqps   []*sim.QP // the peer's responder QPs, by path
	paths  []qp.PathInfo
	cq     ring
	last   []entry // the completions returned by the latest Poll, for INT
	notify func()
	closed bool
}

// Receiver is the receiving side. It implements qp.Receiver, and
// qp.Exposer for the sender's READs and keyed writes (which its QPs check
// through sim.AccessChecker).
type Receiver struct {
	qps    []*sim.QP
	cq     ring
	notify func()
	closed bool
	exps   map[uint32]qp.Exposure
	draw   uint64 // splitmix64 state for keys and addresses
}

var (
	_ qp.Conn           = (*Conn)(nil)
	_ qp.RateLimiter    = (*Conn)(nil)
	_ qp.INTReader      = (*Conn)(nil)
	_ qp.Receiver       = (*Receiver)(nil)
	_ qp.Exposer        = (*Receiver)(nil)
	_ sim.AccessChecker = (*Receiver)(nil)
	_ sim.QPHandler     = (*Conn)(nil)
	_ sim.QPHandler     = (*Receiver)(nil)
)

// Connect creates opts.QPs connected queue-pair pairs between hosts src
// and dst and returns the sender's Conn and the receiver's Receiver. The
// network must be built.
func Connect(net *sim.Network, src, dst *sim.Host, opts Options) (*Conn, *Receiver, error) {
	n := opts.QPs
	if n == 0 {
		n = 1
	}
	if n < 1 || n > 1024 {
		return nil, nil, fmt.Errorf("simqp: Options.QPs = %d (valid: 0 for 1, or 1..1024)", opts.QPs)
	}
	if opts.Rails != nil && len(opts.Rails) != n {
		return nil, nil, fmt.Errorf("simqp: Options.Rails has %d entries for %d QPs (valid: nil or one per QP)", len(opts.Rails), n)
	}
	if opts.SrcPorts != nil && len(opts.SrcPorts) != n {
		return nil, nil, fmt.Errorf("simqp: Options.SrcPorts has %d entries for %d QPs (valid: nil or one per QP)", len(opts.SrcPorts), n)
	}
	if src == dst {
		return nil, nil, fmt.Errorf("simqp: Connect from host %s to itself", src.Name())
	}
	rails := min(len(src.NICs()), len(dst.NICs()))
	c := &Conn{net: net}
	r := &Receiver{exps: map[uint32]qp.Exposure{}, draw: uint64(src.NIC(0).ID())<<32 | uint64(dst.NIC(0).ID())}
	for i := 0; i < n; i++ {
		rail := i % rails
		if opts.Rails != nil {
			rail = opts.Rails[i]
			if rail < 0 || rail >= rails {
				return nil, nil, fmt.Errorf("simqp: Options.Rails[%d] = %d (valid: 0..%d)", i, rail, rails-1)
			}
		}
		var sp uint16
		if opts.SrcPorts != nil {
			sp = opts.SrcPorts[i]
		}
		sq, err := src.NIC(rail).NewQP(sim.QPConfig{SrcPort: sp, RateLimit: opts.RateLimit, Handler: c, Path: i})
		if err != nil {
			return nil, nil, err
		}
		rq, err := dst.NIC(rail).NewQP(sim.QPConfig{Handler: r, Path: i, Region: opts.Region, Access: r})
		if err != nil {
			return nil, nil, err
		}
		if err := sq.Connect(rq); err != nil {
			return nil, nil, err
		}
		if net.PathOf(sq) == nil {
			return nil, nil, fmt.Errorf("simqp: no route from %s to %s", src.NIC(rail).Name(), dst.NIC(rail).Name())
		}
		c.qps = append(c.qps, sq)
		c.rqps = append(c.rqps, rq)
		r.qps = append(r.qps, rq)
		nic := src.NIC(rail)
		c.paths = append(c.paths, qp.PathInfo{
			QPN:      sq.QPN(),
			Device:   "sim:" + nic.Name(),
			Port:     1,
			NIC:      rail,
			SrcPort:  sq.SrcPort(),
			LineRate: nic.Port().Rate(),
			BaseRTT:  net.BaseRTT(sq).Duration(),
			MTU:      nic.Config().MTU,
			Hops:     len(net.PathOf(sq)) - 1,
		})
	}
	return c, r, nil
}

// entry is one completion with its INT stamps.
type entry struct {
	c    qp.Completion
	nh   int
	hops [sim.MaxHops]qp.INTHop
}

// ring is a growable FIFO of completions (a CQ that never overflows).
type ring struct {
	buf  []entry
	head int
	n    int
}

func (r *ring) push() *entry {
	if r.n == len(r.buf) {
		nb := make([]entry, max(64, 2*len(r.buf)))
		for i := 0; i < r.n; i++ {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	e := &r.buf[(r.head+r.n)%len(r.buf)]
	r.n++
	return e
}

func (r *ring) pop() *entry {
	e := &r.buf[r.head]
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return e
}

// SetNotify installs the hook called when a completion becomes pollable.
func (c *Conn) SetNotify(f func()) { c.notify = f }

// QPs returns the requester queue pairs, by path.
func (c *Conn) QPs() []*sim.QP { return c.qps }

// PeerQPs returns the responder queue pairs on the receiving host, by path.
func (c *Conn) PeerQPs() []*sim.QP { return c.rqps }

// Paths implements qp.Conn.
func (c *Conn) Paths() []qp.PathInfo { return c.paths }

// errClosed etc. are static so that failing calls allocate nothing.
var errBadPath = errors.New("simqp: path index out of range")

// PostSend implements qp.Conn.
func (c *Conn) PostSend(path int, wrs []qp.SendWR) (int, error) {
	if c.closed {
		return 0, qp.ErrClosed
	}
	if path < 0 || path >= len(c.qps) {
		return 0, errBadPath
	}
	return c.qps[path].PostSend(wrs)
}

// SendDone implements sim.QPHandler.
func (c *Conn) SendDone(q *sim.QP, wr *qp.SendWR, st qp.Status, at sim.Time, hops []qp.INTHop) {
	if c.closed {
		return
	}
	e := c.cq.push()
	e.c = qp.Completion{ID: wr.ID, Path: q.Path(), QPN: q.QPN(), Op: wr.Op, Status: st, Bytes: wr.Len, Imm: wr.Imm, At: at.VTime()}
	e.nh = copy(e.hops[:], hops)
	if c.notify != nil {
		c.notify()
	}
}

// RecvImm implements sim.QPHandler (requester QPs receive nothing).
func (c *Conn) RecvImm(*sim.QP, uint32, units.Bytes, sim.Time) {}

// Poll implements qp.Conn.
func (c *Conn) Poll(dst []qp.Completion) (int, error) {
	if c.closed {
		return 0, qp.ErrClosed
	}
	k := min(len(dst), c.cq.n)
	c.last = c.last[:0]
	for i := 0; i < k; i++ {
		e := c.cq.pop()
		dst[i] = e.c
		c.last = append(c.last, *e)
	}
	return k, nil
}

// INT implements qp.INTReader: the stamps of a completion returned by the
// latest Poll.
func (c *Conn) INT(id uint64, dst []qp.INTHop) int {
	for i := range c.last {
		if c.last[i].c.ID == id {
			return copy(dst, c.last[i].hops[:c.last[i].nh])
		}
	}
	return 0
}

// Counters implements qp.Conn: CE-marked packets the responder saw (the
// requests and writes) plus the READ responses the requester saw marked;
// CNPs the requester received for its requests and writes plus those it
// sent, as the notification point, for marked READ responses (the signal
// a pull's congestion control reacts to, as np_cnp_sent on a ConnectX);
// and go-back-N retransmissions.
func (c *Conn) Counters(path int) (qp.Counters, error) {
	if path < 0 || path >= len(c.qps) {
		return qp.Counters{}, errBadPath
	}
	s, r := c.qps[path].Counters(), c.rqps[path].Counters()
	return qp.Counters{ECNMarked: r.ECNMarked + s.ECNMarked, CNPReceived: s.CNPsReceived + s.CNPsSent, Retransmits: s.Retransmits}, nil
}

// SetRate implements qp.RateLimiter (ibv_modify_qp_rate_limit(3)); 0 or
// units.Unlimited removes the limit.
func (c *Conn) SetRate(path int, r units.BitRate) error {
	if path < 0 || path >= len(c.qps) {
		return errBadPath
	}
	if r == units.Unlimited {
		r = 0
	}
	return c.qps[path].SetRateLimit(r)
}

// Reset implements qp.Resetter: path's QP and its peer leave the error
// state and restart at a fresh PSN (sim.QP.Reset).
func (c *Conn) Reset(path int) error {
	if path < 0 || path >= len(c.qps) {
		return errBadPath
	}
	return c.qps[path].Reset(c.rqps[path])
}

// Caps implements qp.Conn.
func (c *Conn) Caps() qp.Caps {
	depth, rd := 0, 0
	if len(c.qps) > 0 {
		depth = c.qps[0].SendQueueDepth()
		rd = c.qps[0].NIC().Config().MaxRdAtomic
	}
	return qp.Caps{
		CarriesData: false, Timestamps: true, ECNCounters: true, CNPCounters: true, INT: true,
		HWRateLimit: true, MaxSendWR: depth, MaxMessageBytes: sim.MaxMessage, Read: true, MaxReadWR: rd,
	}
}

// Close implements qp.Conn: the QPs move to the error state and their
// outstanding work requests are dropped. Close is idempotent.
func (c *Conn) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	for _, q := range c.qps {
		q.Close()
	}
	return nil
}

// SetNotify installs the hook called when a receive completion becomes
// pollable.
func (r *Receiver) SetNotify(f func()) { r.notify = f }

// QPs returns the responder queue pairs, by path.
func (r *Receiver) QPs() []*sim.QP { return r.qps }

// SendDone implements sim.QPHandler (responders post nothing).
func (r *Receiver) SendDone(*sim.QP, *qp.SendWR, qp.Status, sim.Time, []qp.INTHop) {}

// RecvImm implements sim.QPHandler.
func (r *Receiver) RecvImm(q *sim.QP, imm uint32, n units.Bytes, at sim.Time) {
	if r.closed {
		return
	}
	e := r.cq.push()
	e.c = qp.Completion{Path: q.Path(), QPN: q.QPN(), Op: qp.OpRecvImm, Status: qp.StatusOK, Bytes: n, Imm: imm, At: at.VTime()}
	e.nh = 0
	if r.notify != nil {
		r.notify()
	}
}

// Poll implements qp.Receiver.
func (r *Receiver) Poll(dst []qp.Completion) (int, error) {
	if r.closed {
		return 0, qp.ErrClosed
	}
	k := min(len(dst), r.cq.n)
	for i := 0; i < k; i++ {
		dst[i] = r.cq.pop().c
	}
	return k, nil
}

// Region implements qp.Receiver: the simulator carries no data.
func (r *Receiver) Region() []byte { return nil }

// Close implements qp.Receiver; it revokes every exposure. It is
// idempotent.
func (r *Receiver) Close() error {
	r.closed = true
	clear(r.exps)
	return nil
}

// Expose implements qp.Exposer. The simulator carries no data: only
// len(mem) matters (ExposeRange exposes a length without memory).
func (r *Receiver) Expose(mem []byte, access qp.Access) (qp.Exposure, error) {
	return r.ExposeRange(units.Bytes(len(mem)), access)
}

// ExposeRange exposes n bytes that exist only as a length: a key and a
// page-aligned address drawn from the receiver's seeded sequence (the
// same construction gives the same keys).
func (r *Receiver) ExposeRange(n units.Bytes, access qp.Access) (qp.Exposure, error) {
	if r.closed {
		return qp.Exposure{}, qp.ErrClosed
	}
	if access == 0 || access&^qp.AccessMask != 0 {
		return qp.Exposure{}, fmt.Errorf("simqp: Expose: access %#x (valid: AccessRead, AccessWrite or both)", uint8(access))
	}
	if n <= 0 || n > units.TiB {
		return qp.Exposure{}, fmt.Errorf("simqp: Expose: %d bytes (valid: 1 byte to 1 TiB)", int64(n))
	}
	var key uint32
	for key == 0 || r.exps[key].Key != 0 {
		key = uint32(r.next())
	}
	e := qp.Exposure{Key: key, Addr: 1<<32 + r.next()%(1<<34)<<12, Len: n, Access: access}
	r.exps[key] = e
	return e, nil
}

func (r *Receiver) next() uint64 {
	r.draw += 0x9e3779b97f4a7c15
	z := r.draw
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// RevokeKey implements qp.Exposer: the responder QPs refuse key from now on.
func (r *Receiver) RevokeKey(key uint32) error {
	if r.exps[key].Key == 0 {
		return fmt.Errorf("simqp: Revoke: key %#x is not exposed", key)
	}
	delete(r.exps, key)
	return nil
}

// Allowed implements sim.AccessChecker for the receiver's QPs.
func (r *Receiver) Allowed(key uint32, addr, n int64, need qp.Access) bool {
	e, ok := r.exps[key]
	if !ok || e.Access&need == 0 || addr < 0 || n < 0 || uint64(addr) < e.Addr {
		return false
	}
	off := uint64(addr) - e.Addr
	return off <= uint64(e.Len) && uint64(n) <= uint64(e.Len)-off
}

// Stepper is the driver contract: Step feeds everything that happened up to
// now to the engine, posts what it allows, and returns the next instant it
// wants to run (0: none).
type Stepper interface {
	Step(now vtime.Time) (next vtime.Time)
}

// Driver runs a Stepper inside a world: one coalesced Step event per burst
// of notifications, and one timer at the deadline the last Step returned.
// The zero value is not usable; call Drive.
type Driver struct {
	w       *sim.World
	s       Stepper
	pending bool
	stopped bool
	stepEv  stepEvent
	timer   sim.Timer
	steps   uint64
}

type stepEvent struct{ d *Driver }

func (e *stepEvent) Fire(now sim.Time) { e.d.step(now) }

// Drive starts driving s in w: a first Step runs at the current instant.
// Install d.Notify as the notify hook of the Conns and Receivers s polls.
func Drive(w *sim.World, s Stepper) *Driver {
	d := &Driver{w: w, s: s}
	d.stepEv.d = d
	d.timer.Init(w, &d.stepEv)
	d.Notify()
	return d
}

// Notify schedules a Step at the current instant unless one is pending.
func (d *Driver) Notify() {
	if d.pending || d.stopped {
		return
	}
	d.pending = true
	d.w.At(d.w.Now(), &d.stepEv)
}

// Stop stops driving: no further Steps run.
func (d *Driver) Stop() {
	d.stopped = true
	d.timer.Stop()
}

// Steps returns how many times Step ran.
func (d *Driver) Steps() uint64 { return d.steps }

func (d *Driver) step(now sim.Time) {
	d.pending = false
	if d.stopped {
		return
	}
	d.steps++
	next := d.s.Step(now.VTime())
	if next == 0 {
		d.timer.Stop()
		return
	}
	at := sim.FromVTime(next)
	if at <= now {
		// A deadline already due: run again at the next nanosecond, so
		// virtual time advances.
		at = (now/sim.Nanosecond + 1) * sim.Nanosecond
	}
	d.timer.Reset(at)
}
