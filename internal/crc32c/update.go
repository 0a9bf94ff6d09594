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
// On amd64 processors with AVX-512 and VPCLMULQDQ, inputs of foldMin bytes
// or more are folded 256 bytes at a time by carry-less multiplication
// (update_amd64.go); elsewhere, and for short inputs and tails, it is
// hash/crc32 (SSE4.2's CRC32 instruction on three streams on amd64). The
// standard library folds only the IEEE polynomial this way.
func Update(crc uint32, p []byte) uint32 {
	if haveFold && len(p) >= foldMin {
		n := len(p) &^ (foldBlock - 1)
		crc = ^fold(^crc, p[:n])
		p = p[n:]
	}
	return crc32.Update(crc, castagnoli, p)
}

// xnmodp returns x^n mod P (reflected, as multmodp).
func xnmodp(n uint64) uint32 { return xpowmodp(n, 0) }

// foldPair returns the constants that move a 128-bit block D bits
// forward: x^(64+D−1) mod P for its first 64 bits, x^(D−1) mod P for the
// others, as bit-reflected 64-bit values (bit i the coefficient of
// x^(63−i)).
func foldPair(d uint64) (lo, hi uint64) {
	return uint64(xnmodp(64+d-1)) << 32, uint64(xnmodp(d-1)) << 32
}
