//go:build linux && cgo

package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Listener accepts senders on a TCP address. It is safe for concurrent
// use; Accept may run on one goroutine while Close runs on another.
//
// Senders authenticate concurrently, before and independently of Accept
// (bootstrap.Listener): each connection has ListenConfig.HandshakeTimeout
// to authenticate and then as long again to send its Offer, and the
// listener holds at most MaxPending of them (MaxPendingPerSource
// unauthenticated ones per source), so peers that connect and stay
// silent cannot keep a sender that knows the secret out. Accept takes the
// authenticated offers in order and only then creates anything (region,
// QPs, memory windows) for them.
type Listener struct {
	h        *Host
	cfg      ListenConfig
	bl       *bootstrap.Listener
	nics     []*nic
	mu       sync.Mutex
	rejected int // set-up failures; authentication failures are bl's
}

// Listen listens for senders on addr (host:port; port 0 picks one).
func (h *Host) Listen(addr string, cfg ListenConfig) (*Listener, error) {
	cfg, err := cfg.withDefaults(h.PoolSize())
	if err != nil {
		return nil, err
	}
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	nics, err := h.pickNICs(cfg.NICs, -1)
	if err != nil {
		return nil, err
	}
	if cfg.Access == AccessMemoryWindow {
		for _, n := range nics {
			if !windowsConfine(n) {
				return nil, fmt.Errorf("verbs: ListenConfig.Access = memory-window but %s's windows cannot confine a peer (%s); use AccessAuto or AccessMR", n.dev.Name, windowProblem(n))
			}
		}
	}
	bl, err := bootstrap.Listen(addr, bootstrap.ListenConfig{
		Secret: cfg.Secret, HandshakeTimeout: cfg.HandshakeTimeout,
		MaxPending: cfg.MaxPending, MaxPendingPerSource: cfg.MaxPendingPerSource,
		OnReject: cfg.OnReject,
	})
	if err != nil {
		return nil, fmt.Errorf("verbs: %w", err)
	}
	return &Listener{h: h, cfg: cfg, bl: bl, nics: nics}, nil
}

// Addr returns the listening address.
func (l *Listener) Addr() net.Addr { return l.bl.Addr() }

// Rejected returns how many peers failed authentication or set-up, or
// were refused for room (see ListenConfig.OnReject).
func (l *Listener) Rejected() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rejected + l.bl.Rejected()
}

// Close stops listening and drops the senders Accept has not taken yet.
// Receivers already accepted stay open.
func (l *Listener) Close() error { return l.bl.Close() }

// Accept waits for an authenticated sender and sets up the transfer it
// offers: a region of the offered size (ListenConfig.Region, default
// Host.Alloc), one RC QP per sender path on the matching local NIC, each
// NIC's QPs sharing one SRQ and one receive CQ, and remote write access to
// exactly that region (see Access). A sender whose set-up fails, or who
// does not answer it with Ready within HandshakeTimeout, is reported to
// OnReject and Accept goes on to the next; before its proof verified,
// nothing was allocated for it. Accept returns ctx's error when ctx ends
// (the Listener stays open) and an error wrapping net.ErrClosed when the
// Listener is closed.
func (l *Listener) Accept(ctx context.Context) (*Receiver, error) {
	for {
		sess, offer, err := l.bl.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("verbs: accept: %w", err)
		}
		r, err := l.serve(ctx, sess, offer)
		if err == nil {
			return r, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		l.mu.Lock()
		l.rejected++
		l.mu.Unlock()
		if l.cfg.OnReject != nil {
			l.cfg.OnReject(sess.RemoteAddr(), err)
		}
	}
}

// serve sets up the transfer an authenticated sender offered. It owns
// sess: on failure it is closed.
func (l *Listener) serve(ctx context.Context, sess *bootstrap.Session, offer *bootstrap.Offer) (*Receiver, error) {
	r := &Receiver{h: l.h, cfg: l.cfg, sess: sess, ownSess: true, offer: offer, nt: newNotifier()}
	if err := r.setup(ctx, l.nics); err != nil {
		sess.SendAbort(ctx, err.Error())
		r.teardown()
		return nil, err
	}
	if !l.h.trackConn(r, r.Close) {
		r.teardown()
		return nil, fmt.Errorf("verbs: host closed during Accept")
	}
	r.cleanup = runtime.AddCleanup(r, leakedAll, r.nodes)
	return r, nil
}

