package slab

import (
	"math/bits"

	"github.com/mptx-dev/mptx/units"
)

// Page is the unit of the pool: every block starts on a page boundary of
// the region and its capacity is a whole number of pages.
const Page = 4 * units.KiB

// MaxClasses bounds the number of small size classes (a SlabSize of 1 GiB
// has 56: SmallMax 128 MiB is class 55).
const MaxClasses = 56

// classOf returns the size class of a request of q pages (q >= 1): every
// page count up to 8, then four classes per power of two, m·2^k pages
// with m in 5..8.
func classOf(q uint32) int {
	if q <= 8 {
		return int(q) - 1
	}
	k := bits.Len32(q-1) - 3 // (q-1)>>k is in 4..7
	m := int((q-1)>>k) + 1   // 5..8
	return 8 + (k-1)*4 + (m - 5)
}

// classPages returns the size of class c in pages.
func classPages(c int) uint32 {
	if c < 8 {
		return uint32(c + 1)
	}
	k := (c-8)/4 + 1
	m := (c-8)%4 + 5
	return uint32(m) << k
}

// The span free lists: 8 lists per power of two of the span size in pages
// (three mantissa bits); sizes below 8 pages have a list each.
const numBins = 240

// binFloor returns the list of a free span of q pages (q >= 1): the list
// whose smallest size is the largest one not above q.
func binFloor(q uint32) int {
	if q < 8 {
		return int(q)
	}
	k := bits.Len32(q) - 4 // q>>k is in 8..15
	return 8 + k*8 + int(q>>k) - 8
}

// binMin returns the smallest span size, in pages, list b holds.
func binMin(b int) uint32 {
	if b < 8 {
		return uint32(b)
	}
	k := (b - 8) / 8
	return uint32(8+(b-8)%8) << k
}

// binCeil returns the first list all of whose spans hold q pages;
// numBins if there is none.
func binCeil(q uint32) int {
	b := binFloor(q)
	if binMin(b) < q {
		b++
	}
	return b
}
