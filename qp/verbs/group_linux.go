//go:build linux && cgo

package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// group is one connection's resources on one NIC, a node under the NIC's
// PD created in this order (and so closed in the reverse one): the
// connection's own protection domain if it has one, completion channel,
// completion queue(s), shared receive queue, the watcher that turns
// channel events into wakeups, queue pairs, memory windows or the region's
// MR.
type group struct {
	nic  *nic
	node *node
	// pd holds the group's QPs, SRQ and windows or region MR: the NIC's
	// host-wide PD, or the connection's own (see newGroup).
	pd   *C.struct_ibv_pd
	ch   *C.struct_ibv_comp_channel
	cq   *C.struct_ibv_cq    // data CQ: send completions (sender) or receive completions (receiver)
	cqx  *C.struct_ibv_cq_ex // cq's extended form when polled with the extended API
	ts   tsKind
	ctl  *C.struct_ibv_cq // receiver: control CQ for memory-window binds
	srq  *C.struct_ibv_srq
	conv tsConv
}

// cqMode is a test knob: which completion-queue API to use.
type cqMode uint8

const (
	cqAuto     cqMode = iota // extended CQ when the device has timestamps, plain otherwise
	cqPlain                  // ibv_create_cq(3) and ibv_poll_cq(3)
	cqExtended               // ibv_create_cq_ex(3) and ibv_start_poll(3), even without timestamps
)

// forceCQ overrides cqAuto in tests.
var forceCQ = cqAuto

// newGroup creates the group node, its completion channel and data CQ with
// cqe entries, and, for a receiver, a control CQ and an SRQ of srqDepth.
//
// With ownPD the group gets a protection domain of its own
// (ibv_alloc_pd(3)) for its QPs, SRQ and MRs: a receiver that exposes its
// region through an MR (AccessMR) does so, because an MR's rkey is valid
// on every QP of its PD (ibv_reg_mr(3)), and in the host-wide PD that
// would let another connection's sender write this connection's region.
// Memory windows (AccessMemoryWindow) are bound to one QP and must share
// the pool MR's PD; the sender's QPs must share it too, for the pool's
// lkey.
func newGroup(n *nic, label string, cqe int, srqDepth int, clock vtime.Clock, ownPD bool) (*group, error) {
	g := &group{nic: n, pd: n.pd}
	name := n.dev.Name + " " + label
	g.node = newNode(n.pdNode, "connection", name, nil)
	ok := false
	defer func() {
		if !ok {
			_ = g.node.close()
		}
	}()
	if ownPD {
		// The group's first child, so closed last, after everything in it.
		pd, err := C.ibv_alloc_pd(n.ctx)
		if pd == nil {
			return nil, nilErr("ibv_alloc_pd", name, err)
		}
		g.pd = pd
		newNode(g.node, "PD", name, func() error {
			if rc := C.ibv_dealloc_pd(pd); rc != 0 {
				return callErr("ibv_dealloc_pd", name, rc)
			}
			return nil
		})
	}
	ch, err := C.ibv_create_comp_channel(n.ctx)
	if ch == nil {
		return nil, nilErr("ibv_create_comp_channel", name, err)
	}
	g.ch = ch
	newNode(g.node, "completion channel", name, func() error {
		if rc := C.ibv_destroy_comp_channel(ch); rc != 0 {
			return callErr("ibv_destroy_comp_channel", name, rc)
		}
		return nil
	})
	if max := n.dev.Caps.MaxCQE; max > 0 && cqe > max {
		return nil, fmt.Errorf("verbs: %s: a CQ of %d entries exceeds the device's max_cqe %d; lower QPsPerNIC, MaxSendWR or SRQDepth", name, cqe, max)
	}
	mode := forceCQ
	if mode == cqAuto {
		mode = cqPlain
		if n.dev.Caps.Timestamps {
			mode = cqExtended
		}
	}
	if mode == cqExtended {
		ts := tsNone
		if n.dev.Caps.Timestamps {
			ts = tsRaw
		}
		cqx, err := C.mptx_create_cq_ex(n.ctx, C.int(cqe), ch, C.int(ts))
		if cqx == nil && ts == tsRaw {
			ts = tsNone // the provider may refuse timestamps; fall back
			cqx, err = C.mptx_create_cq_ex(n.ctx, C.int(cqe), ch, C.int(ts))
		}
		if cqx == nil {
			return nil, nilErr("ibv_create_cq_ex", name, err)
		}
		g.cqx, g.cq, g.ts = cqx, C.mptx_cq_ex_to_cq(cqx), ts
		if ts == tsRaw && clock != nil {
			var raw C.uint64_t
			if C.mptx_rt_raw_clock(n.ctx, &raw) == 0 {
				g.conv = newRawConv(n.dev.Caps.CoreClockKHz, n.dev.Caps.TimestampMask, uint64(raw), clock.Now())
			} else {
				g.ts = tsNone
			}
		}
	} else {
		cq, err := C.ibv_create_cq(n.ctx, C.int(cqe), nil, ch, 0)
		if cq == nil {
			return nil, nilErr("ibv_create_cq", name, err)
		}
		g.cq = cq
	}
	cq := g.cq
	newNode(g.node, "CQ", name, func() error {
		if rc := C.ibv_destroy_cq(cq); rc != 0 {
			return callErr("ibv_destroy_cq", name, rc)
		}
		return nil
	})
	if srqDepth > 0 {
		ctl, err := C.ibv_create_cq(n.ctx, 64, nil, nil, 0)
		if ctl == nil {
			return nil, nilErr("ibv_create_cq", name+" control", err)
		}
		g.ctl = ctl
		newNode(g.node, "CQ", name+" control", func() error {
			if rc := C.ibv_destroy_cq(ctl); rc != 0 {
				return callErr("ibv_destroy_cq", name, rc)
			}
			return nil
		})
		srq, err := C.mptx_create_srq(g.pd, C.uint32_t(srqDepth))
		if srq == nil {
			return nil, nilErr("ibv_create_srq", name, err)
		}
		g.srq = srq
		newNode(g.node, "SRQ", name, func() error {
			if rc := C.ibv_destroy_srq(srq); rc != 0 {
				return callErr("ibv_destroy_srq", name, rc)
			}
			return nil
		})
	}
	ok = true
	return g, nil
}

