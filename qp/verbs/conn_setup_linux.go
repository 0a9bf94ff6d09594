//go:build linux && cgo

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"time"
	"unsafe"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Dial connects to the receiver listening at addr (host:port, TCP):
// authenticates with cfg.Secret (bootstrap), creates cfg.QPsPerNIC RC
// QPs per NIC, offers them with the tensor's size, connects each to the
// receiver's QP (INIT → RTR → RTS), and returns once the receiver has
// advertised its region. A receiver that does not know the secret gets
// nothing: Dial fails with bootstrap.ErrAuth before any QP exists. A ctx
// without a deadline gets DefaultDialTimeout, so that a receiver that goes
// silent cannot hold Dial for ever.
func (h *Host) Dial(ctx context.Context, addr string, cfg DialConfig) (*Conn, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDialTimeout)
		defer cancel()
	}
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	if cfg.Send.h != h {
		return nil, fmt.Errorf("verbs: DialConfig.Send belongs to another Host")
	}
	nics, err := h.pickNICs(cfg.NICs, cfg.Send.NUMANode())
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	tcp, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("verbs: dialing receiver %s: %w", addr, err)
	}
	sess, err := bootstrap.Client(ctx, tcp, cfg.Secret)
	if err != nil {
		return nil, err
	}
	c := &Conn{h: h, cfg: cfg, sess: sess, ownSess: true, nt: newNotifier()}
	if err := c.setup(ctx, nics); err != nil {
		sess.SendAbort(ctx, err.Error())
		c.teardown()
		return nil, err
	}
	if !h.trackConn(c, c.Close) {
		c.teardown()
		return nil, fmt.Errorf("verbs: host closed during Dial")
	}
	c.cleanup = runtime.AddCleanup(c, leakedAll, c.nodes)
	return c, nil
}

// pickNICs resolves names to host NICs, or, with none, prefers NICs on
// the buffer's NUMA node.
func (h *Host) pickNICs(names []string, node int) ([]*nic, error) {
	if len(names) == 0 {
		numa := make([]int, len(h.nics))
		for i, n := range h.nics {
			numa[i] = n.dev.NUMANode
		}
		var out []*nic
		for _, i := range preferLocal(numa, node) {
			out = append(out, h.nics[i])
		}
		return out, nil
	}
	var out []*nic
	for _, name := range names {
		var found *nic
		for _, n := range h.nics {
			if n.dev.Name == name {
				found = n
			}
		}
		if found == nil {
			var have []string
			for _, n := range h.nics {
				have = append(have, n.dev.Name)
			}
			return nil, fmt.Errorf("verbs: NIC %q is not open on this host (open: %v)", name, have)
		}
		out = append(out, found)
	}
	return out, nil
}

func (c *Conn) setup(ctx context.Context, nics []*nic) error {
	cfg := c.cfg
	q := cfg.QP
	// Groups and QPs.
	for _, n := range nics {
		g, err := newGroup(n, "send", cfg.QPsPerNIC*q.MaxSendWR+16, 0, cfg.Clock, false)
		if err != nil {
			return err
		}
		c.groups = append(c.groups, g)
		c.nodes = append(c.nodes, g.node)
		if err := g.watch(c.nt); err != nil {
			return err
		}
	}
	offer := &bootstrap.Offer{Size: uint64(cfg.Size), ChunkSize: uint64(cfg.ChunkSize), Name: cfg.Name}
	for _, n := range nics {
		if n.dev.Caps.Timestamps {
			offer.Caps |= bootstrap.CapTimestamps
		}
		if n.dev.Caps.HWRateLimit {
			offer.Caps |= bootstrap.CapHWRateLimit
		}
	}
	if cfg.CRC {
		offer.Caps |= bootstrap.CapCRC
		offer.CRC32C = cfg.CRC32C
	}
	c.byCQ = make([][]int, len(c.groups))
	for gi, g := range c.groups {
		for k := 0; k < cfg.QPsPerNIC; k++ {
			e, err := g.createQP(g.cq, g.cq, nil, q.MaxSendWR, q.MaxInline, 0)
			if err != nil {
				return err
			}
			c.sp = append(c.sp, sendPath{q: e, g: g, nicIdx: g.nic.idx, cqIdx: gi, lkey: c.cfg.Send.lkey(g.nic.idx)})
			c.byCQ[gi] = append(c.byCQ[gi], len(c.sp)-1)
			offer.Paths = append(offer.Paths, g.endpoint(e, gi, g.nic.port.ActiveMTU))
		}
	}
	if err := c.sess.SendOffer(ctx, offer); err != nil {
		return err
	}
	acc, err := c.sess.RecvAccept(ctx)
	if err != nil {
		return err
	}
	if err := checkAccept(acc, cfg.Size, len(c.sp)); err != nil {
		return err
	}
	c.rAddr, c.rLen = acc.RegionAddr, units.Bytes(acc.RegionLen)
	c.maxMsg = units.MaxBytes
	lq, rq := make([]uint32, len(c.sp)), make([]uint32, len(c.sp))
	for i := range c.sp {
		lq[i], rq[i] = c.sp[i].q.qpn, acc.Paths[i].QPN
	}
	fls := pathFlowLabels(lq, rq)
	for i := range c.sp {
		p := &c.sp[i]
		r := acc.Paths[i]
		n := p.g.nic
		mtu, err := pathMTU(n.port.ActiveMTU, r.MTU, q.MTU)
		if err != nil {
			return err
		}
		fl := fls[i]
		if err := p.g.connect(p.q, r, mtu, fl, q); err != nil {
			return err
		}
		p.rkey = r.Rkey
		p.remote, p.mtu, p.fl = r, mtu, fl
		c.paths = append(c.paths, qp.PathInfo{
			QPN:      p.q.qpn,
			Device:   n.dev.Name,
			Port:     n.port.Num,
			NIC:      p.cqIdx,
			SrcPort:  srcPort(p.q.qpn, fl),
			LineRate: n.port.Speed,
			MTU:      mtu,
		})
		if n.port.MaxMsg > 0 && n.port.MaxMsg < c.maxMsg {
			c.maxMsg = n.port.MaxMsg
		}
	}
	c.allocArrays()
	c.caps = qp.Caps{CarriesData: true, MaxSendWR: q.MaxSendWR, MaxInlineData: q.MaxInline, MaxMessageBytes: c.maxMsg,
		Timestamps: true, HWRateLimit: true, ECNCounters: true, CNPCounters: true, Read: true, MaxReadWR: maxRdAtomic}
	for _, p := range c.sp {
		c.caps.MaxReadWR = min(c.caps.MaxReadWR, p.q.rdOut)
	}
	for _, g := range c.groups {
		d := g.nic.dev
		c.caps.Timestamps = c.caps.Timestamps && g.ts != tsNone
		c.caps.HWRateLimit = c.caps.HWRateLimit && d.Caps.HWRateLimit
		c.caps.ECNCounters = c.caps.ECNCounters && len(g.nic.counters.ecn) > 0
		c.caps.CNPCounters = c.caps.CNPCounters && len(g.nic.counters.cnp) > 0
	}
	for _, p := range c.sp {
		c.caps.MaxInlineData = min(c.caps.MaxInlineData, p.q.inline)
	}
	if !c.caps.HWRateLimit {
		c.rateErr = fmt.Errorf("verbs: SetRate: %w (no per-QP rate limiter: packet_pacing_caps.qp_rate_limit_max is 0; pace in software)", qp.ErrNotSupported)
	}
	if cfg.RTTProbes > 0 {
		if err := c.measureRTT(ctx, cfg.RTTProbes); err != nil {
			return err
		}
	}
	// Ready only once every path carried its probes: the receiver's
	// end is in place and the peer is reachable on every path.
	if testBeforeReady != nil {
		testBeforeReady()
	}
	return c.sess.SendReady(ctx)
}

