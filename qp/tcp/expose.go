package tcp

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// One-sided access (qp.Exposer): the Receiver exposes ranges of memory to
// its sender by key. A keyed frame (opRead, opWriteKey, opWriteImmKey)
// carries the key after its header and names an address in the key's
// space; the receiving path checks it against the exposure (the key, the
// range, the right) before it touches a byte, and answers a violation
// with the NAK a write outside the region gets (remote access error: the
// sender's path enters the error state, as an RC queue pair does). A READ
// is answered, in frame order, by a READ response on the path's
// connection: a 12-byte header (type 0x83, seq, length) and the bytes.
// The bytes move through a per-path buffer, respPiece at a time, each
// piece copied under the exposures' read lock: RevokeKey takes the write
// lock, so once it returns nothing reads or writes the range. A READ
// response whose range is revoked while it is being sent cannot be
// completed: the path's connection is closed (the sender's path fails, as
// an RC requester's does when its responder's memory region goes away).

// exposure is one range the receiver exposed.
type exposure struct {
	qp.Exposure
	mem []byte
}

// Expose implements qp.Exposer. The key is drawn at random (crypto/rand),
// nonzero and not in use; the address is a random page-aligned base in
// [2^32, 2^46), as a user-space virtual address would be, so that a
// stale or foreign descriptor is unlikely to name a live range.
func (r *Receiver) Expose(mem []byte, access qp.Access) (qp.Exposure, error) {
	if access == 0 || access&^qp.AccessMask != 0 {
		return qp.Exposure{}, fmt.Errorf("tcp: Expose: access %#x (valid: AccessRead, AccessWrite or both)", uint8(access))
	}
	if len(mem) == 0 {
		return qp.Exposure{}, fmt.Errorf("tcp: Expose: empty range (valid: at least 1 byte)")
	}
	var b [12]byte
	r.expMu.Lock()
	defer r.expMu.Unlock()
	if r.isClosed.Load() {
		return qp.Exposure{}, qp.ErrClosed
	}
	if r.exps == nil {
		r.exps = map[uint32]*exposure{}
	}
	var key uint32
	for key == 0 || r.exps[key] != nil {
		if _, err := rand.Read(b[:]); err != nil {
			return qp.Exposure{}, fmt.Errorf("tcp: Expose: %w", err)
		}
		key = binary.BigEndian.Uint32(b[:4])
	}
	addr := 1<<32 + binary.BigEndian.Uint64(b[4:])%(1<<34)<<12
	e := &exposure{Exposure: qp.Exposure{Key: key, Addr: addr, Len: units.Bytes(len(mem)), Access: access}, mem: mem}
	r.exps[key] = e
	return e.Exposure, nil
}

// RevokeKey implements qp.Exposer.
func (r *Receiver) RevokeKey(key uint32) error {
	r.expMu.Lock()
	defer r.expMu.Unlock()
	if r.exps[key] == nil {
		return fmt.Errorf("tcp: RevokeKey: key %#x is not exposed", key)
	}
	delete(r.exps, key)
	return nil
}

// span returns the bytes of e that [addr, addr+n) names, if it lies
// within e.
func (e *exposure) span(addr uint64, n uint64) ([]byte, bool) {
	if addr < e.Addr {
		return nil, false
	}
	off := addr - e.Addr
	if off > uint64(e.Len) || n > uint64(e.Len)-off {
		return nil, false
	}
	return e.mem[off : off+n], true
}

// lookup returns the exposure h names if it allows need over h's range.
// Called with expMu held (read).
func (r *Receiver) lookup(h *header, need qp.Access) *exposure {
	e := r.exps[h.key]
	if e == nil || e.Access&need == 0 {
		return nil
	}
	if _, ok := e.span(h.remote, uint64(h.length)); !ok {
		return nil
	}
	return e
}

// keyed carries out keyed frame h on conn: a READ is answered with its
// response, a keyed write's payload is read and applied. refused means a
// remote access error (the caller NAKs it), consumed that the frame's
// payload has been read (a write refused half-way, its range revoked); an
// error means conn cannot go on (the caller closes it).
func (p *recvPath) keyed(conn *net.TCPConn, h *header) (refused, consumed bool, err error) {
	r := p.r
	need := qp.AccessWrite
	if h.op == opRead {
		need = qp.AccessRead
	}
	r.expMu.RLock()
	e := r.lookup(h, need)
	r.expMu.RUnlock()
	if e == nil {
		return true, false, nil
	}
	if p.scratch == nil {
		p.scratch = make([]byte, respPiece)
	}
	if h.op == opRead {
		return false, false, p.respond(conn, h, e)
	}
	// A keyed write: piece by piece through scratch, each applied only
	// if the exposure is still the one checked.
	for off := uint64(0); off < uint64(h.length); {
		n := min(uint64(h.length)-off, respPiece)
		if _, err := io.ReadFull(p.br, p.scratch[:n]); err != nil {
			return false, false, err
		}
		r.expMu.RLock()
		live := r.exps[h.key] == e
		if live {
			dst, _ := e.span(h.remote+off, n)
			copy(dst, p.scratch[:n])
		}
		r.expMu.RUnlock()
		off += n
		if !live {
			if _, err := p.br.Discard(int(uint64(h.length) - off)); err != nil {
				return false, true, err
			}
			return true, true, nil
		}
	}
	p.applied.Add(int64(h.length))
	return false, false, nil
}

// respond sends the response to READ h of exposure e: it waits until the
// path holds no receive completion back (the response acknowledges every
// frame before it), then writes the response header and the bytes, a
// piece at a time, each copied while the exposure is live.
func (p *recvPath) respond(conn *net.TCPConn, h *header, e *exposure) error {
	r := p.r
	if !r.drained(p) {
		return net.ErrClosed
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	putResp(&p.resp, h.seq, h.length)
	raceSend()
	if _, err := conn.Write(p.resp[:]); err != nil {
		return err
	}
	for off := uint64(0); off < uint64(h.length); {
		n := min(uint64(h.length)-off, respPiece)
		r.expMu.RLock()
		live := r.exps[h.key] == e
		if live {
			src, _ := e.span(h.remote+off, n)
			copy(p.scratch[:n], src)
		}
		r.expMu.RUnlock()
		if !live {
			return fmt.Errorf("tcp: exposure %#x revoked during a READ response", h.key)
		}
		if _, err := conn.Write(p.scratch[:n]); err != nil {
			return err
		}
		off += n
	}
	p.acked = h.seq
	return nil
}

// drained waits until p holds no receive completion back (Poll releases
// them). It reports false if the Receiver was closed or p's connection is
// being replaced.
func (r *Receiver) drained(p *recvPath) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p.heldLen() > 0 && !r.closed && !p.closing {
		r.waiters++
		r.space.Wait()
		r.waiters--
	}
	return !r.closed && !p.closing
}
