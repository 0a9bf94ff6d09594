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
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

const (
	// postBatch is the most work requests one ibv_post_send crossing
	// carries; PostSend splits longer slices.
	postBatch = 64
	// pollBatch is the most completions one poll crossing returns.
	pollBatch = 64
)

// Conn is the sender's side of a verbs connection to one peer: QPsPerNIC RC
// queue pairs on each chosen NIC, all writing into the one region the
// receiver advertised. It implements qp.Conn, qp.RateLimiter and
// qp.Notifier.
//
// Each NIC's QPs share one send CQ; Poll drains all of them in a single
// cgo crossing (mptx_poll in shim.c). Work requests are posted signalled,
// so every SendWR yields exactly one Completion, in order per path. Work
// request ids are the caller's slot indices, stored in C memory; no Go
// pointer reaches C or the NIC.
//
// A Conn is used by one goroutine (the driver), except that Close may be
// called from another once the driver has stopped.
type Conn struct {
	h       *Host
	cfg     DialConfig
	sess    *bootstrap.Session
	in      *bootstrap.Inbox // DialSession: the control frames routed to us; nil: we read sess
	ownSess bool             // Dial: sess is ours to close
	groups  []*group
	nodes   []*node
	paths   []qp.PathInfo
	sp      []sendPath
	byCQ    [][]int // CQ index → paths on it
	set     *C.struct_mptx_cqset
	wcs     *C.struct_mptx_wc
	scratch *C.struct_ibv_wc
	nt      *notifier
	caps    qp.Caps
	rAddr   uint64
	rLen    units.Bytes
	maxMsg  units.Bytes
	lastSyn vtime.Time
	rateErr error
	receipt *Receipt // a Receipt that arrived while Reset waited for its ack
	// resetSeq numbers Reset's ResetPath frames (the last one sent):
	// awaitResetAck drops the late answers of earlier resets.
	resetSeq uint32
	closed   bool
	cleanup  runtime.Cleanup
}

// sendPath is one path's sender state. The WR, SGE and input arrays are C
// memory reused by every post.
type sendPath struct {
	q      *qpEnd
	g      *group
	nicIdx int // index into Host.nics
	cqIdx  int
	lkey   uint32
	rkey   uint32
	in     *C.struct_mptx_wr
	wrs    *C.struct_ibv_send_wr
	sges   *C.struct_ibv_sge
	ring   []opRec // posted, not yet completed, in order
	head   int
	n      int
	remote bootstrap.Endpoint // the receiver's QP
	mtu    units.Bytes
	fl     uint32
}

// opRec remembers what a posted work request was: RC completes a QP's
// requests in order, so the ring's head is the request the next completion
// on the path belongs to (send completions do not say WRITE from WRITE WITH
// IMM, nor carry a length).
type opRec struct {
	id  uint64
	op  qp.Opcode
	len units.Bytes
}

var _ qp.Conn = (*Conn)(nil)
var _ qp.RateLimiter = (*Conn)(nil)
var _ qp.Notifier = (*Conn)(nil)
var _ qp.Resetter = (*Conn)(nil)

// Paths describes the connection's paths, in path-index order.
func (c *Conn) Paths() []qp.PathInfo { return c.paths }

// Caps reports what the connection can do.
func (c *Conn) Caps() qp.Caps { return c.caps }

// Region returns the receiver's advertised region: its remote address and
// length. SendWR.Remote offsets are relative to it.
func (c *Conn) Region() (addr uint64, length units.Bytes) { return c.rAddr, c.rLen }

// Send returns the send region.
func (c *Conn) Send() *Buffer { return c.cfg.Send }

// PostSend posts wrs on path as one chain per postBatch requests
// (ibv_post_send(3)), each signalled, WRITE or WRITE WITH IMM (imm_data in
// network order). It checks every request against the send region and
// the largest message before posting; the remote range is enforced by the
// receiver's NIC, which completes a write outside the advertised region
// with qp.StatusRemoteAccess and changes nothing there. It returns
// qp.ErrQueueFull when the path's send queue has no room for the rest. A
// path whose QP failed or whose port is down returns an error wrapping
// ErrPathDown. It does not allocate unless it fails.
func (c *Conn) PostSend(path int, wrs []qp.SendWR) (int, error) {
	return c.post(path, wrs, true)
}

