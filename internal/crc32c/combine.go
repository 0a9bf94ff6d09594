// Package crc32c combines CRC-32C values (Castagnoli, reflected; the
// checksum of chunk.CRC32C): the CRC of a concatenation from the CRCs of
// its parts, so that the parts of a buffer can be checksummed separately,
// in any order, each while it is still in the CPU cache.
//
// The method is zlib's crc32_combine (zlib 1.2.12, crc32.c: multmodp and
// x2nmodp): with A and B byte strings and P the polynomial,
// CRC(A‖B) = CRC(A)·x^(8·len(B)) mod P ⊕ CRC(B), where multiplying by
// x^(8·n) mod P takes O(log n) polynomial products from a table of
// x^(2^k) mod P. It costs about a microsecond and allocates nothing.
package crc32c

// poly is the reflected Castagnoli polynomial.
const poly = 0x82f63b78

// x2n[k] is x^(2^k) mod P, reflected, for every k that xpowmodp can
// reach (n·2^3 with n < 2^64). The table does not repeat every 32 entries
// as zlib's does for the IEEE polynomial: Castagnoli's P is (x+1) times a
// degree-31 polynomial, and x^(2^32) mod P is x^2, not x.
var x2n = func() (t [64 + 3]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < len(t); k++ {
		p = multmodp(p, p)
		t[k] = p
	}
	return t
}()

// multmodp returns a·b mod P (reflected: bit 31 is x^0).
func multmodp(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				break
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

// x8nmodp returns x^(8·n) mod P.
func x8nmodp(n uint64) uint32 { return xpowmodp(n, 3) }

// xpowmodp returns x^(n·2^k) mod P, k ≤ 3: the product of x^(2^(i+k))
// over the bits i of n (zlib's x2nmodp).
func xpowmodp(n uint64, k int) uint32 {
	p := uint32(1) << 31 // x^0
	for ; n != 0; k++ {
		if n&1 != 0 {
			p = multmodp(x2n[k], p)
		}
		n >>= 1
	}
	return p
}

// Combine returns the CRC-32C of A‖B given crcA = CRC-32C(A), crcB =
// CRC-32C(B) and lenB = len(B) in bytes.
func Combine(crcA, crcB uint32, lenB uint64) uint32 {
	return multmodp(x8nmodp(lenB), crcA) ^ crcB
}