// Receiver is the receiving side of one transfer: the advertised region,
// one RC QP per sender path, a shared receive queue and receive CQ per NIC.
// It implements qp.Receiver and qp.Notifier.
//
// The sender's chunks land in the region by RDMA WRITE; the last write of
// each chunk carries an immediate, which consumes one receive from the
// NIC's SRQ and produces the OpRecvImm completion Poll returns. Poll
// re-posts as many zero-length receives as it consumed, in the same cgo
// crossing, so the SRQ never drains while the driver keeps polling.
//
// A Receiver is used by one goroutine (the driver).
type Receiver struct {
	h       *Host
	cfg     ListenConfig
	sess    *bootstrap.Session
	in      *bootstrap.Inbox // AcceptSession: the control frames routed to us; nil: we read sess
	ownSess bool             // Listener.Accept: sess is ours to close
	offer   *bootstrap.Offer
	region  *Buffer
	size    uint64 // the advertised region's bytes: the offered size, or AcceptSession's whole region
	owned   bool   // region from Host.Alloc, freed by Close
	groups  []*group
	nodes   []*node
	paths   []qp.PathInfo
	rp      []recvPath
	byCQ    [][]int
	set     *C.struct_mptx_cqset
	wcs     *C.struct_mptx_wc
	scratch *C.struct_ibv_wc
	nt      *notifier
	access  Access
	grants  []*node // AccessMR: the region's MRs, closed by Revoke (windows are per path: rp[i].window)
	revoked bool
	// exps are the ranges exposed to the sender (Expose, expose_linux.go):
	// each key's memory regions, one per NIC. Guarded by mu.
	exps      map[uint32][]*node
	expClosed bool
	closed    bool
	cleanup   runtime.Cleanup

	// The control goroutine reads the control connection during the
	// transfer: announcements go to transfers, path resets are done on
	// the spot. mu guards what it shares with the driver's goroutine.
	transfers chan *Transfer
	ctlDone   chan struct{}
	ctlStop   context.CancelFunc // ends the control goroutine's reads (AcceptSession)
	mu        sync.Mutex
	ctlErr    error
}

type recvPath struct {
	q      *qpEnd
	g      *group
	rkey   uint32
	window *node // AccessMemoryWindow: the path's window, replaced by a reset
	mtu    units.Bytes
	fl     uint32
}

var _ qp.Receiver = (*Receiver)(nil)
var _ qp.Notifier = (*Receiver)(nil)
var _ qp.Exposer = (*Receiver)(nil)

// recvQPAccess is the receiving QPs' remote access (ibv_modify_qp(3)
// qp_access_flags): the sender may write (the region, keyed ranges) and
// read (ranges exposed with AccessRead). The QP flags only let a request
// in: each memory region or window still decides what it allows (the
// receive region is never readable).
const recvQPAccess = C.IBV_ACCESS_LOCAL_WRITE | C.IBV_ACCESS_REMOTE_WRITE | C.IBV_ACCESS_REMOTE_READ

func (r *Receiver) setup(ctx context.Context, nics []*nic) error {
	cfg := r.cfg
	o := r.offer
	size := units.Bytes(o.Size)
	if o.Size == 0 || size > cfg.MaxSize || o.Size > uint64(units.MaxBytes) {
		return fmt.Errorf("verbs: sender offers a %d-byte tensor; this receiver takes 1..%d (ListenConfig.MaxSize)", o.Size, int64(cfg.MaxSize))
	}
	var err error
	if cfg.Region != nil {
		r.region, err = cfg.Region(size)
	} else {
		r.region, err = r.h.Alloc(size)
		r.owned = err == nil
	}
	if err != nil {
		return err
	}
	if r.region.Len() < size {
		return fmt.Errorf("verbs: ListenConfig.Region returned %d bytes for a %d-byte offer", int64(r.region.Len()), int64(size))
	}
	r.size = o.Size
	if err := r.connect(ctx, nics); err != nil {
		return err
	}
	r.startControl(context.Background())
	return nil
}