func (c *Conn) post(path int, wrs []qp.SendWR, check bool) (int, error) {
	if c.closed {
		return 0, qp.ErrClosed
	}
	if uint(path) >= uint(len(c.sp)) {
		return 0, fmt.Errorf("verbs: PostSend: path %d, want 0..%d", path, len(c.sp)-1)
	}
	p := &c.sp[path]
	if err := p.q.health.failed(); err != nil {
		return 0, err
	}
	if e := p.g.nic.portDown.Load(); e != nil {
		return 0, *e
	}
	sendLen := c.cfg.Send.Len()
	laddr := c.cfg.Send.addr()
	inline := units.Bytes(p.q.inline)
	in := unsafe.Slice(p.in, postBatch)
	posted := 0
	for posted < len(wrs) {
		room := len(p.ring) - p.n
		if room == 0 {
			return posted, qp.ErrQueueFull
		}
		k := min(len(wrs)-posted, postBatch, room)
		for i := 0; i < k; i++ {
			w := &wrs[posted+i]
			if check {
				if err := c.checkWR(posted+i, w, sendLen); err != nil {
					return posted, err
				}
			}
			d := &in[i]
			d.id = C.uint64_t(w.ID)
			d.laddr = C.uint64_t(laddr + uint64(w.Local))
			d.raddr = C.uint64_t(c.rAddr + uint64(w.Remote))
			d.len = C.uint32_t(w.Len)
			d.lkey = C.uint32_t(p.lkey)
			d.rkey = C.uint32_t(p.rkey)
			if w.RKey != 0 { // an exposed range: Remote is its address (qp.Exposure)
				d.raddr, d.rkey = C.uint64_t(w.Remote), C.uint32_t(w.RKey)
			}
			d.imm = C.uint32_t(w.Imm)
			d.op = C.uint32_t(w.Op)
			d.flags = 0
			if w.Len > 0 && w.Len <= inline {
				d.flags = C.IBV_SEND_INLINE // copied at post: no DMA read of the buffer
			}
		}
		res := C.mptx_post_send(p.q.qp, p.in, C.int(k), p.wrs, p.sges)
		for i := 0; i < int(res.posted); i++ {
			w := &wrs[posted+i]
			p.ring[(p.head+p.n)%len(p.ring)] = opRec{id: w.ID, op: w.Op, len: w.Len}
			p.n++
		}
		posted += int(res.posted)
		if res.err != 0 {
			return posted, c.postFailed(p, syscall.Errno(res.err))
		}
	}
	return posted, nil
}

func (c *Conn) checkWR(i int, w *qp.SendWR, sendLen units.Bytes) error {
	switch {
	case w.Op != qp.OpWrite && w.Op != qp.OpWriteImm && w.Op != qp.OpRead:
		return fmt.Errorf("verbs: PostSend: wr[%d].Op = %v, want WRITE, WRITE_WITH_IMM or RDMA_READ", i, w.Op)
	case w.Op == qp.OpRead && w.Len == 0:
		return fmt.Errorf("verbs: PostSend: wr[%d] is a zero-length READ (valid: 1 byte and up)", i)
	case w.Len < 0 || w.Len > c.maxMsg:
		return fmt.Errorf("verbs: PostSend: wr[%d].Len = %d, want 0..%d (the ports' max_msg_sz)", i, int64(w.Len), int64(c.maxMsg))
	case w.Len == 0 && w.Op == qp.OpWrite:
		return fmt.Errorf("verbs: PostSend: wr[%d] is a zero-length WRITE; only WRITE_WITH_IMM may be empty", i)
	case w.Local < 0 || w.Local+w.Len > sendLen:
		return fmt.Errorf("verbs: PostSend: wr[%d] local range [%d, %d) outside the send region [0, %d)", i, int64(w.Local), int64(w.Local+w.Len), int64(sendLen))
	case w.Remote < 0:
		return fmt.Errorf("verbs: PostSend: wr[%d].Remote = %d, want >= 0", i, int64(w.Remote))
	}
	return nil
}