// watch hangs a wakeup watcher on the group's completion channel; it is
// stopped before the CQ is destroyed.
func (g *group) watch(nt *notifier) error {
	if err := nt.watch(g.ch, g.cq, g.nic.dev.Name+" completions"); err != nil {
		return err
	}
	w := nt.watchers[len(nt.watchers)-1]
	newNode(g.node, "completion watcher", g.nic.dev.Name, func() error { w.stop(); return nil })
	return nil
}

// qpEnd is one local queue pair of a path.
type qpEnd struct {
	qp     *C.struct_ibv_qp
	qpn    uint32
	psn    uint32
	maxWR  int
	inline int
	health *health
	rdOut  int // max_rd_atomic: READs the QP keeps outstanding as a requester
}

// maxRdAtomic is the most RDMA READs mptx lets a QP have outstanding, as a
// requester (max_rd_atomic) and as a responder (max_dest_rd_atomic), below
// the device's own limits (ConnectX: 16 each; rdma_rxe: 128).
const maxRdAtomic = 16

// rdAtomic returns min(maxRdAtomic, device limit), at least 1 (a device
// that reports 0 takes 1).
func rdAtomic(dev int) int { return max(1, min(maxRdAtomic, dev)) }

// createQP creates an RC QP in the group (ibv_create_qp(3)) and moves it to
// INIT (ibv_modify_qp(3)) with the given remote access.
func (g *group) createQP(scq, rcq *C.struct_ibv_cq, srq *C.struct_ibv_srq, maxSendWR, maxInline int, access int) (*qpEnd, error) {
	n := g.nic
	if max := n.dev.Caps.MaxQPWR; max > 0 && maxSendWR > max {
		return nil, fmt.Errorf("verbs: QPConfig.MaxSendWR = %d exceeds %s's max_qp_wr %d", maxSendWR, n.dev.Name, max)
	}
	var caps C.struct_ibv_qp_cap
	q, err := C.mptx_create_qp(g.pd, scq, rcq, srq, C.uint32_t(maxSendWR), 0, C.uint32_t(maxInline), &caps)
	if q == nil {
		return nil, nilErr("ibv_create_qp", n.dev.Name, err)
	}
	e := &qpEnd{qp: q, qpn: uint32(q.qp_num), psn: randPSN(), maxWR: int(caps.max_send_wr), inline: int(caps.max_inline_data), health: &health{}}
	name := n.dev.Name + " QP " + strconv.FormatUint(uint64(e.qpn), 16)
	qpn := e.qpn
	newNode(g.node, "QP", name, func() error {
		n.qps.Delete(qpn)
		if rc := C.ibv_destroy_qp(q); rc != 0 {
			return callErr("ibv_destroy_qp", name, rc)
		}
		return nil
	})
	n.qps.Store(qpn, e.health)
	if rc := C.mptx_qp_init(q, C.uint8_t(n.port.Num), C.int(access)); rc != 0 {
		return nil, callErr("ibv_modify_qp(INIT)", name, rc)
	}
	return e, nil
}

