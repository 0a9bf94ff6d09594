package slab

import (
	"fmt"
	"math/bits"

	"github.com/mptx-dev/mptx/units"
)

// Config configures a Pool.
type Config struct {
	// Size is the region's size; it is rounded down to a Page. Valid:
	// 1 page to 2^32−1 pages (16 TiB).
	Size units.Bytes
	// SlabSize is the size a slab aims at: a class of c bytes gets
	// min(64, SlabSize/c) slots per slab, and requests up to SlabSize/8
	// (SmallMax) are served from slabs. A power of two from 64 KiB to
	// 1 GiB; 0 means Size/16 rounded down to a power of two, within 1 MiB
	// to 64 MiB (64 MiB slabs, SmallMax 8 MiB, from a 1 GiB pool up).
	SlabSize units.Bytes
	// MaxSpans bounds the spans (slabs and large blocks) in use at once;
	// New sizes the pool's records for it (about 80 bytes a span). 1 to
	// 2^24; 0 means min(pages, 16384).
	MaxSpans int
}

// maxPages is the most pages a Pool manages (span sizes are uint32).
const maxPages = 1<<32 - 1

// maxSpans is the most spans: slab references carry 24 bits of slab index.
const maxSpans = 1 << 24

func (c Config) withDefaults() (Config, error) {
	pages := int64(c.Size / Page)
	if pages < 1 || pages > maxPages {
		return c, fmt.Errorf("slab: Config.Size = %d bytes (valid: %d bytes to %d pages of %d bytes)", int64(c.Size), int64(Page), int64(maxPages), int64(Page))
	}
	if c.SlabSize == 0 {
		s := units.Bytes(1) << (bits.Len64(uint64(c.Size/16)) - 1)
		if c.Size < 16 {
			s = 1
		}
		c.SlabSize = s.Clamp(units.MiB, 64*units.MiB)
	}
	if c.SlabSize < 64*units.KiB || c.SlabSize > units.GiB || c.SlabSize&(c.SlabSize-1) != 0 {
		return c, fmt.Errorf("slab: Config.SlabSize = %d bytes (valid: a power of two from 64KiB to 1GiB, or 0)", int64(c.SlabSize))
	}
	if c.MaxSpans == 0 {
		c.MaxSpans = int(min(pages, 16384))
	}
	if c.MaxSpans < 1 || c.MaxSpans > maxSpans {
		return c, fmt.Errorf("slab: Config.MaxSpans = %d (valid: 1 to %d, or 0)", c.MaxSpans, maxSpans)
	}
	c.Size = units.Bytes(pages) * Page
	return c, nil
}

// Block is an allocated range of the region: [Off, Off+Len) is what was
// asked for, [Off, Off+Cap) what the block holds. The zero Block is not
// allocated.
type Block struct {
	Off units.Bytes // page-aligned offset into the region
	Len units.Bytes // the size asked for
	Cap units.Bytes // the block's size: Len rounded up to a page or size class
	ref uint32      // span index + 1 (large), or slabRef|slab<<6|slot
}

const slabRef = 1 << 31

// Valid reports whether b came from Alloc (and was not the zero Block).
func (b Block) Valid() bool { return b.ref != 0 }

// Small reports whether b is a slot of a slab (a size-class block).
func (b Block) Small() bool { return b.ref&slabRef != 0 }

// span states.
const (
	spanFree uint8 = iota
	spanLarge
	spanSlab
)

// span is a contiguous run of pages. Free spans sit in the list of their
// size (binFloor); prev and next link every span in address order.
type span struct {
	off, pages   uint32
	prev, next   int32 // address order; -1 at the ends
	fprev, fnext int32 // free list; -1 at the ends
	state        uint8
	bin          uint8
	slab         int32 // for spanSlab: the slab record
}

// slabRec is one slab: a span cut into nslots slots of one class.
type slabRec struct {
	span       int32
	free       uint64 // bit i set: slot i free
	used       uint8
	nslots     uint8
	class      uint8
	inPartial  bool
	prev, next int32 // the class's partial list
}

// class is one small size class.
type class struct {
	pages         uint32 // slot size
	slots         uint8  // slots of a full slab
	partial, tail int32  // slabs with used and free slots, oldest first
	empty         int32  // one cached empty slab, -1 if none
	live, high    int    // slots in use, their high-water mark
	slabs         int    // slabs of this class (partial, full, cached)
	freeSlots     int    // free slots in those slabs
	allocs, frees uint64
	slabsMade     uint64
	slabsReleased uint64
}

