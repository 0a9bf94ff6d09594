package slab

import (
	"math/rand/v2"
	"testing"
)

func TestClasses(t *testing.T) {
	if got := classOf(32768); got != MaxClasses-1 {
		t.Errorf("classOf(32768 pages = 128 MiB) = %d, want MaxClasses-1 = %d", got, MaxClasses-1)
	}
	prev := uint32(0)
	for c := 0; c < MaxClasses; c++ {
		size := classPages(c)
		if size <= prev {
			t.Fatalf("classPages(%d) = %d, not above classPages(%d) = %d", c, size, c-1, prev)
		}
		if got := classOf(size); got != c {
			t.Errorf("classOf(classPages(%d) = %d) = %d, want %d", c, size, got, c)
		}
		// Every request between two classes takes the upper one, and
		// wastes less than a fifth of it (a page at most up to 8 pages).
		for q := prev + 1; q <= size; q++ {
			if got := classOf(q); got != c {
				t.Fatalf("classOf(%d) = %d, want %d (class sizes %d..%d)", q, got, c, prev, size)
			}
			if waste := size - q; size > 8 && 5*waste >= size {
				t.Fatalf("request of %d pages in class %d of %d pages wastes %d (>= 20%%)", q, c, size, waste)
			}
		}
		prev = size
	}
	for q, want := range map[uint32]uint32{1: 1, 8: 8, 9: 10, 11: 12, 16: 16, 17: 20, 512: 512, 513: 640} {
		if got := classPages(classOf(q)); got != want {
			t.Errorf("classPages(classOf(%d)) = %d, want %d", q, got, want)
		}
	}
}

func TestBins(t *testing.T) {
	check := func(q uint32) {
		t.Helper()
		f := binFloor(q)
		if f < 1 || f >= numBins {
			t.Fatalf("binFloor(%d) = %d, want 1..%d", q, f, numBins-1)
		}
		if binMin(f) > q {
			t.Fatalf("binMin(binFloor(%d)) = %d > %d", q, binMin(f), q)
		}
		if f+1 < numBins && binMin(f+1) <= q {
			t.Fatalf("binMin(binFloor(%d)+1) = %d <= %d: not the floor", q, binMin(f+1), q)
		}
		// Every size that lands in a list at or above binCeil(q) holds q.
		c := binCeil(q)
		if c < numBins && binMin(c) < q {
			t.Fatalf("binCeil(%d) = %d holds sizes from %d", q, c, binMin(c))
		}
		if c > f+1 || (c == f+1 && binMin(f) == q) {
			t.Fatalf("binCeil(%d) = %d, binFloor %d (min %d)", q, c, f, binMin(f))
		}
	}
	for q := uint32(1); q < 1<<16; q++ {
		check(q)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		check(uint32(r.Uint64N(maxPages)) + 1)
	}
	check(maxPages)
	if got := binFloor(maxPages); got != numBins-1 {
		t.Errorf("binFloor(maxPages) = %d, want %d", got, numBins-1)
	}
	for b := 1; b < numBins; b++ {
		if binFloor(binMin(b)) != b {
			t.Errorf("binFloor(binMin(%d) = %d) = %d", b, binMin(b), binFloor(binMin(b)))
		}
	}
}