// connect creates the receiving QPs for the sender's offered paths,
// exposes [region, region+size) on each, answers with Accept and waits for
// the sender's Ready.
func (r *Receiver) connect(ctx context.Context, nics []*nic) error {
	cfg := r.cfg
	o := r.offer
	// How the region is exposed decides the groups' PDs (newGroup).
	r.access = cfg.Access
	if r.access == AccessAuto {
		r.access = AccessMemoryWindow
		for _, p := range o.Paths {
			if !windowsConfine(nics[int(p.NIC)%len(nics)]) {
				r.access = AccessMR
			}
		}
	}
	// One group per local NIC the sender's NICs map onto.
	gOf := map[int]*group{}
	var gIdx []int
	for _, p := range o.Paths {
		li := int(p.NIC) % len(nics)
		if _, ok := gOf[li]; ok {
			continue
		}
		g, err := newGroup(nics[li], "receive", cfg.SRQDepth+16, cfg.SRQDepth, cfg.Clock, r.access == AccessMR)
		if err != nil {
			return err
		}
		gOf[li] = g
		gIdx = append(gIdx, li)
		r.groups = append(r.groups, g)
		r.nodes = append(r.nodes, g.node)
		if err := g.watch(r.nt); err != nil {
			return err
		}
	}
	cqIdx := map[*group]int{}
	for i, g := range r.groups {
		cqIdx[g] = i
	}
	r.byCQ = make([][]int, len(r.groups))
	acc := &bootstrap.Accept{RegionAddr: r.region.addr(), RegionLen: r.size}
	if r.access == AccessMemoryWindow {
		acc.Caps |= bootstrap.CapMemoryWindow
	}
	if o.Caps&bootstrap.CapCRC != 0 {
		acc.Caps |= bootstrap.CapCRC
	}
	regionMR := map[*group]*C.struct_ibv_mr{}
	var fls []uint32 // flow labels of the ACK direction, chosen once the QPs exist
	qs := make([]*qpEnd, len(o.Paths))
	for i, sp := range o.Paths {
		g := gOf[int(sp.NIC)%len(nics)]
		q, err := g.createQP(g.ctl, g.cq, g.srq, 8, 0, recvQPAccess)
		if err != nil {
			return err
		}
		qs[i] = q
	}
	{
		lq, rq := make([]uint32, len(qs)), make([]uint32, len(qs))
		for i := range qs {
			lq[i], rq[i] = qs[i].qpn, o.Paths[i].QPN
		}
		fls = pathFlowLabels(lq, rq)
	}
	for i, sp := range o.Paths {
		g := gOf[int(sp.NIC)%len(nics)]
		n := g.nic
		q := qs[i]
		mtu, err := pathMTU(n.port.ActiveMTU, sp.MTU, cfg.QP.MTU)
		if err != nil {
			return err
		}
		fl := fls[i]
		if err := g.connect(q, sp, mtu, fl, cfg.QP); err != nil {
			return err
		}
		rp := recvPath{q: q, g: g, mtu: mtu, fl: fl}
		switch r.access {
		case AccessMemoryWindow:
			if rp.rkey, rp.window, err = r.bindWindow(g, q); err != nil {
				return err
			}
		case AccessMR:
			// In the group's own PD: the rkey works on this
			// connection's QPs on the NIC and no other's.
			mr := regionMR[g]
			if mr == nil {
				var nd *node
				mr, nd, err = regMR(g.node, g.pd, unsafe.Pointer(&r.region.mem[0]), int(r.size),
					C.IBV_ACCESS_LOCAL_WRITE|C.IBV_ACCESS_REMOTE_WRITE, n.dev.Name+" receive region")
				if err != nil {
					return err
				}
				regionMR[g] = mr
				r.grants = append(r.grants, nd)
			}
			rp.rkey = uint32(mr.rkey)
		}
		r.rp = append(r.rp, rp)
		ci := cqIdx[g]
		r.byCQ[ci] = append(r.byCQ[ci], i)
		ep := g.endpoint(q, gIdx[ci], mtu)
		ep.Rkey = rp.rkey
		ep.FlowLabel = fl
		acc.Paths = append(acc.Paths, ep)
		r.paths = append(r.paths, qp.PathInfo{QPN: q.qpn, Device: n.dev.Name, Port: n.port.Num, NIC: ci,
			SrcPort: srcPort(q.qpn, fl), LineRate: n.port.Speed, MTU: mtu})
	}
	r.allocArrays()
	for i, g := range r.groups {
		if rc := C.mptx_srq_fill(g.srq, r.set.rwr[i], C.int(pollBatch), C.int(r.cfg.SRQDepth)); rc != 0 {
			return callErr("ibv_post_srq_recv", g.nic.dev.Name, rc)
		}
	}
	// The sender answers at once; one that stays silent is dropped after
	// HandshakeTimeout instead of holding Accept for ever.
	xctx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer cancel()
	if err := r.sess.SendAccept(xctx, acc); err != nil {
		return err
	}
	if err := r.sess.RecvReady(xctx); err != nil {
		return fmt.Errorf("verbs: waiting for the sender's Ready: %w", err)
	}
	return nil
}

