//go:build linux && cgo

package verbs

/*
#include "shim.h"
*/
import "C"

// Hooks used by tests (cgo cannot appear in _test.go files).

// breakPath forces path's QP into the error state (ibv_modify_qp(3) to
// IBV_QPS_ERR), as a fatal device error would: every outstanding and later
// work request on it completes with IBV_WC_WR_FLUSH_ERR.
func (c *Conn) breakPath(path int) error {
	p := &c.sp[path]
	return callErr("ibv_modify_qp(ERR)", p.g.nic.dev.Name, C.mptx_qp_to_error(p.q.qp))
}

// view returns a Buffer over [off, off+n) of b sharing b's registrations;
// freeing the view does nothing.
func (b *Buffer) view(off, n int) *Buffer {
	v := &Buffer{h: b.h, mem: b.mem[off : off+n : off+n], off: -1, mrs: b.mrs}
	v.freed.Store(true)
	return v
}

// aim points path's writes at addr with rkey, as a sender that learned
// another connection's region address and key would.
func (c *Conn) aim(path int, addr uint64, rkey uint32) {
	c.rAddr = addr
	c.sp[path].rkey = rkey
}

// regionAddr returns the virtual address of the receiver's region.
func (r *Receiver) regionAddr() uint64 { return r.region.addr() }

// testBeforeReady, if set, runs in Dial just before it sends Ready: a test
// makes a sender go silent there.
var testBeforeReady func()

// inRTS reports whether path's QP is in the ready-to-send state
// (ibv_query_qp(3)).
func (c *Conn) inRTS(path int) bool {
	return C.mptx_qp_state(c.sp[path].q.qp) == C.IBV_QPS_RTS
}
