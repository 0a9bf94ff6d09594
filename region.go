package mptx

import (
	"context"
	"fmt"
	"sync"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// One-sided access, the accepting end: memory is registered once
// (Session.Register) and ranges of it are exposed to the peer with rights
// (Region.Expose), each as a Descriptor the application passes to the
// dialing end, which then reads (Session.Read) or writes (Session.Write)
// them without the accepting application taking part. This is the
// disaggregated-serving pull (NIXL, Mooncake): a decode worker reads the
// KV-cache blocks it needs out of the prefill worker's memory when it is
// ready for them.

// Region is memory the accepting end of a session registered for its
// peer's one-sided access (Session.Register). Its methods are safe for
// concurrent use. A Region lives until Close or the session's end; the
// memory must stay valid (and, where the transport registers it with a
// NIC, must not move) until then.
type Region struct {
	s   *Session
	exp qp.Exposer
	buf []byte

	mu     sync.Mutex
	keys   map[uint32]Descriptor // live exposures
	closed bool
}

// Register makes buf available for exposure to the session's peer: on the
// accepting end only (the dialer reads and writes; the acceptor exposes),
// on a transport with one-sided access. Nothing of buf is reachable until
// a range of it is exposed (Region.Expose).
//
// On TCP and in memory any Go memory will do. Verbs registers the ranges
// it exposes with the NIC, which needs memory outside the Go heap
// (hugepage or mmap memory).
func (s *Session) Register(buf []byte) (*Region, error) {
	if s.rcv == nil {
		return nil, fmt.Errorf("mptx: Register on the dialing end of a session (the accepting end exposes memory; the dialer reads and writes it)")
	}
	if len(buf) == 0 {
		return nil, fmt.Errorf("mptx: Register of an empty buffer (valid: at least 1 byte)")
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	exp, ok := s.rcv.recv.(qp.Exposer)
	if !ok {
		return nil, fmt.Errorf("mptx: Register: the session's transport (%s) has no one-sided access", s.tr)
	}
	return &Region{s: s, exp: exp, buf: buf, keys: map[uint32]Descriptor{}}, nil
}

// Bytes returns the region's memory.
func (r *Region) Bytes() []byte { return r.buf }

// Expose lets the peer access n bytes of the region from offset off with
// the rights access (AccessRead, AccessWrite, or both) and returns the
// descriptor naming them. Each exposure has its own key, which the
// backend checks on every request (verbs: a memory region registered for
// just this range with just these rights), so a peer holding a descriptor
// reaches exactly its range, and only as access allows, until Revoke.
// Expose a whole region once and hand out Slices of its descriptor when
// the peer may reach all of it; expose each range when it may not.
func (r *Region) Expose(off, n units.Bytes, access Access) (Descriptor, error) {
	if off < 0 || n <= 0 || off > units.Bytes(len(r.buf)) || n > units.Bytes(len(r.buf))-off {
		return Descriptor{}, fmt.Errorf("mptx: Region.Expose(%d, %d) of a %d-byte region (valid: 0 <= off, 0 < n, off+n <= %d)", int64(off), int64(n), len(r.buf), len(r.buf))
	}
	if access == 0 || access&^qp.AccessMask != 0 {
		return Descriptor{}, fmt.Errorf("mptx: Region.Expose: access %#x (valid: AccessRead, AccessWrite or both)", uint8(access))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return Descriptor{}, fmt.Errorf("mptx: Region.Expose on a closed region")
	}
	if err := r.s.Err(); err != nil {
		return Descriptor{}, err
	}
	e, err := r.exp.Expose(r.buf[off:off+n:off+n], access)
	if err != nil {
		return Descriptor{}, fmt.Errorf("mptx: Region.Expose: %w", err)
	}
	d := Descriptor{Key: e.Key, Addr: e.Addr, Len: e.Len, Access: e.Access, PathKeys: e.PathKeys}
	r.keys[d.Key] = d
	return d, nil
}

// Revoke ends the exposure d names: once it returns, the peer's requests
// naming d's key fail (with ErrRemoteAccess at the peer) and none touches
// the memory, so the range may be reused. The peer is told, so that its
// Reads and Writes of d fail at once, without reaching a path. Revoking a
// descriptor twice, or one of another region, is an error; after the
// session ended every exposure is gone and Revoke returns nil.
func (r *Region) Revoke(d Descriptor) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.s.Err() != nil {
		return nil
	}
	if e, ok := r.keys[d.Key]; !ok || e.Addr != d.Addr || e.Len != d.Len {
		return fmt.Errorf("mptx: Region.Revoke: %v is not a live exposure of this region (Revoke the descriptor Expose returned, not a Slice)", d)
	}
	return r.revokeLocked(r.keys[d.Key])
}

func (r *Region) revokeLocked(d Descriptor) error {
	delete(r.keys, d.Key)
	if err := r.exp.RevokeKey(d.Key); err != nil {
		return fmt.Errorf("mptx: Region.Revoke: %w", err)
	}
	m := revokeMsg{Key: d.Key, Addr: d.Addr, Len: uint64(d.Len)}
	_ = r.s.ctrl.send(msgRevoke, m.marshal()) // best effort: the backend refuses the key anyway
	return nil
}

// Close revokes every exposure of the region; the region cannot expose
// anything afterwards. Close is idempotent.
func (r *Region) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.s.Err() != nil {
		clear(r.keys)
		return nil
	}
	var first error
	for _, d := range r.keys {
		if err := r.revokeLocked(d); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// SendDescriptor hands d to the peer over the session's control channel,
// named name (up to MaxNameLen bytes; the application's own label, such
// as a request id); the peer's RecvDescriptor returns it. The accepting
// end sends, the dialing end receives. Applications with a metadata
// channel of their own may pass Descriptor.MarshalText there instead.
func (s *Session) SendDescriptor(ctx context.Context, name string, d Descriptor) error {
	if s.rcv == nil {
		return fmt.Errorf("mptx: SendDescriptor on the dialing end (the accepting end exposes memory and sends descriptors)")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("mptx: SendDescriptor: name of %d bytes (valid: up to %d)", len(name), MaxNameLen)
	}
	m := descMsg{Name: name, Desc: d}
	b, err := m.marshal()
	if err != nil {
		return err
	}
	if err := s.Err(); err != nil {
		return err
	}
	return s.ctrl.s.WriteApp(ctx, msgDescriptor, b)
}

// RecvDescriptor returns the next descriptor the peer sent with
// SendDescriptor, and its name, in the order sent; it waits for one until
// ctx ends or the session does. Several goroutines may call it; each
// descriptor goes to one of them.
func (s *Session) RecvDescriptor(ctx context.Context) (string, Descriptor, error) {
	if s.snd == nil {
		return "", Descriptor{}, fmt.Errorf("mptx: RecvDescriptor on the accepting end (the dialing end receives descriptors)")
	}
	o := &s.os
	for {
		o.mu.Lock()
		if len(o.descs) > 0 {
			m := o.descs[0]
			o.descs[0] = descMsg{}
			o.descs = o.descs[1:]
			o.mu.Unlock()
			return m.Name, m.Desc, nil
		}
		kick := o.kickLocked()
		o.mu.Unlock()
		select {
		case <-kick:
		case <-ctx.Done():
			return "", Descriptor{}, ctx.Err()
		case <-s.done:
			o.mu.Lock()
			n := len(o.descs)
			o.mu.Unlock()
			if n == 0 {
				return "", Descriptor{}, s.closedErr()
			}
		}
	}
}

// osSession is a session's one-sided state shared by its goroutines: the
// descriptors received and not yet taken, and the exposures the peer
// revoked. The zero value is ready.
type osSession struct {
	mu    sync.Mutex
	descs []descMsg
	kick  chan struct{} // closed when descs grows; then replaced
	// revoked holds the exposures the peer revoked, the last maxRevoked
	// of them (a ring): enough to fail at once the requests an
	// application makes with a descriptor it has just lost, without
	// growing for ever; older ones are refused by the peer's backend all
	// the same. A descriptor the peer sends again (the backend reused
	// the key) is taken off.
	revoked map[uint32]revokeMsg
	ring    []uint32
	next    int
}

const maxRevoked = 4096

func (o *osSession) kickLocked() chan struct{} {
	if o.kick == nil {
		o.kick = make(chan struct{})
	}
	return o.kick
}

func (o *osSession) received(m descMsg) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.revoked, m.Desc.Key)
	o.descs = append(o.descs, m)
	if o.kick != nil {
		close(o.kick)
		o.kick = nil
	}
}

func (o *osSession) revoke(m revokeMsg) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.revoked == nil {
		o.revoked = map[uint32]revokeMsg{}
		o.ring = make([]uint32, maxRevoked)
	}
	if _, ok := o.revoked[m.Key]; !ok {
		if old := o.ring[o.next]; old != 0 {
			delete(o.revoked, old)
		}
		o.ring[o.next] = m.Key
		o.next = (o.next + 1) % maxRevoked
	}
	o.revoked[m.Key] = m
}

// isRevoked reports whether d lies in an exposure the peer revoked.
func (o *osSession) isRevoked(d Descriptor) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	m, ok := o.revoked[d.Key]
	return ok && d.Addr >= m.Addr && d.Addr-m.Addr < m.Len
}