// postFailed explains a failed ibv_post_send and marks the path down when
// its QP has left RTS.
func (c *Conn) postFailed(p *sendPath, errno syscall.Errno) error {
	err := error(verbError("ibv_post_send", p.g.nic.dev.Name, errno))
	if errno == syscall.ENOMEM {
		return fmt.Errorf("%w: %w", qp.ErrQueueFull, err)
	}
	if st := C.mptx_qp_state(p.q.qp); st != C.IBV_QPS_RTS {
		p.q.health.fail(fmt.Errorf("%w: QP %#x is in state %d, not RTS: %w", ErrPathDown, p.q.qpn, int(st), err))
		return p.q.health.failed()
	}
	return err
}

// Poll moves up to len(dst) send completions into dst, polling every NIC's
// CQ in one crossing per pollBatch (ibv_poll_cq(3), or ibv_start_poll(3)
// with device timestamps). A completion with an error status marks its
// path down. Completion.At is the device's timestamp when it has one,
// else the DialConfig.Clock reading taken once per batch, else 0. It never
// blocks and does not allocate unless a path fails.
func (c *Conn) Poll(dst []qp.Completion) (int, error) {
	if c.closed {
		return 0, qp.ErrClosed
	}
	got := 0
	var now vtime.Time
	for got < len(dst) {
		want := min(len(dst)-got, pollBatch)
		r := int(C.mptx_poll(c.set, c.wcs, C.int(want), c.scratch))
		if r < 0 {
			return got, verbError("ibv_poll_cq", "", syscall.Errno(-r))
		}
		if r == 0 {
			break
		}
		if now == 0 && c.cfg.Clock != nil {
			now = c.cfg.Clock.Now()
		}
		wcs := unsafe.Slice(c.wcs, r)
		for i := range wcs {
			c.convert(&wcs[i], &dst[got+i], now)
		}
		got += r
		if r < want {
			break
		}
	}
	if now != 0 && c.caps.Timestamps && now.Sub(c.lastSyn) > resyncEvery {
		resyncClock(c.groups, c.cfg.Clock)
		c.lastSyn = now
	}
	return got, nil
}

func (c *Conn) convert(w *C.struct_mptx_wc, d *qp.Completion, now vtime.Time) {
	cqi := int(w.cq)
	qpn := uint32(w.qpn)
	path := -1
	for _, pi := range c.byCQ[cqi] {
		if c.sp[pi].q.qpn == qpn {
			path = pi
			break
		}
	}
	*d = qp.Completion{ID: uint64(w.id), Path: path, QPN: qpn, Status: statusOf(int(w.status)), Op: qp.OpWrite}
	g := c.groups[cqi]
	if g.ts != tsNone && w.ts != 0 {
		d.At = g.conv.at(uint64(w.ts))
	} else {
		d.At = now
	}
	if path < 0 {
		return
	}
	p := &c.sp[path]
	// The head is this completion's request (RC completes in order) unless
	// the completion predates a Reset that emptied the ring.
	if p.n == 0 || p.ring[p.head].id != d.ID {
		return // stale: flushed by a Reset that emptied the ring
	}
	rec := p.ring[p.head]
	p.head = (p.head + 1) % len(p.ring)
	p.n--
	d.Op, d.Bytes = rec.op, rec.len
	if d.Status != qp.StatusOK && p.q.health.failed() == nil {
		p.q.health.fail(fmt.Errorf("%w: QP %#x on %s: completion status %q (vendor error %#x)",
			ErrPathDown, qpn, p.g.nic.dev.Name, wcStatusString(int(w.status)), uint32(w.vendor_err)))
	}
}

// Outstanding returns the work requests posted on path and not yet
// completed.
func (c *Conn) Outstanding(path int) int { return c.sp[path].n }

// PathErr returns why path is down, nil while it is up.
func (c *Conn) PathErr(path int) error {
	p := &c.sp[path]
	if err := p.q.health.failed(); err != nil {
		return err
	}
	if e := p.g.nic.portDown.Load(); e != nil {
		return *e
	}
	return nil
}