// Pool hands out Blocks of one region. See the package documentation for
// the model; a Pool is not safe for concurrent use.
type Pool struct {
	cfg      Config
	pages    uint32
	smallMax uint32 // pages
	nclasses int

	spans     []span
	freeSpans []int32 // unused span records (a stack)
	slabs     []slabRec
	freeSlabs []int32
	heads     [numBins]int32
	bitmap    [(numBins + 63) / 64]uint64
	classes   [MaxClasses]class

	inUse, requested, high units.Bytes
	live, largeLive        int
	freePages              uint64
	freeCount              int // free spans
	fails                  uint64
}

// New builds a pool over a region of cfg.Size bytes, all free.
func New(cfg Config) (*Pool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Pool{cfg: cfg, pages: uint32(cfg.Size / Page)}
	p.smallMax = uint32(cfg.SlabSize / 8 / Page)
	p.nclasses = classOf(p.smallMax) + 1
	for c := range p.classes[:p.nclasses] {
		k := &p.classes[c]
		k.pages = classPages(c)
		k.slots = uint8(min(64, uint32(cfg.SlabSize/Page)/k.pages))
		k.partial, k.tail, k.empty = -1, -1, -1
	}
	// A span needs one record, and the free spans between used ones one
	// more each (free spans are never adjacent): 2·MaxSpans+1.
	n := 2*cfg.MaxSpans + 1
	p.spans = make([]span, n)
	p.freeSpans = make([]int32, 0, n)
	for i := n - 1; i >= 1; i-- {
		p.freeSpans = append(p.freeSpans, int32(i))
	}
	p.slabs = make([]slabRec, cfg.MaxSpans)
	p.freeSlabs = make([]int32, 0, cfg.MaxSpans)
	for i := cfg.MaxSpans - 1; i >= 0; i-- {
		p.freeSlabs = append(p.freeSlabs, int32(i))
	}
	for i := range p.heads {
		p.heads[i] = -1
	}
	p.spans[0] = span{off: 0, pages: p.pages, prev: -1, next: -1, slab: -1}
	p.insertFree(0)
	return p, nil
}

// Size returns the region's size (Config.Size rounded down to a page).
func (p *Pool) Size() units.Bytes { return p.cfg.Size }

// SmallMax returns the largest request served from slabs.
func (p *Pool) SmallMax() units.Bytes { return units.Bytes(p.smallMax) * Page }

// Config returns the pool's configuration with the defaults filled in.
func (p *Pool) Config() Config { return p.cfg }

// Alloc returns a block of at least n bytes, page-aligned, and true; or
// false when n is not in 1..Size or no free range can hold it (Stats says
// how the pool stands). It allocates nothing.
func (p *Pool) Alloc(n units.Bytes) (Block, bool) {
	if n <= 0 || n > p.cfg.Size {
		p.fails++
		return Block{}, false
	}
	q := uint32((n + Page - 1) / Page)
	var b Block
	var ok bool
	if q <= p.smallMax {
		b, ok = p.allocSmall(classOf(q))
	} else {
		b, ok = p.allocLarge(q)
	}
	if !ok {
		p.fails++
		return Block{}, false
	}
	b.Len = n
	p.live++
	p.inUse += b.Cap
	p.requested += n
	p.high = max(p.high, p.inUse)
	return b, true
}

// Free gives b back. Freeing a block that is not allocated (twice, or
// never) panics: it is a bug in the caller, and the pool's state would be
// corrupt after it.
func (p *Pool) Free(b Block) {
	if b.ref&slabRef != 0 {
		p.freeSmall(b)
	} else {
		p.freeLarge(b)
	}
	p.live--
	p.inUse -= b.Cap
	p.requested -= b.Len
}

func (p *Pool) allocLarge(q uint32) (Block, bool) {
	s, ok := p.takeSpan(q, true)
	if !ok {
		return Block{}, false
	}
	sp := &p.spans[s]
	sp.state = spanLarge
	p.largeLive++
	return Block{Off: units.Bytes(sp.off) * Page, Cap: units.Bytes(q) * Page, ref: uint32(s) + 1}, true
}

func (p *Pool) freeLarge(b Block) {
	s := int32(b.ref) - 1
	if b.ref == 0 || int(s) >= len(p.spans) || p.spans[s].state != spanLarge || units.Bytes(p.spans[s].off)*Page != b.Off {
		panic(fmt.Sprintf("slab: BUG: Free of block at offset %d (%d bytes) that is not allocated (double free?)", int64(b.Off), int64(b.Cap)))
	}
	p.largeLive--
	p.releaseSpan(s)
}