// reconnect brings q back from any state (the error state, typically)
// through RESET → INIT → RTR → RTS (ibv_modify_qp(3)) towards the same
// remote QP, with a fresh send PSN (q.psn) and the remote's fresh one.
// Outstanding work requests were flushed or are discarded by RESET.
func (g *group) reconnect(q *qpEnd, access int, remote bootstrap.Endpoint, mtu units.Bytes, fl uint32, cfg QPConfig) error {
	name := g.nic.dev.Name + " QP " + strconv.FormatUint(uint64(q.qpn), 16)
	if rc := C.mptx_qp_reset(q.qp); rc != 0 {
		return callErr("ibv_modify_qp(RESET)", name, rc)
	}
	if rc := C.mptx_qp_init(q.qp, C.uint8_t(g.nic.port.Num), C.int(access)); rc != 0 {
		return callErr("ibv_modify_qp(INIT)", name, rc)
	}
	return g.connect(q, remote, mtu, fl, cfg)
}

// connect moves q to RTR towards the remote endpoint and then to RTS
// (ibv_modify_qp(3)). mtu is the negotiated path MTU in bytes.
func (g *group) connect(q *qpEnd, remote bootstrap.Endpoint, mtu units.Bytes, fl uint32, cfg QPConfig) error {
	n := g.nic
	name := n.dev.Name + " QP " + strconv.FormatUint(uint64(q.qpn), 16)
	dgid := (*C.uint8_t)(cAlloc(16))
	defer cFree(unsafe.Pointer(dgid))
	copy(unsafe.Slice((*byte)(unsafe.Pointer(dgid)), 16), remote.GID[:])
	rc := C.mptx_qp_rtr(q.qp, C.uint8_t(n.port.Num), C.int(n.gid.Index), dgid, C.uint32_t(remote.QPN),
		C.uint32_t(remote.PSN), C.int(mtuEnum(mtu)), C.uint32_t(fl), C.uint8_t(cfg.TrafficClass),
		C.uint8_t(cfg.HopLimit), C.uint8_t(rnrCode(cfg.MinRNRTimer)), C.uint8_t(rdAtomic(n.dev.Caps.MaxQPRdAtom)))
	if rc != 0 {
		return callErr("ibv_modify_qp(RTR)", name, rc)
	}
	q.rdOut = rdAtomic(n.dev.Caps.MaxQPInitRdAtom)
	rc = C.mptx_qp_rts(q.qp, C.uint32_t(q.psn), C.uint8_t(timeoutExp(cfg.Timeout)), C.uint8_t(cfg.RetryCount), C.uint8_t(cfg.RNRRetry), C.uint8_t(q.rdOut))
	if rc != 0 {
		return callErr("ibv_modify_qp(RTS)", name, rc)
	}
	return nil
}

// randPSN returns a random 24-bit packet sequence number.
func randPSN() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:]) & 0xFFFFFF
}

// endpoint describes a local QP for the peer.
func (g *group) endpoint(q *qpEnd, nicIdx int, mtu units.Bytes) bootstrap.Endpoint {
	return bootstrap.Endpoint{QPN: q.qpn, PSN: q.psn, GID: g.nic.gid.Raw, MTU: uint32(mtu), NIC: uint16(nicIdx), Device: g.nic.dev.Name}
}

// cqSet is the C-side poll set of a connection: one data CQ per group.
func fillCQSet(set *C.struct_mptx_cqset, groups []*group, rwrs []*C.struct_ibv_recv_wr, recvBatch int) error {
	if len(groups) > C.MPTX_MAX_CQ {
		return fmt.Errorf("verbs: %d NICs in one connection, at most %d", len(groups), C.MPTX_MAX_CQ)
	}
	set.n = C.int32_t(len(groups))
	set.recv_batch = C.int32_t(recvBatch)
	for i, g := range groups {
		set.cq[i] = g.cq
		set.cqx[i] = g.cqx
		set.ts[i] = C.int32_t(g.ts)
		if g.srq != nil {
			set.srq[i] = g.srq
			set.rwr[i] = rwrs[i]
		}
	}
	return nil
}

// resyncClock renews the raw-timestamp mapping of groups with device
// timestamps (see tsConv).
func resyncClock(groups []*group, clock vtime.Clock) {
	if clock == nil {
		return
	}
	for _, g := range groups {
		if g.ts != tsRaw {
			continue
		}
		var raw C.uint64_t
		if C.mptx_rt_raw_clock(g.nic.ctx, &raw) == 0 {
			g.conv = newRawConv(g.nic.dev.Caps.CoreClockKHz, g.nic.dev.Caps.TimestampMask, uint64(raw), clock.Now())
		}
	}
}

// resyncEvery is how often raw timestamp mappings are renewed.
const resyncEvery = time.Second
