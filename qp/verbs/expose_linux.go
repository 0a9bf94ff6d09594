//go:build linux && cgo

package verbs

// #include "shim.h"
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// Expose implements qp.Exposer: it registers mem with each NIC the
// connection's paths use (ibv_reg_mr(3) with IBV_ACCESS_REMOTE_READ for
// AccessRead, IBV_ACCESS_REMOTE_WRITE and IBV_ACCESS_LOCAL_WRITE for
// AccessWrite), in the connection's own protection domain, so that the
// rkeys open exactly mem, with exactly those rights, to this connection's
// QPs and no other's; the NIC checks every READ and keyed WRITE against
// them and answers anything else with a remote access error (the
// requester's QP then fails with IBV_WC_REM_ACCESS_ERR). Each NIC's
// registration has its own rkey: the Exposure's PathKeys holds the one of
// each path (nil when all paths share one NIC). The address is mem's
// virtual address.
//
// mem must not be Go heap memory (cgo pointer rules: the NIC reads and
// writes it behind the garbage collector's back): map it with mmap(2) or
// take it from Host.Alloc. Exposure needs the connection's own protection
// domain (Access AccessMR, which AccessAuto picks on rdma_rxe): with
// memory windows the receiving QPs share the NIC's PD, and exposures as
// type 2 windows (bound per QP, rebound by each path reset) are not
// implemented, so Expose refuses.
func (r *Receiver) Expose(mem []byte, access qp.Access) (qp.Exposure, error) {
	if access == 0 || access&^qp.AccessMask != 0 {
		return qp.Exposure{}, fmt.Errorf("verbs: Expose: access %#x (valid: AccessRead, AccessWrite or both)", uint8(access))
	}
	if len(mem) == 0 {
		return qp.Exposure{}, fmt.Errorf("verbs: Expose: empty range (valid: at least 1 byte)")
	}
	if r.access != AccessMR {
		return qp.Exposure{}, fmt.Errorf("verbs: Expose: %w: the receiver grants access with memory windows in the NIC's shared protection domain; one-sided exposures need its own (ListenConfig.Access = AccessMR)", qp.ErrNotSupported)
	}
	flags := 0
	if access&qp.AccessRead != 0 {
		flags |= C.IBV_ACCESS_REMOTE_READ
	}
	if access&qp.AccessWrite != 0 {
		flags |= C.IBV_ACCESS_REMOTE_WRITE | C.IBV_ACCESS_LOCAL_WRITE
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.expClosed {
		return qp.Exposure{}, qp.ErrClosed
	}
	var nodes []*node
	fail := func(err error) (qp.Exposure, error) {
		for _, nd := range nodes {
			_ = nd.close()
		}
		return qp.Exposure{}, err
	}
	mrs := map[*group]*C.struct_ibv_mr{}
	keys := make([]uint32, len(r.rp))
	same := true
	for i := range r.rp {
		g := r.rp[i].g
		mr := mrs[g]
		if mr == nil {
			var nd *node
			var err error
			mr, nd, err = regMR(g.node, g.pd, unsafe.Pointer(&mem[0]), len(mem), flags, g.nic.dev.Name+" exposed range")
			if err != nil {
				return fail(fmt.Errorf("verbs: Expose: %w", err))
			}
			mrs[g] = mr
			nodes = append(nodes, nd)
		}
		keys[i] = uint32(mr.rkey)
		same = same && keys[i] == keys[0]
	}
	if len(keys) == 0 {
		return fail(fmt.Errorf("verbs: Expose: the receiver has no paths"))
	}
	e := qp.Exposure{Key: keys[0], Addr: uint64(uintptr(unsafe.Pointer(&mem[0]))), Len: units.Bytes(len(mem)), Access: access}
	if !same {
		e.PathKeys = keys
	}
	if r.exps == nil {
		r.exps = map[uint32][]*node{}
	}
	if r.exps[e.Key] != nil {
		return fail(fmt.Errorf("verbs: BUG: Expose: rkey %#x is live twice", e.Key))
	}
	r.exps[e.Key] = nodes
	return e, nil
}

// RevokeKey implements qp.Exposer: the exposure's memory regions are
// deregistered (ibv_dereg_mr(3)); the NIC refuses their rkeys from then
// on.
func (r *Receiver) RevokeKey(key uint32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	nodes, ok := r.exps[key]
	if !ok {
		return fmt.Errorf("verbs: RevokeKey: key %#x is not exposed", key)
	}
	delete(r.exps, key)
	var first error
	for _, nd := range nodes {
		if err := nd.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// closeExposures revokes every exposure; Expose refuses afterwards
// (teardown).
func (r *Receiver) closeExposures() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expClosed = true
	var first error
	for k, nodes := range r.exps {
		for _, nd := range nodes {
			if err := nd.close(); err != nil && first == nil {
				first = err
			}
		}
		delete(r.exps, k)
	}
	return first
}