func (p *Pool) allocSmall(c int) (Block, bool) {
	k := &p.classes[c]
	si := k.partial
	if si < 0 {
		if k.empty >= 0 {
			si, k.empty = k.empty, -1
		} else {
			var ok bool
			if si, ok = p.newSlab(c); !ok {
				return Block{}, false
			}
		}
		p.pushPartial(k, si)
	}
	sl := &p.slabs[si]
	slot := bits.TrailingZeros64(sl.free)
	sl.free &^= 1 << slot
	sl.used++
	if sl.free == 0 {
		p.removePartial(k, si)
	}
	k.live++
	k.high = max(k.high, k.live)
	k.freeSlots--
	k.allocs++
	off := units.Bytes(p.spans[sl.span].off+uint32(slot)*k.pages) * Page
	return Block{Off: off, Cap: units.Bytes(k.pages) * Page, ref: slabRef | uint32(si)<<6 | uint32(slot)}, true
}

func (p *Pool) freeSmall(b Block) {
	si := int32(b.ref&^slabRef) >> 6
	slot := uint(b.ref & 63)
	if int(si) >= len(p.slabs) || p.slabs[si].nslots == 0 || slot >= uint(p.slabs[si].nslots) ||
		p.slabs[si].free&(1<<slot) != 0 ||
		units.Bytes(p.spans[p.slabs[si].span].off+uint32(slot)*p.classes[p.slabs[si].class].pages)*Page != b.Off {
		panic(fmt.Sprintf("slab: BUG: Free of block at offset %d (%d bytes) that is not allocated (double free?)", int64(b.Off), int64(b.Cap)))
	}
	sl := &p.slabs[si]
	k := &p.classes[sl.class]
	wasFull := sl.free == 0
	sl.free |= 1 << slot
	sl.used--
	k.live--
	k.freeSlots++
	k.frees++
	if wasFull {
		p.pushPartial(k, si)
	}
	if sl.used == 0 {
		p.removePartial(k, si)
		if k.empty < 0 {
			k.empty = si
		} else {
			p.releaseSlab(si)
		}
	}
}

// newSlab cuts a span into a slab of class c: the class's full slot count
// if a span that large is free, else half as many, down to one slot
// (takeSpan releases the cached empty slabs before it gives up on a size).
func (p *Pool) newSlab(c int) (int32, bool) {
	if len(p.freeSlabs) == 0 {
		return -1, false
	}
	k := &p.classes[c]
	for n := uint32(k.slots); n >= 1; n /= 2 {
		s, ok := p.takeSpan(n*k.pages, false)
		if !ok {
			continue
		}
		si := p.freeSlabs[len(p.freeSlabs)-1]
		p.freeSlabs = p.freeSlabs[:len(p.freeSlabs)-1]
		p.spans[s].state = spanSlab
		p.spans[s].slab = si
		// 1<<64 is 0 in uint64, so a 64-slot mask is all ones.
		p.slabs[si] = slabRec{span: s, free: 1<<n - 1, nslots: uint8(n), class: uint8(c), prev: -1, next: -1}
		k.slabs++
		k.freeSlots += int(n)
		k.slabsMade++
		return si, true
	}
	return -1, false
}

// releaseSlab gives an empty slab's span back.
func (p *Pool) releaseSlab(si int32) {
	sl := &p.slabs[si]
	k := &p.classes[sl.class]
	k.slabs--
	k.freeSlots -= int(sl.nslots)
	k.slabsReleased++
	s := sl.span
	*sl = slabRec{}
	p.freeSlabs = append(p.freeSlabs, si)
	p.releaseSpan(s)
}

// releaseCached releases every class's cached empty slab; it reports
// whether there was one.
func (p *Pool) releaseCached() bool {
	any := false
	for c := range p.classes[:p.nclasses] {
		k := &p.classes[c]
		if k.empty >= 0 {
			si := k.empty
			k.empty = -1
			p.releaseSlab(si)
			any = true
		}
	}
	return any
}

func (p *Pool) pushPartial(k *class, si int32) {
	sl := &p.slabs[si]
	sl.inPartial = true
	sl.prev, sl.next = k.tail, -1
	if k.tail >= 0 {
		p.slabs[k.tail].next = si
	} else {
		k.partial = si
	}
	k.tail = si
}

func (p *Pool) removePartial(k *class, si int32) {
	sl := &p.slabs[si]
	if !sl.inPartial {
		return
	}
	if sl.prev >= 0 {
		p.slabs[sl.prev].next = sl.next
	} else {
		k.partial = sl.next
	}
	if sl.next >= 0 {
		p.slabs[sl.next].prev = sl.prev
	} else {
		k.tail = sl.prev
	}
	sl.prev, sl.next, sl.inPartial = -1, -1, false
}