// Counters reads path's NIC port counters (see counters.go: per port, not
// per QP). It does not allocate.
func (c *Conn) Counters(path int) (qp.Counters, error) {
	if uint(path) >= uint(len(c.sp)) {
		return qp.Counters{}, fmt.Errorf("verbs: Counters: path %d, want 0..%d", path, len(c.sp)-1)
	}
	return c.sp[path].g.nic.counters.read()
}

// SetRate sets path's hardware rate limit (ibv_modify_qp_rate_limit(3)),
// rounded to kbit/s and clamped to the device's range; units.Unlimited
// removes the limit. Devices without a limiter (Caps().HWRateLimit false,
// e.g. Soft-RoCE) return an error wrapping qp.ErrNotSupported: the driver
// then paces segments in software.
func (c *Conn) SetRate(path int, r units.BitRate) error {
	if c.rateErr != nil {
		return c.rateErr
	}
	if uint(path) >= uint(len(c.sp)) {
		return fmt.Errorf("verbs: SetRate: path %d, want 0..%d", path, len(c.sp)-1)
	}
	p := &c.sp[path]
	caps := p.g.nic.dev.Caps
	kbps := uint32(0)
	if r != units.Unlimited {
		k := int64(r / units.Kbps)
		k = max(k, int64(caps.RateLimitMinKbps))
		k = min(k, int64(caps.RateLimitMaxKbps))
		kbps = uint32(k)
	}
	return callErr("ibv_modify_qp_rate_limit", p.g.nic.dev.Name, C.mptx_rate_limit(p.q.qp, C.uint32_t(kbps)))
}

// Notify returns the channel that receives a value when send completions
// may be pollable (see qp.Notifier): the same channel on every call,
// capacity 1. The CQs are kept armed by the completion-channel watchers
// (ibv_req_notify_cq(3)); Notify re-arms them too, which is harmless.
func (c *Conn) Notify() <-chan struct{} {
	if c.closed {
		c.nt.signal()
		return c.nt.ch
	}
	return c.nt.arm(c.set)
}

// Announce tells the receiver about a transfer (its engine slot, chunk
// plan and offset) over the control connection and waits until the
// receiver tracks it; only then may its chunks be posted, or their
// immediates would arrive for a slot the receiver does not know.
func (c *Conn) Announce(ctx context.Context, t *Transfer) error {
	if err := c.sess.SendTransfer(ctx, t); err != nil {
		return err
	}
	typ, m, err := c.recvCtl(ctx)
	if err != nil {
		return err
	}
	if typ != bootstrap.TypeTransferAck {
		return fmt.Errorf("%w: got %s, want TransferAck", bootstrap.ErrProtocol, typ)
	}
	if ack := m.(*Transfer); ack.ID != t.ID {
		return fmt.Errorf("%w: receiver acknowledged transfer %d, we announced %d", bootstrap.ErrProtocol, ack.ID, t.ID)
	}
	return nil
}

// AwaitReceipt waits for the receiver's verdict on the transfer (its CRC
// check and byte count), sent over the control connection once it has
// every byte.
func (c *Conn) AwaitReceipt(ctx context.Context) (*Receipt, error) {
	if r := c.receipt; r != nil {
		c.receipt = nil
		return r, nil
	}
	typ, m, err := c.recvCtl(ctx)
	if err != nil {
		return nil, err
	}
	if typ != bootstrap.TypeReceipt {
		return nil, fmt.Errorf("%w: got %s, want Receipt", bootstrap.ErrProtocol, typ)
	}
	return m.(*Receipt), nil
}

// recvCtl reads the next control frame meant for this connection, decoded
// (bootstrap.Decode): from the Inbox a DialSession connection was given,
// else from the control connection itself.
func (c *Conn) recvCtl(ctx context.Context) (bootstrap.Type, any, error) {
	if c.in == nil {
		return c.sess.Recv(ctx)
	}
	t, payload, err := c.in.Recv(ctx)
	if err != nil {
		return 0, nil, err
	}
	m, err := bootstrap.Decode(t, payload)
	return t, m, err
}

