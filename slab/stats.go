package slab

import (
	"fmt"
	"math/bits"

	"github.com/mptx-dev/mptx/units"
)

// Stats is a snapshot of a pool. Bytes are the region's; "in use" counts
// blocks at their capacity (Block.Cap).
type Stats struct {
	Size      units.Bytes // the region
	InUse     units.Bytes // bytes in live blocks (their Cap)
	Requested units.Bytes // bytes asked for by the live blocks (their Len)
	HighWater units.Bytes // the most InUse since New
	Live      int         // live blocks
	LargeLive int         // live blocks larger than SmallMax (spans of their own)
	// Slabbed is the bytes held by slabs: their live slots (in InUse) and
	// their free slots (usable by their class only), cached slabs
	// included.
	Slabbed units.Bytes
	// Free is the bytes in free spans, usable by any request;
	// LargestFree the largest of them, FreeSpans how many there are.
	Free        units.Bytes
	LargestFree units.Bytes
	FreeSpans   int
	SpansInUse  int    // span records in use (of 2·Config.MaxSpans+1)
	Failures    uint64 // Alloc calls that returned false
	// Classes has one entry per small size class, NumClasses of them.
	NumClasses int
	Classes    [MaxClasses]ClassStats
}

// ClassStats describes one small size class.
type ClassStats struct {
	Size      units.Bytes // slot size
	SlabSlots int         // slots of a full slab
	Live      int         // slots in use
	HighWater int         // the most slots in use at once
	Free      int         // free slots in this class's slabs
	Slabs     int         // slabs (partly used, full, or the cached empty one)
	Allocs    uint64
	Frees     uint64
	SlabsMade uint64 // slabs cut from spans
	Released  uint64 // slabs given back to the spans
}

// Stats fills st (no allocation). The largest free span is found by a
// scan of the highest non-empty free list.
func (p *Pool) Stats(st *Stats) {
	*st = Stats{
		Size: p.cfg.Size, InUse: p.inUse, Requested: p.requested, HighWater: p.high,
		Live: p.live, LargeLive: p.largeLive,
		Free: units.Bytes(p.freePages) * Page, FreeSpans: p.freeCount,
		SpansInUse: len(p.spans) - len(p.freeSpans),
		Failures:   p.fails, NumClasses: p.nclasses,
	}
	for w := len(p.bitmap) - 1; w >= 0; w-- {
		if p.bitmap[w] == 0 {
			continue
		}
		b := w*64 + 63 - bits.LeadingZeros64(p.bitmap[w])
		var largest uint32
		for s := p.heads[b]; s >= 0; s = p.spans[s].fnext {
			largest = max(largest, p.spans[s].pages)
		}
		st.LargestFree = units.Bytes(largest) * Page
		break
	}
	for c := range p.classes[:p.nclasses] {
		k := &p.classes[c]
		st.Classes[c] = ClassStats{Size: units.Bytes(k.pages) * Page, SlabSlots: int(k.slots), Live: k.live, HighWater: k.high,
			Free: k.freeSlots, Slabs: k.slabs, Allocs: k.allocs, Frees: k.frees, SlabsMade: k.slabsMade, Released: k.slabsReleased}
		st.Slabbed += units.Bytes(k.live+k.freeSlots) * units.Bytes(k.pages) * Page
	}
}

// ClassSize returns the capacity of the block Alloc(n) would return (n
// rounded up to its size class, or to a page above SmallMax); 0 if n is
// not in 1..Size.
func (p *Pool) ClassSize(n units.Bytes) units.Bytes {
	if n <= 0 || n > p.cfg.Size {
		return 0
	}
	q := uint32((n + Page - 1) / Page)
	if q <= p.smallMax {
		return units.Bytes(classPages(classOf(q))) * Page
	}
	return units.Bytes(q) * Page
}