// probeID marks the work requests of measureRTT (never an engine slot).
const probeID = 1 << 63

// measureRTT sends n zero-length WRITE WITH IMM probes (immediate
// 0xFFFFFFFF, chunk.ProbeImm) on each path, one outstanding at a time, and
// records the smallest post-to-completion time as the path's BaseRTT. The
// receiver counts them as probes.
func (c *Conn) measureRTT(ctx context.Context, n int) error {
	clock := vtime.NewMonotonic()
	buf := make([]qp.Completion, 8)
	for i := range c.sp {
		best := time.Duration(0)
		for k := 0; k < n; k++ {
			wr := []qp.SendWR{{ID: probeID | uint64(k), Op: qp.OpWriteImm, Imm: 0xFFFFFFFF}}
			start := clock.Now()
			if _, err := c.PostSend(i, wr); err != nil {
				return fmt.Errorf("verbs: RTT probe on path %d: %w", i, err)
			}
			for got := false; !got; {
				m, err := c.Poll(buf)
				if err != nil {
					return err
				}
				for _, cq := range buf[:m] {
					if cq.Status != qp.StatusOK {
						return fmt.Errorf("verbs: RTT probe on path %d (%s QP %#x): %v", cq.Path, c.paths[cq.Path].Device, cq.QPN, cq.Status)
					}
					got = true
				}
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("verbs: RTT probe on path %d: %w", i, err)
				}
				if !got {
					runtime.Gosched()
				}
			}
			if d := clock.Now().Sub(start); best == 0 || d < best {
				best = d
			}
		}
		c.paths[i].BaseRTT = best
	}
	return nil
}

// allocArrays allocates the C arrays of the hot path in one block freed by
// a node under the host root.
func (c *Conn) allocArrays() {
	szIn := uintptr(postBatch) * C.sizeof_struct_mptx_wr
	szWR := uintptr(postBatch) * C.sizeof_struct_ibv_send_wr
	szSGE := uintptr(postBatch) * C.sizeof_struct_ibv_sge
	per := szIn + szWR + szSGE
	total := per*uintptr(len(c.sp)) + C.sizeof_struct_mptx_cqset + pollBatch*C.sizeof_struct_mptx_wc + pollBatch*C.sizeof_struct_ibv_wc
	base := cAlloc(total)
	c.nodes = append(c.nodes, newNode(c.h.root, "C arrays", "conn", func() error { cFree(base); return nil }))
	off := uintptr(0)
	at := func(n uintptr) unsafe.Pointer { p := unsafe.Add(base, off); off += n; return p }
	c.set = (*C.struct_mptx_cqset)(at(C.sizeof_struct_mptx_cqset))
	c.wcs = (*C.struct_mptx_wc)(at(pollBatch * C.sizeof_struct_mptx_wc))
	c.scratch = (*C.struct_ibv_wc)(at(pollBatch * C.sizeof_struct_ibv_wc))
	for i := range c.sp {
		p := &c.sp[i]
		p.in = (*C.struct_mptx_wr)(at(szIn))
		p.wrs = (*C.struct_ibv_send_wr)(at(szWR))
		p.sges = (*C.struct_ibv_sge)(at(szSGE))
		p.ring = make([]opRec, c.cfg.QP.MaxSendWR) // the CQ is sized for this many per QP
	}
	_ = fillCQSet(c.set, c.groups, nil, 0)
}