// resetTimeout bounds the control round trip of Reset.
const resetTimeout = 10 * time.Second

// Reset fences path and brings it back (qp.Resetter), whatever state its
// queue pair is in:
//
//  1. A queue pair that is not in the error state (a stall: the engine
//     gave up waiting on it, or a healthy path) is first moved to it
//     (ibv_modify_qp(3) to IBV_QPS_ERR): it stops transmitting, and its
//     outstanding work requests complete with IBV_WC_WR_FLUSH_ERR.
//  2. The receiver resets its end over the control connection (ResetPath):
//     RESET → INIT → RTR → RTS expecting our fresh PSN. Packets of the old
//     incarnation still in the network then carry PSNs it no longer
//     expects, and it drops them (a duplicate is acknowledged without
//     being executed, a PSN ahead of the expected one draws a sequence
//     NAK; IBTA 9.9.2, rxe_resp.c check_psn), so nothing of the fenced work
//     requests lands in its region or reaches its completion queue once
//     Reset has returned.
//  3. This end goes RESET → INIT → RTR → RTS with that PSN.
//
// Flush completions still in the CQ after Reset are reported as before but
// no longer matched to posted requests (and do not mark the path down
// again); the engine ignores them as stale. A path whose port is down
// gets step 1 only, which flushes its work requests, and is refused with
// ErrPathDown (probing it would only time out). Reset blocks for one
// control round trip.
func (c *Conn) Reset(path int) error {
	if c.closed {
		return qp.ErrClosed
	}
	if uint(path) >= uint(len(c.sp)) {
		return fmt.Errorf("verbs: Reset: path %d, want 0..%d", path, len(c.sp)-1)
	}
	p := &c.sp[path]
	// Step 1 even when the port is down: a local transition that flushes
	// the outstanding work requests. Left to their RC retries, READs whose
	// requests had left before the port went down never completed on rxe
	// (16 MiB of them outstanding 5 minutes later, the pull never ended).
	if st := C.mptx_qp_state(p.q.qp); st != C.IBV_QPS_ERR && st != C.IBV_QPS_RESET {
		if rc := C.mptx_qp_to_error(p.q.qp); rc != 0 {
			return callErr("ibv_modify_qp(ERR)", p.g.nic.dev.Name, rc)
		}
	}
	if e := p.g.nic.portDown.Load(); e != nil {
		return *e
	}
	ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
	defer cancel()
	psn := randPSN()
	c.resetSeq++
	if err := c.sess.SendResetPath(ctx, &bootstrap.ResetPath{Path: uint16(path), QPN: p.q.qpn, PSN: psn, Seq: c.resetSeq}); err != nil {
		return err
	}
	ack, err := awaitResetAck(ctx, c.recvCtl, c.resetSeq, func(r *Receipt) { c.receipt = r })
	if err != nil {
		return err
	}
	if !ack.OK || int(ack.Path) != path {
		return fmt.Errorf("verbs: Reset(path %d): the receiver could not reset its end: %s", path, ack.Message)
	}
	p.q.psn = psn
	remote := p.remote
	remote.PSN = ack.PSN
	if err := p.g.reconnect(p.q, 0, remote, p.mtu, p.fl, c.cfg.QP); err != nil {
		return err
	}
	if ack.Rkey != 0 {
		p.rkey = ack.Rkey
	}
	p.head, p.n = 0, 0
	p.q.health.clear()
	return nil
}

// Close destroys the connection's QPs, CQs and completion channels and
// closes the control connection; outstanding work requests are dropped.
// It is idempotent.
func (c *Conn) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.cleanup.Stop()
	c.h.untrackConn(c)
	return c.teardown()
}

func (c *Conn) teardown() error {
	var errs []error
	c.nt.stop()
	for _, n := range c.nodes {
		errs = append(errs, n.close())
	}
	for _, g := range c.groups {
		errs = append(errs, g.node.close())
	}
	if c.in != nil {
		c.in.Close()
	}
	if c.ownSess {
		errs = append(errs, c.sess.Close())
	}
	return errors.Join(errs...)
}