// startControl starts the control goroutine; cancelling ctx (or closing
// the session it reads) stops it.
func (r *Receiver) startControl(ctx context.Context) {
	ctx, r.ctlStop = context.WithCancel(ctx)
	r.transfers = make(chan *Transfer, 16)
	r.ctlDone = make(chan struct{})
	go r.control(ctx)
}

// recvCtl reads the next control frame meant for the receiver, decoded:
// from its Inbox (AcceptSession), else from the control connection.
func (r *Receiver) recvCtl(ctx context.Context) (bootstrap.Type, any, error) {
	if r.in == nil {
		return r.sess.Recv(ctx)
	}
	t, payload, err := r.in.Recv(ctx)
	if err != nil {
		return 0, nil, err
	}
	m, err := bootstrap.Decode(t, payload)
	return t, m, err
}

// control serves the control connection until it closes: transfer
// announcements for AwaitTransfer, and path resets (ResetPath), which it
// carries out at once so that a sender blocked in Conn.Reset is answered
// even while this side's driver only polls.
func (r *Receiver) control(ctx context.Context) {
	defer close(r.ctlDone)
	defer close(r.transfers)
	for {
		t, m, err := r.recvCtl(ctx)
		if err == nil {
			switch t {
			case bootstrap.TypeTransfer:
				select {
				case r.transfers <- m.(*Transfer):
				case <-ctx.Done():
					err = ctx.Err()
				}
				if err == nil {
					continue
				}
			case bootstrap.TypeResetPath:
				ack := r.resetPath(m.(*bootstrap.ResetPath))
				err = r.sess.SendResetAck(ctx, ack)
				if err == nil {
					continue
				}
			default:
				err = fmt.Errorf("%w: unexpected %s during the transfer", bootstrap.ErrProtocol, t)
			}
		}
		r.mu.Lock()
		r.ctlErr = err
		r.mu.Unlock()
		return
	}
}

