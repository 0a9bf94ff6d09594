//go:build amd64 || arm64

package sim

import "unsafe"

// prefetch asks the CPU to start loading the cache line at p (x86
// PREFETCHT0, arm64 PRFM PLDL1KEEP). It has no effect on the program's
// results: a hint, never a fault, whatever p is.
//
//go:noescape
func prefetch(p unsafe.Pointer)

// prefetch2 is prefetch of two lines in one call.
//
//go:noescape
func prefetch2(p, q unsafe.Pointer)
