package verbs

import (
	"fmt"
	"sort"
	"sync"
)

// allocator hands out aligned ranges of a fixed region [0, size): first
// fit over a sorted free list, coalescing neighbours on free. It never
// touches the memory itself. Tensor buffers are few and large, so the
// linear scan is not a concern. It is safe for concurrent use.
type allocator struct {
	mu    sync.Mutex
	size  int64
	align int64
	free  []span // sorted by off, non-adjacent
	used  map[int64]int64
}

type span struct{ off, len int64 }

func newAllocator(size, align int64) *allocator {
	if align <= 0 || align&(align-1) != 0 {
		panic(fmt.Sprintf("verbs: BUG: allocator alignment %d is not a power of two", align))
	}
	a := &allocator{size: size, align: align, used: map[int64]int64{}}
	if size > 0 {
		a.free = []span{{0, size}}
	}
	return a
}

// alloc returns the offset of n bytes (rounded up to the alignment).
func (a *allocator) alloc(n int64) (int64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("verbs: Alloc(%d): size must be > 0", n)
	}
	n = (n + a.align - 1) &^ (a.align - 1)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, s := range a.free {
		if s.len < n {
			continue
		}
		if s.len == n {
			a.free = append(a.free[:i], a.free[i+1:]...)
		} else {
			a.free[i] = span{s.off + n, s.len - n}
		}
		a.used[s.off] = n
		return s.off, nil
	}
	var largest int64
	for _, s := range a.free {
		largest = max(largest, s.len)
	}
	return 0, fmt.Errorf("verbs: Alloc(%d): the pool has no free range that large (pool %d bytes, largest free %d); raise HostConfig.PoolSize", n, a.size, largest)
}

// release returns the range at off. Releasing an offset that is not
// allocated panics: it is a double free.
func (a *allocator) release(off int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.used[off]
	if !ok {
		panic(fmt.Sprintf("verbs: BUG: free of pool offset %d that is not allocated (double free?)", off))
	}
	delete(a.used, off)
	i := sort.Search(len(a.free), func(i int) bool { return a.free[i].off > off })
	a.free = append(a.free, span{})
	copy(a.free[i+1:], a.free[i:])
	a.free[i] = span{off, n}
	// Coalesce with the right, then the left neighbour.
	if i+1 < len(a.free) && a.free[i].off+a.free[i].len == a.free[i+1].off {
		a.free[i].len += a.free[i+1].len
		a.free = append(a.free[:i+1], a.free[i+2:]...)
	}
	if i > 0 && a.free[i-1].off+a.free[i-1].len == a.free[i].off {
		a.free[i-1].len += a.free[i].len
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
}

// inUse returns the bytes currently allocated.
func (a *allocator) inUse() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var t int64
	for _, n := range a.used {
		t += n
	}
	return t
}