// resetPath brings the receiver's end of a path back (RESET → INIT → RTR →
// RTS, ibv_modify_qp(3)) expecting the sender's fresh PSN, with a fresh
// PSN of its own, and rebinds the path's window when the region is exposed
// through windows (a reset QP's type 2 windows are no longer usable).
func (r *Receiver) resetPath(m *bootstrap.ResetPath) *bootstrap.ResetAck {
	ack := &bootstrap.ResetAck{Path: m.Path, Seq: m.Seq}
	i := int(m.Path)
	if i >= len(r.rp) || r.offer.Paths[i].QPN != m.QPN {
		ack.Message = fmt.Sprintf("no path %d with sender QPN %#x", i, m.QPN)
		return ack
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.revoked {
		ack.Message = "the region was revoked"
		return ack
	}
	p := &r.rp[i]
	p.q.psn = randPSN()
	remote := r.offer.Paths[i]
	remote.PSN = m.PSN
	if err := p.g.reconnect(p.q, recvQPAccess, remote, p.mtu, p.fl, r.cfg.QP); err != nil {
		ack.Message = err.Error()
		return ack
	}
	if r.access == AccessMemoryWindow {
		// The old window goes first: windows must not pile up, one
		// per reset, until Revoke.
		if err := p.window.close(); err != nil {
			ack.Message = err.Error()
			return ack
		}
		rkey, window, err := r.bindWindow(p.g, p.q)
		if err != nil {
			ack.Message = err.Error()
			return ack
		}
		p.rkey, p.window = rkey, window
		ack.Rkey = rkey
	}
	ack.OK, ack.PSN = true, p.q.psn
	return ack
}

// allowUnconfinedWindows lets a test bind windows on rxe anyway, to watch
// the defect windowsConfine works around.
var allowUnconfinedWindows = false

// windowsConfine reports whether n's type 2 memory windows confine remote
// writes to the window. Deviation: Soft-RoCE is excluded although it
// advertises IBV_DEVICE_MEM_WINDOW_TYPE_2B. On Debian's 6.1 rdma_rxe a
// WRITE through a bound window that falls outside the window but inside
// the underlying MR succeeds (TestVMRxeWindowRangeUnchecked shows it): the
// responder checks the MR's range, not the window's. With the pool as the
// underlying MR that would open the whole pool to the peer, so on rxe
// AccessAuto registers a dedicated MR over exactly the region instead
// (AccessMR: one registration per transfer).
func windowsConfine(n *nic) bool {
	return windowProblem(n) == ""
}

func windowProblem(n *nic) string {
	switch {
	case !n.dev.Caps.MemoryWindowType2:
		return "no type 2 memory windows"
	case !n.mwAccess:
		return "the pool MR lacks IBV_ACCESS_MW_BIND"
	case n.dev.Soft() && !allowUnconfinedWindows:
		return "rdma_rxe checks window writes against the underlying MR's range only"
	}
	return ""
}

// bindWindow allocates a type 2 memory window (ibv_alloc_mw(3)) and binds
// it over exactly the region, for remote write, through q (IBV_WR_BIND_MW
// in ibv_post_send(3)); the returned rkey opens the region only on q. The
// window's node is the caller's to keep: Revoke and Close free it, or the
// path's next reset replaces it.
func (r *Receiver) bindWindow(g *group, q *qpEnd) (uint32, *node, error) {
	n := g.nic
	mw, err := C.ibv_alloc_mw(g.pd, C.IBV_MW_TYPE_2)
	if mw == nil {
		return 0, nil, nilErr("ibv_alloc_mw", n.dev.Name, err)
	}
	name := n.dev.Name + " window for QP " + strconv.FormatUint(uint64(q.qpn), 16)
	nd := newNode(g.node, "MW", name, func() error {
		if rc := C.ibv_dealloc_mw(mw); rc != 0 {
			return callErr("ibv_dealloc_mw", name, rc)
		}
		return nil
	})
	fail := func(err error) (uint32, *node, error) {
		_ = nd.close()
		return 0, nil, err
	}
	var rkey C.uint32_t
	if rc := C.mptx_bind_mw2(q.qp, mw, n.poolOrUserMR(r.region), C.uint64_t(r.region.addr()), C.uint64_t(r.size),
		C.IBV_ACCESS_REMOTE_WRITE, 1, &rkey); rc != 0 {
		return fail(callErr("ibv_post_send(BIND_MW)", name, rc))
	}
	var id C.uint64_t
	var st C.int
	if rc := C.mptx_wait_one(g.ctl, 1<<30, &id, &st); rc != 0 {
		return fail(callErr("ibv_poll_cq(BIND_MW)", name, C.int(rc)))
	}
	if st != 0 {
		return fail(fmt.Errorf("verbs: binding %s: completion status %q", name, wcStatusString(int(st))))
	}
	return uint32(rkey), nd, nil
}

// poolOrUserMR returns the MR on n that covers b.
func (n *nic) poolOrUserMR(b *Buffer) *C.struct_ibv_mr { return b.mrs[n.idx] }

func (r *Receiver) allocArrays() {
	szRWR := uintptr(pollBatch) * C.sizeof_struct_ibv_recv_wr
	total := uintptr(len(r.groups))*szRWR + C.sizeof_struct_mptx_cqset + pollBatch*C.sizeof_struct_mptx_wc + pollBatch*C.sizeof_struct_ibv_wc
	base := cAlloc(total)
	r.nodes = append(r.nodes, newNode(r.h.root, "C arrays", "receiver", func() error { cFree(base); return nil }))
	off := uintptr(0)
	at := func(n uintptr) unsafe.Pointer { p := unsafe.Add(base, off); off += n; return p }
	r.set = (*C.struct_mptx_cqset)(at(C.sizeof_struct_mptx_cqset))
	r.wcs = (*C.struct_mptx_wc)(at(pollBatch * C.sizeof_struct_mptx_wc))
	r.scratch = (*C.struct_ibv_wc)(at(pollBatch * C.sizeof_struct_ibv_wc))
	rwrs := make([]*C.struct_ibv_recv_wr, len(r.groups))
	for i := range r.groups {
		chain := (*C.struct_ibv_recv_wr)(at(szRWR))
		wrs := unsafe.Slice(chain, pollBatch)
		for k := range wrs {
			// Zero-SGE receives: WRITE WITH IMM places its data by rkey
			// and only consumes the receive for the immediate.
			wrs[k].wr_id = 0
			wrs[k].num_sge = 0
			if k+1 < pollBatch {
				wrs[k].next = &wrs[k+1]
			}
		}
		rwrs[i] = chain
	}
	_ = fillCQSet(r.set, r.groups, rwrs, pollBatch)
}

// RemoteAddr returns the sender's control-connection address.
func (r *Receiver) RemoteAddr() string { return r.sess.RemoteAddr().String() }

// Offer returns what the sender offered: tensor size, chunk size, CRC,
// name.
func (r *Receiver) Offer() *bootstrap.Offer { return r.offer }

// Paths describes the receiver's paths (its QPs), in the sender's path
// order.
func (r *Receiver) Paths() []qp.PathInfo { return r.paths }

// Access returns how the region was exposed.
func (r *Receiver) Access() Access { return r.access }

// Rkey returns the rkey the sender was given for path.
func (r *Receiver) Rkey(path int) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rp[path].rkey
}

