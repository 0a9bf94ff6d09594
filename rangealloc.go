package mptx

import (
	"fmt"
	"sort"

	"github.com/mptx-dev/mptx/units"
)

// rangeAlign is the alignment of every range handed out: a page, so that
// tensors start page-aligned in a region (as chunks do within a tensor).
const rangeAlign = 4 * units.KiB

// rangeAlloc hands out ranges of [0, size) first-fit, page-aligned. It
// keeps the free extents sorted by offset and merges neighbours on free,
// so fragmentation is bounded by the live ranges themselves. It is not
// safe for concurrent use.
type rangeAlloc struct {
	size units.Bytes
	ext  []extent // sorted by off, non-adjacent
	used units.Bytes
}

type extent struct{ off, n units.Bytes }

func newRangeAlloc(size units.Bytes) *rangeAlloc {
	a := &rangeAlloc{size: size}
	if size > 0 {
		a.ext = []extent{{0, size}}
	}
	return a
}

func alignUp(n units.Bytes) units.Bytes { return (n + rangeAlign - 1) / rangeAlign * rangeAlign }

// alloc takes n bytes (rounded up to the alignment, but the last range of
// the region may be short) and returns their offset, false if no free
// extent is large enough.
func (a *rangeAlloc) alloc(n units.Bytes) (units.Bytes, bool) {
	if n <= 0 {
		return 0, false
	}
	for i := range a.ext {
		e := &a.ext[i]
		take := min(alignUp(n), e.n)
		if take < n {
			continue
		}
		off := e.off
		e.off += take
		e.n -= take
		if e.n == 0 {
			a.ext = append(a.ext[:i], a.ext[i+1:]...)
		}
		a.used += take
		return off, true
	}
	return 0, false
}

// free returns the range [off, off+n) that alloc(n) gave; freeing what was
// not allocated panics (a bug in the caller).
func (a *rangeAlloc) free(off, n units.Bytes) {
	take := min(alignUp(n), a.size-off)
	if off < 0 || take <= 0 || off+take > a.size {
		panic(fmt.Sprintf("mptx: BUG: rangeAlloc.free(%v, %v) outside [0, %v)", off, n, a.size))
	}
	i := sort.Search(len(a.ext), func(i int) bool { return a.ext[i].off >= off })
	if (i > 0 && a.ext[i-1].off+a.ext[i-1].n > off) || (i < len(a.ext) && off+take > a.ext[i].off) {
		panic(fmt.Sprintf("mptx: BUG: rangeAlloc.free(%v, %v) of a range that is (partly) free", off, n))
	}
	a.used -= take
	mergeL := i > 0 && a.ext[i-1].off+a.ext[i-1].n == off
	mergeR := i < len(a.ext) && off+take == a.ext[i].off
	switch {
	case mergeL && mergeR:
		a.ext[i-1].n += take + a.ext[i].n
		a.ext = append(a.ext[:i], a.ext[i+1:]...)
	case mergeL:
		a.ext[i-1].n += take
	case mergeR:
		a.ext[i].off, a.ext[i].n = off, a.ext[i].n+take
	default:
		a.ext = append(a.ext, extent{})
		copy(a.ext[i+1:], a.ext[i:])
		a.ext[i] = extent{off, take}
	}
}

// inUse returns the bytes allocated (after rounding).
func (a *rangeAlloc) inUse() units.Bytes { return a.used }
