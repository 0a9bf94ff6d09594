package mptx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/mptx-dev/mptx/slab"
	"github.com/mptx-dev/mptx/units"
)

// A sending session's registered send region is laid out as
//
//	[0, SendBuffer)                      staging: tensors from elsewhere are copied here
//	[poolStart, poolStart+Config.Pool)   the pool: Session.Alloc carves Buffers from it
//
// with poolStart = SendBuffer rounded up to a page. The whole region is
// registered with the backend once, when the session connects (qp/tcp's
// DialConfig.SendRegion; on verbs, one Buffer of the host's registered,
// hugepage-backed pool), so that a tensor in a Buffer is posted straight
// from where it lies: no copy, no registration, per send.

// ErrPoolFull is returned (wrapped) by Session.Alloc when no free range of
// the pool can hold the request.
var ErrPoolFull = errors.New("mptx: the session's pool is full")

// maxPool is the largest Config.Pool.
const maxPool = units.TiB

func (c *Config) validatePool() error {
	if c.Pool < 0 || c.Pool > maxPool {
		return fmt.Errorf("mptx: Config.Pool = %d bytes (valid: 0 for none, or up to %v)", int64(c.Pool), maxPool)
	}
	return nil
}

// sendRegionSize is the size of the send region a transport registers
// for cfg: the staging buffer, then the pool. Transports size their send
// memory with it (dialTCP; dialVerbs must too).
func sendRegionSize(cfg *Config) units.Bytes {
	if cfg.Pool == 0 {
		return cfg.SendBuffer
	}
	return poolStart(cfg) + cfg.Pool
}

func poolStart(cfg *Config) units.Bytes {
	return (cfg.SendBuffer + slab.Page - 1) / slab.Page * slab.Page
}

// sendPool is a sending session's pool: the slab allocator over its part
// of the send region, and the live Buffers by offset. One mutex guards
// both; Alloc and Free hold it for the allocator's few tens of
// nanoseconds (BenchmarkSessionAllocParallel), and SendAsync for a map
// lookup.
type sendPool struct {
	mem   []byte      // the pool's part of the region
	start units.Bytes // its offset in the region
	base  uintptr     // &mem[0]

	mu   sync.Mutex
	p    *slab.Pool
	live map[units.Bytes]*Buffer // by offset into mem
}

// newSendPool splits region (sized by sendRegionSize) into the staging
// buffer, which it returns, and the pool (nil when cfg.Pool is 0).
func newSendPool(region []byte, cfg *Config) ([]byte, *sendPool, error) {
	if cfg.Pool == 0 {
		return region, nil, nil
	}
	start := poolStart(cfg)
	if units.Bytes(len(region)) < start+cfg.Pool {
		return nil, nil, fmt.Errorf("mptx: BUG: send region of %d bytes, want %d (SendBuffer %v, Pool %v)", len(region), int64(start+cfg.Pool), cfg.SendBuffer, cfg.Pool)
	}
	p, err := slab.New(slab.Config{Size: cfg.Pool})
	if err != nil {
		return nil, nil, fmt.Errorf("mptx: Config.Pool: %w", err)
	}
	mem := region[start : start+cfg.Pool : start+cfg.Pool]
	sp := &sendPool{mem: mem, start: start, base: uintptr(unsafe.Pointer(&mem[0])), p: p, live: map[units.Bytes]*Buffer{}}
	return region[:cfg.SendBuffer:cfg.SendBuffer], sp, nil
}

// Buffer is memory from a sending session's pool (Session.Alloc): part of
// the region the session registered with its transport when it
// connected. A tensor sent from a Buffer (Session.SendBuffer, or Send and
// SendAsync of a slice that starts where the Buffer does) is posted from
// where it lies: it is neither copied nor registered.
//
// The bytes of a Buffer must not change while a transfer of it is in
// flight (until its Transfer is done): the engine may read any part of
// it again, on another path, until then; a change is caught by the
// receiver's checksum unless Config.NoChecksum is set. Free may be called
// at any time: the memory returns to the pool once the transfers of the
// Buffer in flight have ended.
//
// A Buffer's methods are safe for concurrent use. The zero Buffer is not
// usable.
type Buffer struct {
	sp    *sendPool
	blk   slab.Block
	mem   []byte
	pins  int  // transfers in flight; guarded by sp.mu
	freed bool // Free was called; guarded by sp.mu
	hold  *memHold
}

// Bytes returns the buffer's memory, Len bytes. It stays valid until Free,
// even after the session ended (a Buffer holds the session's send memory,
// registered memory on verbs, until it is freed: free every Buffer).
func (b *Buffer) Bytes() []byte { return b.mem }

// Len returns the size asked of Alloc.
func (b *Buffer) Len() units.Bytes { return units.Bytes(len(b.mem)) }

// Cap returns the bytes the buffer holds in the pool: Len rounded up to a
// page, or to its size class up to the pool's SmallMax (slab).
func (b *Buffer) Cap() units.Bytes { return b.blk.Cap }

// Offset returns the buffer's offset in the session's send region (the
// work requests' Local offset).
func (b *Buffer) Offset() units.Bytes { return b.sp.start + b.blk.Off }

// Free gives the buffer back to the pool: at once, or, while transfers of
// it are in flight, when the last of them ends. The buffer's memory must
// not be used after Free. Free is idempotent.
func (b *Buffer) Free() {
	sp := b.sp
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if b.freed {
		return
	}
	b.freed = true
	if b.pins == 0 {
		sp.releaseLocked(b)
	}
}