// Region returns the advertised region's bytes (the tensor lands here).
// It is valid until Close.
func (r *Receiver) Region() []byte { return r.region.mem[:r.size] }

// Poll moves up to len(dst) receive completions (OpRecvImm, Imm in host
// order, Bytes the WRITE's length) into dst, polling every NIC's receive
// CQ and re-posting the consumed SRQ receives in one crossing per
// pollBatch. It never blocks and does not allocate.
func (r *Receiver) Poll(dst []qp.Completion) (int, error) {
	if r.closed {
		return 0, qp.ErrClosed
	}
	got := 0
	var now vtime.Time
	for got < len(dst) {
		want := min(len(dst)-got, pollBatch)
		n := int(C.mptx_poll(r.set, r.wcs, C.int(want), r.scratch))
		if n < 0 {
			return got, verbError("ibv_poll_cq", "", syscall.Errno(-n))
		}
		if n == 0 {
			break
		}
		if now == 0 && r.cfg.Clock != nil {
			now = r.cfg.Clock.Now()
		}
		wcs := unsafe.Slice(r.wcs, n)
		for i := range wcs {
			w := &wcs[i]
			cqi := int(w.cq)
			qpn := uint32(w.qpn)
			path := -1
			for _, pi := range r.byCQ[cqi] {
				if r.rp[pi].q.qpn == qpn {
					path = pi
					break
				}
			}
			d := &dst[got+i]
			*d = qp.Completion{Path: path, QPN: qpn, Op: qp.OpRecvImm, Status: statusOf(int(w.status)),
				Bytes: units.Bytes(w.len), Imm: uint32(w.imm), At: now}
			if g := r.groups[cqi]; g.ts != tsNone && w.ts != 0 {
				d.At = g.conv.at(uint64(w.ts))
			}
		}
		got += n
		if n < want {
			break
		}
	}
	return got, nil
}