// Check verifies the pool's invariants and returns the first violation:
// the spans tile the region in address order with no two free spans
// adjacent; the free lists and their bitmap hold exactly the free spans,
// each in the list of its size; every slab's span is its own, its used
// count matches its mask, and the partial lists hold exactly the slabs
// with both used and free slots; the counters agree with the records;
// no record is both in use and on a free stack. It walks every record
// (O(MaxSpans)); tests call it after every step.
func (p *Pool) Check() error {
	inStack := make([]bool, len(p.spans))
	for _, s := range p.freeSpans {
		if inStack[s] {
			return fmt.Errorf("span record %d is on the free stack twice", s)
		}
		inStack[s] = true
	}
	// Address order.
	var at uint32
	var freePages uint64
	var freeCount, used, large int
	prev := int32(-1)
	seen := make([]bool, len(p.spans))
	for s := int32(0); s >= 0; s = p.spans[s].next {
		sp := &p.spans[s]
		if seen[s] {
			return fmt.Errorf("span %d: address list has a cycle", s)
		}
		seen[s] = true
		if inStack[s] {
			return fmt.Errorf("span %d is in the address list and on the free stack", s)
		}
		if sp.off != at || sp.pages == 0 {
			return fmt.Errorf("span %d: off %d pages %d, want off %d and pages > 0", s, sp.off, sp.pages, at)
		}
		if sp.prev != prev {
			return fmt.Errorf("span %d: prev %d, want %d", s, sp.prev, prev)
		}
		if sp.state == spanFree {
			if prev >= 0 && p.spans[prev].state == spanFree {
				return fmt.Errorf("spans %d and %d are adjacent and both free", prev, s)
			}
			if int(sp.bin) != binFloor(sp.pages) {
				return fmt.Errorf("free span %d of %d pages in list %d, want %d", s, sp.pages, sp.bin, binFloor(sp.pages))
			}
			freePages += uint64(sp.pages)
			freeCount++
		} else {
			used++
		}
		if sp.state == spanLarge {
			large++
		}
		if sp.state == spanSlab {
			sl := &p.slabs[sp.slab]
			if sl.span != s || sl.nslots == 0 {
				return fmt.Errorf("span %d: slab %d points at span %d (%d slots)", s, sp.slab, sl.span, sl.nslots)
			}
			if want := uint32(sl.nslots) * p.classes[sl.class].pages; sp.pages != want {
				return fmt.Errorf("slab span %d: %d pages, want %d", s, sp.pages, want)
			}
		}
		at += sp.pages
		prev = s
	}
	if at != p.pages {
		return fmt.Errorf("spans cover %d pages, want %d", at, p.pages)
	}
	if used+freeCount+len(p.freeSpans) != len(p.spans) {
		return fmt.Errorf("%d used + %d free spans + %d spare records != %d records", used, freeCount, len(p.freeSpans), len(p.spans))
	}
	if freePages != p.freePages || freeCount != p.freeCount {
		return fmt.Errorf("free pages %d in %d spans, counters say %d in %d", freePages, freeCount, p.freePages, p.freeCount)
	}
	if large != p.largeLive {
		return fmt.Errorf("%d large spans, counter says %d", large, p.largeLive)
	}
	// Free lists.
	listed := 0
	for b := range p.heads {
		has := p.bitmap[b/64]&(1<<(b%64)) != 0
		if has != (p.heads[b] >= 0) {
			return fmt.Errorf("free list %d: bitmap %v, head %d", b, has, p.heads[b])
		}
		prev := int32(-1)
		for s := p.heads[b]; s >= 0; s = p.spans[s].fnext {
			sp := &p.spans[s]
			if sp.state != spanFree || int(sp.bin) != b || sp.fprev != prev || !seen[s] {
				return fmt.Errorf("free list %d: span %d (state %d, list %d, fprev %d, want %d)", b, s, sp.state, sp.bin, sp.fprev, prev)
			}
			if listed++; listed > freeCount {
				return fmt.Errorf("free lists hold more than the %d free spans (cycle?)", freeCount)
			}
			prev = s
		}
	}
	if listed != freeCount {
		return fmt.Errorf("free lists hold %d spans, %d are free", listed, freeCount)
	}
	// Slabs and classes.
	slabInStack := make([]bool, len(p.slabs))
	for _, si := range p.freeSlabs {
		slabInStack[si] = true
	}
	var slabs, freeSlots, liveSlots [MaxClasses]int
	for si := range p.slabs {
		sl := &p.slabs[si]
		if slabInStack[si] || sl.nslots == 0 {
			continue
		}
		c := int(sl.class)
		if c >= p.nclasses {
			return fmt.Errorf("slab %d: class %d of %d", si, c, p.nclasses)
		}
		mask := uint64(1)<<sl.nslots - 1
		if sl.free&^mask != 0 {
			return fmt.Errorf("slab %d: free mask %#x has bits beyond its %d slots", si, sl.free, sl.nslots)
		}
		nfree := bits.OnesCount64(sl.free)
		if int(sl.used)+nfree != int(sl.nslots) {
			return fmt.Errorf("slab %d: %d used + %d free != %d slots", si, sl.used, nfree, sl.nslots)
		}
		if p.spans[sl.span].state != spanSlab || p.spans[sl.span].slab != int32(si) {
			return fmt.Errorf("slab %d: its span %d is not its own", si, sl.span)
		}
		if want := sl.used > 0 && nfree > 0; sl.inPartial != want {
			return fmt.Errorf("slab %d (%d/%d used): in the partial list %v, want %v", si, sl.used, sl.nslots, sl.inPartial, want)
		}
		if sl.used == 0 && p.classes[c].empty != int32(si) {
			return fmt.Errorf("slab %d of class %d is empty but not the class's cached slab (%d)", si, c, p.classes[c].empty)
		}
		slabs[c]++
		freeSlots[c] += nfree
		liveSlots[c] += int(sl.used)
	}
	var live int
	var inUse units.Bytes
	for c := range p.classes[:p.nclasses] {
		k := &p.classes[c]
		n := 0
		prev := int32(-1)
		for si := k.partial; si >= 0; si = p.slabs[si].next {
			if p.slabs[si].prev != prev || !p.slabs[si].inPartial || int(p.slabs[si].class) != c {
				return fmt.Errorf("class %d: partial list broken at slab %d", c, si)
			}
			if n++; n > slabs[c] {
				return fmt.Errorf("class %d: partial list longer than its %d slabs (cycle?)", c, slabs[c])
			}
			prev = si
		}
		if k.tail != prev {
			return fmt.Errorf("class %d: partial tail %d, want %d", c, k.tail, prev)
		}
		if k.empty >= 0 && (p.slabs[k.empty].used != 0 || int(p.slabs[k.empty].class) != c || slabInStack[k.empty]) {
			return fmt.Errorf("class %d: cached slab %d is not an empty slab of the class", c, k.empty)
		}
		if slabs[c] != k.slabs || freeSlots[c] != k.freeSlots || liveSlots[c] != k.live {
			return fmt.Errorf("class %d: %d slabs, %d free and %d live slots; counters say %d, %d, %d", c, slabs[c], freeSlots[c], liveSlots[c], k.slabs, k.freeSlots, k.live)
		}
		live += liveSlots[c]
		inUse += units.Bytes(liveSlots[c]) * units.Bytes(k.pages) * Page
	}
	for si := range p.slabs {
		if !slabInStack[si] && p.slabs[si].nslots == 0 {
			return fmt.Errorf("slab record %d is neither in use nor on the free stack", si)
		}
	}
	for s := range p.spans {
		if !seen[s] && !inStack[s] {
			return fmt.Errorf("span record %d is neither in the address list nor on the free stack", s)
		}
	}
	live += p.largeLive
	for s := int32(0); s >= 0; s = p.spans[s].next {
		if p.spans[s].state == spanLarge {
			inUse += units.Bytes(p.spans[s].pages) * Page
		}
	}
	if live != p.live || inUse != p.inUse {
		return fmt.Errorf("%d live blocks of %d bytes, counters say %d of %d", live, int64(inUse), p.live, int64(p.inUse))
	}
	if p.requested > p.inUse || p.high < p.inUse {
		return fmt.Errorf("requested %d, in use %d, high water %d: want requested <= in use <= high water", int64(p.requested), int64(p.inUse), int64(p.high))
	}
	return nil
}