func (sp *sendPool) releaseLocked(b *Buffer) {
	delete(sp.live, b.blk.Off)
	sp.p.Free(b.blk)
	b.hold.drop()
}

// Alloc returns a Buffer of size bytes from the session's pool
// (Config.Pool), page-aligned, holding whatever its last user left in it
// (zeros at first). It does not wait for room: a full pool is an error
// wrapping ErrPoolFull. Alloc is for the sending end (the dialer's) and
// is safe for concurrent use; it takes tens of nanoseconds plus the
// Buffer's own allocation.
func (s *Session) Alloc(size units.Bytes) (*Buffer, error) {
	ss := s.snd
	if ss == nil {
		return nil, fmt.Errorf("mptx: Alloc on the receiving end of a session (the pool is the sender's)")
	}
	sp := ss.pool
	if sp == nil {
		return nil, fmt.Errorf("mptx: Alloc: the session has no pool (Config.Pool = 0; set it to the bytes to allocate tensors from)")
	}
	if size <= 0 || size > sp.p.Size() {
		return nil, fmt.Errorf("mptx: Alloc(%d bytes): size out of range (valid: 1 byte to the pool's %v, Config.Pool)", int64(size), sp.p.Size())
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	// A Buffer holds the send memory (on verbs, registered memory that the
	// session frees once nothing can touch it) until it is freed.
	if !ss.hold.acquire() {
		return nil, ErrSessionClosed
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	blk, ok := sp.p.Alloc(size)
	if !ok {
		ss.hold.drop()
		var st slab.Stats
		sp.p.Stats(&st)
		return nil, fmt.Errorf("%w: Alloc(%v) needs %v; %v of %v in use, largest free range %v (Config.Pool)", ErrPoolFull, size, sp.p.ClassSize(size), st.InUse, st.Size, st.LargestFree)
	}
	b := &Buffer{sp: sp, blk: blk, mem: sp.mem[blk.Off : blk.Off+size : blk.Off+size], hold: ss.hold}
	sp.live[blk.Off] = b
	return b, nil
}

// PoolStats returns a snapshot of the sending session's pool (in use,
// free per size class, high-water mark...); ok is false on a session
// without one.
func (s *Session) PoolStats() (st slab.Stats, ok bool) {
	if s.snd == nil || s.snd.pool == nil {
		return st, false
	}
	sp := s.snd.pool
	sp.mu.Lock()
	sp.p.Stats(&st)
	sp.mu.Unlock()
	return st, true
}

// pin returns the live Buffer data starts at, if data lies within it, and
// counts a transfer of it in flight; nil if data is not (the start of) a
// live Buffer of this pool. A nil pool pins nothing.
func (sp *sendPool) pin(data []byte) *Buffer {
	if sp == nil || len(data) == 0 {
		return nil
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	if p < sp.base || p-sp.base >= uintptr(len(sp.mem)) {
		return nil
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	b := sp.live[units.Bytes(p-sp.base)]
	if b == nil || b.freed || len(data) > len(b.mem) {
		return nil
	}
	b.pins++
	return b
}

// unpin ends a transfer of b; the last one of a freed Buffer releases it.
// A nil Buffer is a no-op.
func (b *Buffer) unpin() {
	if b == nil {
		return
	}
	sp := b.sp
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if b.pins--; b.pins < 0 {
		panic("mptx: BUG: Buffer unpinned more often than pinned")
	}
	if b.pins == 0 && b.freed {
		sp.releaseLocked(b)
	}
}

// SendBuffer sends the first n bytes of b as one tensor named name (n = 0:
// all of it) and returns when the receiver has it, checked; see Send. It
// neither copies nor registers b; b must not change until it returns.
func (s *Session) SendBuffer(ctx context.Context, name string, b *Buffer, n units.Bytes) error {
	data, err := s.bufferData(b, n)
	if err != nil {
		return err
	}
	return s.Send(ctx, name, data)
}

// SendBufferAsync starts sending the first n bytes of b (n = 0: all of
// it) and returns its Transfer; see SendAsync. It neither copies nor
// registers b; b must not change until the Transfer is done.
func (s *Session) SendBufferAsync(ctx context.Context, name string, b *Buffer, n units.Bytes) (*Transfer, error) {
	data, err := s.bufferData(b, n)
	if err != nil {
		return nil, err
	}
	return s.SendAsync(ctx, name, data)
}

// bufferData returns the first n bytes of b (all for 0), checking that b
// is a live Buffer of this session's pool.
func (s *Session) bufferData(b *Buffer, n units.Bytes) ([]byte, error) {
	if b == nil || b.sp == nil {
		return nil, fmt.Errorf("mptx: SendBuffer of a nil or zero Buffer (allocate it with Session.Alloc)")
	}
	if s.snd == nil || b.sp != s.snd.pool {
		return nil, fmt.Errorf("mptx: SendBuffer of a Buffer from another session's pool")
	}
	b.sp.mu.Lock()
	freed := b.freed
	b.sp.mu.Unlock()
	if freed {
		return nil, fmt.Errorf("mptx: SendBuffer of a freed Buffer")
	}
	if n == 0 {
		n = b.Len()
	}
	if n < 0 || n > b.Len() {
		return nil, fmt.Errorf("mptx: SendBuffer: n = %d bytes (valid: 0 for all, or 1 to the buffer's %d)", int64(n), int64(b.Len()))
	}
	return b.mem[:n], nil
}