// Notify returns the receive-completion wakeup channel, re-arming every
// receive CQ (ibv_req_notify_cq(3)); see qp.Notifier and Conn.Notify.
func (r *Receiver) Notify() <-chan struct{} {
	if r.closed {
		r.nt.signal()
		return r.nt.ch
	}
	return r.nt.arm(r.set)
}

// Revoke ends the sender's write access to the region: the memory windows
// are deallocated (ibv_dealloc_mw(3)), or the region's MRs deregistered,
// so any later WRITE fails at the sender with a remote access error and
// changes nothing here. Call it when the transfer is complete (Wait
// returned); Close calls it too. It is idempotent.
func (r *Receiver) Revoke() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.revoked {
		return nil
	}
	r.revoked = true
	var errs []error
	for i := range r.rp {
		if w := r.rp[i].window; w != nil {
			errs = append(errs, w.close())
		}
	}
	for _, nd := range r.grants {
		errs = append(errs, nd.close())
	}
	return errors.Join(errs...)
}

// AwaitTransfer waits for the sender's next transfer announcement
// (Conn.Announce). Track the transfer (mptx.Receiver.Expect), then call
// AckTransfer: the sender posts nothing before.
func (r *Receiver) AwaitTransfer(ctx context.Context) (*Transfer, error) {
	var t *Transfer
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case tr, ok := <-r.transfers:
		if !ok {
			r.mu.Lock()
			err := r.ctlErr
			r.mu.Unlock()
			return nil, fmt.Errorf("verbs: control connection: %w", err)
		}
		t = tr
	}
	if t.Remote > r.size || t.Size > r.size-t.Remote {
		err := fmt.Errorf("verbs: transfer %d of %d bytes at offset %d does not fit the %d-byte region", t.ID, t.Size, t.Remote, r.size)
		r.sess.SendAbort(ctx, err.Error())
		return nil, err
	}
	return t, nil
}

// AckTransfer releases the sender to post the announced transfer.
func (r *Receiver) AckTransfer(ctx context.Context, t *Transfer) error {
	return r.sess.SendTransferAck(ctx, t)
}

// SendReceipt tells the sender the verdict (byte count, CRC) over the
// control connection.
func (r *Receiver) SendReceipt(ctx context.Context, rc *Receipt) error {
	return r.sess.SendReceipt(ctx, rc)
}

// Close revokes the region, destroys the QPs, SRQs and CQs, frees the
// region if it came from the pool, and closes the control connection. It
// is idempotent.
func (r *Receiver) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.cleanup.Stop()
	r.h.untrackConn(r)
	return r.teardown()
}

func (r *Receiver) teardown() error {
	// Stop the control goroutine first: it may be resetting a QP.
	var errs []error
	if r.ownSess {
		errs = append(errs, r.sess.Close())
	}
	if r.ctlStop != nil {
		r.ctlStop()
	}
	if r.ctlDone != nil {
		<-r.ctlDone
	}
	if r.in != nil {
		r.in.Close()
	}
	errs = append(errs, r.Revoke(), r.closeExposures())
	r.nt.stop()
	for _, n := range r.nodes {
		errs = append(errs, n.close())
	}
	for _, g := range r.groups {
		errs = append(errs, g.node.close())
	}
	if r.owned && r.region != nil {
		errs = append(errs, r.region.Free())
	}
	return errors.Join(errs...)
}