// takeSpan takes q pages from a free span, leaving the rest free; it
// releases cached slabs and retries before failing.
func (p *Pool) takeSpan(q uint32, high bool) (int32, bool) {
	s := p.findFree(q)
	if s < 0 && p.releaseCached() {
		s = p.findFree(q)
	}
	if s < 0 {
		return -1, false
	}
	sp := &p.spans[s]
	if sp.pages > q && len(p.freeSpans) == 0 {
		return -1, false // no record for the remainder
	}
	p.removeFree(s)
	if sp.pages > q {
		r := p.freeSpans[len(p.freeSpans)-1]
		p.freeSpans = p.freeSpans[:len(p.freeSpans)-1]
		p.spans[r] = span{off: sp.off + q, pages: sp.pages - q, prev: s, next: sp.next, slab: -1}
		if sp.next >= 0 {
			p.spans[sp.next].prev = r
		}
		sp.next = r
		sp.pages = q
		if high {
			// Take the tail instead: r is the block, s stays free.
			p.spans[r].off, sp.pages = sp.off+p.spans[r].pages, p.spans[r].pages
			p.spans[r].pages = q
			p.insertFree(s)
			s = r
			sp = &p.spans[s]
		} else {
			p.insertFree(r)
		}
	}
	sp.slab = -1
	return s, true
}

// findFree returns a free span of at least q pages, -1 if there is none:
// the head of the first non-empty list at or above binCeil(q), else a
// fitting span of list binFloor(q) (a linear scan of that one list).
func (p *Pool) findFree(q uint32) int32 {
	b := binCeil(q)
	for w := b / 64; w < len(p.bitmap) && b < numBins; w++ {
		m := p.bitmap[w]
		if w == b/64 {
			m &= ^uint64(0) << (b % 64)
		}
		if m != 0 {
			return p.heads[w*64+bits.TrailingZeros64(m)]
		}
	}
	if f := binFloor(q); f != b {
		for s := p.heads[f]; s >= 0; s = p.spans[s].fnext {
			if p.spans[s].pages >= q {
				return s
			}
		}
	}
	return -1
}

// releaseSpan frees span s and merges it with free neighbours.
func (p *Pool) releaseSpan(s int32) {
	sp := &p.spans[s]
	sp.state, sp.slab = spanFree, -1
	if nx := sp.next; nx >= 0 && p.spans[nx].state == spanFree {
		p.removeFree(nx)
		sp.pages += p.spans[nx].pages
		sp.next = p.spans[nx].next
		if sp.next >= 0 {
			p.spans[sp.next].prev = s
		}
		p.dropSpan(nx)
	}
	if pv := sp.prev; pv >= 0 && p.spans[pv].state == spanFree {
		p.removeFree(pv)
		pp := &p.spans[pv]
		pp.pages += sp.pages
		pp.next = sp.next
		if pp.next >= 0 {
			p.spans[pp.next].prev = pv
		}
		p.dropSpan(s)
		s = pv
	}
	p.insertFree(s)
}

func (p *Pool) dropSpan(s int32) {
	p.spans[s] = span{prev: -1, next: -1, fprev: -1, fnext: -1, slab: -1}
	p.freeSpans = append(p.freeSpans, s)
}

func (p *Pool) insertFree(s int32) {
	sp := &p.spans[s]
	sp.state = spanFree
	b := binFloor(sp.pages)
	sp.bin = uint8(b)
	sp.fprev, sp.fnext = -1, p.heads[b]
	if sp.fnext >= 0 {
		p.spans[sp.fnext].fprev = s
	}
	p.heads[b] = s
	p.bitmap[b/64] |= 1 << (b % 64)
	p.freePages += uint64(sp.pages)
	p.freeCount++
}

func (p *Pool) removeFree(s int32) {
	sp := &p.spans[s]
	b := int(sp.bin)
	if sp.fprev >= 0 {
		p.spans[sp.fprev].fnext = sp.fnext
	} else {
		p.heads[b] = sp.fnext
	}
	if sp.fnext >= 0 {
		p.spans[sp.fnext].fprev = sp.fprev
	}
	if p.heads[b] < 0 {
		p.bitmap[b/64] &^= 1 << (b % 64)
	}
	sp.fprev, sp.fnext = -1, -1
	p.freePages -= uint64(sp.pages)
	p.freeCount--
}
