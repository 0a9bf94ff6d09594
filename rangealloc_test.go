package mptx

import (
	"math/rand/v2"
	"testing"

	"github.com/mptx-dev/mptx/units"
)

// TestRangeAllocRandom checks the allocator against a byte map: ranges
// never overlap, stay inside the region, free merges back to one extent.
func TestRangeAllocRandom(t *testing.T) {
	const size = 1<<20 + 3*1024 // not a multiple of the alignment
	a := newRangeAlloc(size)
	owner := make([]int, size)
	type r struct{ off, n units.Bytes }
	var live []r
	rng := rand.New(rand.NewPCG(1, 2))
	for step := 0; step < 20000; step++ {
		if len(live) > 0 && rng.IntN(2) == 0 {
			k := rng.IntN(len(live))
			x := live[k]
			a.free(x.off, x.n)
			for i := x.off; i < x.off+x.n; i++ {
				owner[i] = 0
			}
			live = append(live[:k], live[k+1:]...)
			continue
		}
		n := units.Bytes(1 + rng.IntN(100_000))
		off, ok := a.alloc(n)
		if !ok {
			continue
		}
		if off < 0 || off+n > size || off%rangeAlign != 0 {
			t.Fatalf("alloc(%v) = %v: outside the region or unaligned", n, off)
		}
		for i := off; i < off+n; i++ {
			if owner[i] != 0 {
				t.Fatalf("alloc(%v) = %v overlaps a live range at %v", n, off, i)
			}
			owner[i] = step + 1
		}
		live = append(live, r{off, n})
	}
	for _, x := range live {
		a.free(x.off, x.n)
	}
	if len(a.ext) != 1 || a.ext[0] != (extent{0, size}) || a.inUse() != 0 {
		t.Fatalf("after freeing everything: %+v, in use %v; want one extent of the whole region", a.ext, a.inUse())
	}
	if _, ok := a.alloc(size + 1); ok {
		t.Fatal("alloc larger than the region succeeded")
	}
	if off, ok := a.alloc(size); !ok || off != 0 {
		t.Fatalf("alloc of the whole region = %v, %v", off, ok)
	}
}
