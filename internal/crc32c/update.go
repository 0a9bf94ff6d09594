package crc32c

import "hash/crc32"

// castagnoli is the standard library's CRC-32C table (and, on amd64, its
// SSE4.2 implementation, which Update uses for short inputs and tails).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of p.
func Checksum(p []byte) uint32 { return Update(0, p) }

// Update returns the CRC-32C of the bytes whose checksum is crc followed
// by p (crc32.Update with the Castagnoli table, same results).
//
// It runs the fastest of up to three implementations on this processor,
// measured once at the first call (choose.go): on amd64 with AVX-512 and
// VPCLMULQDQ, folding 256 bytes at a time by carry-less multiplication
// (fold_amd64.go; the standard library folds only the IEEE polynomial);
// hash/crc32 (SSE4.2's CRC32 instruction on three streams on amd64);
// or slicing-by-8 table look-ups, which win where the instruction is
// emulated (slicing.go).
func Update(crc uint32, p []byte) uint32 { return chosen().run(crc, p) }

// xnmodp returns x^n mod P (reflected, as multmodp).
func xnmodp(n uint64) uint32 { return xpowmodp(n, 0) }

// foldPair returns the constants that move a 128-bit block D bits
// forward: x^(64+D−1) mod P for its first 64 bits, x^(D−1) mod P for the
// others, as bit-reflected 64-bit values (bit i the coefficient of
// x^(63−i)).
func foldPair(d uint64) (lo, hi uint64) {
	return uint64(xnmodp(64+d-1)) << 32, uint64(xnmodp(d-1)) << 32
}
