// Package slab manages the offsets of one memory region that tensors of
// 4 KiB to many GiB are carved from. It never touches the memory: the
// region, its mapping (hugepages or mmap) and its registration with the
// NIC belong to the caller (a session, or the verbs backend). A Pool hands
// out Blocks, offset ranges of [0, Config.Size), and takes them back.
//
// # Model
//
// Two levels, both in units of Page (4 KiB), both O(1) per operation:
//
//  1. Spans. The region is a list of contiguous spans, each free or in
//     use, kept in address order (boundary links) and, when free, in one
//     of 240 segregated free lists by size. The lists' sizes are
//     floating-point classes with three mantissa bits (8 lists per power
//     of two), and two bitmaps find the first non-empty list at or above
//     a size in a few instructions: the two-level segregated fit (TLSF) of
//     Masmano et al., "TLSF: a new dynamic memory allocator for real-time
//     systems" (ECRTS 2004), in the form Sebastian Aaltonen's
//     OffsetAllocator uses for GPU heaps (and Mooncake Store for its
//     registered buffers). A request takes the whole span found and gives
//     the tail back as a new free span; a freed span merges at once with
//     free neighbours, so no two free spans are ever adjacent.
//
//  2. Slabs. Requests up to SmallMax (Config.SlabSize/8; 8 MiB by default)
//     are rounded up to a size class and served from slabs: spans cut into
//     8 to 64 equal slots of one class, with a 64-bit free mask each. Up to
//     8 pages the classes are every page count (4, 8, ... 32 KiB); above,
//     four per power of two (40, 48, 56, 64 KiB, 80 KiB, ... 2 MiB, 2.5 MiB
//     ...). A KV-cache block of 2 MiB is a class of its own, so churn of
//     such blocks reuses the same slots and never splits or merges a span.
//     Larger requests (weight shards) are spans of their own, rounded to a
//     page.
//
// # Fragmentation, bounded
//
//   - Internal: a large block wastes less than one page; a small block
//     less than 20% of its class (the gap between two classes is a quarter
//     of the lower power of two, so at most 1/5 of the class above it);
//     a slab has no tail (its span is exactly slots × class).
//   - Between spans: an allocation of n pages fails only if no free span
//     of at least n pages exists. The search first takes any span from a
//     list whose smallest member is large enough (good fit in O(1)) and,
//     when none is, scans the one list that may hold a fitting span, so
//     the pool never refuses a request that one hole could hold. Large
//     blocks are carved from the high end of the span found and slabs from
//     the low end, so the two kinds gather at opposite ends of a hole and
//     what is left between them stays in one piece (TestKVCacheTrace,
//     seeds 7..22: 58 of 640 weight-shard replacements had to evict KV
//     blocks although enough bytes were free, 86 when both kinds took the
//     low end, 73 with 2 MiB blocks as spans of their own instead of slab
//     slots).
//   - Inside slabs: free slots of a class can serve only that class. A
//     slab goes back to the span level as soon as its last slot is freed,
//     except one empty slab kept per class so that alloc/free at the
//     boundary does not split and merge a span every time; those cached
//     slabs are released (and the request retried) before the pool
//     reports that it is full. A slab that cannot get its full span takes
//     half as many slots, down to one, so the slab level never needs more
//     contiguous room than the request itself. What stays stranded is the
//     free slots of partly used slabs: at most (slots−1) per partly used
//     slab of a class, visible in Stats (Classes[i].Free).
//
// # Resources and costs
//
// New allocates everything the Pool will ever need (span and slab
// records, sized by Config.MaxSpans); Alloc and Free allocate nothing and
// take a bounded number of steps, except the failure path of a large
// request, which scans one free list. A Pool has no goroutines, reads no
// clock and does no I/O: the same sequence of calls gives the same
// offsets.
//
// # Concurrency
//
// A Pool is not safe for concurrent use. Callers serialize it with a
// mutex of their own (the session holds one around Alloc and Free, a few
// tens of nanoseconds each); BenchmarkAllocFreeParallel measures that
// arrangement under contention.
//
// The zero Pool is not usable; build one with New.
package slab
