package crc32c

import "encoding/binary"

// Slicing-by-8 (Kounavis and Berry, "A Systematic Approach to Building
// High Performance Software-Based CRC Generators", ISCC 2005): eight
// 256-entry tables, slice8[k][b] the CRC register contribution of byte b
// followed by k zero bytes, so that eight bytes cost eight table look-ups
// and no data-dependent branch. hash/crc32 has the same code, but uses it
// for Castagnoli only where the processor has no CRC instruction; this
// copy lets Update run it where the instruction exists but is slow: under
// an emulator such as qemu's TCG (the Soft-RoCE VM of make rxe-test), the
// SSE4.2 CRC32 instruction is a helper call per instruction and runs at
// 180 MB/s, these look-ups, translated to host code, at 610 MB/s
// (choose.go measures which is faster where it runs).

// slice8 is the slicing-by-8 table of the reflected Castagnoli polynomial.
var slice8 = func() (t [8][256]uint32) {
	for i := range 256 {
		c := uint32(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ poly
			} else {
				c >>= 1
			}
		}
		t[0][i] = c
	}
	for i := range 256 {
		c := t[0][i]
		for k := 1; k < 8; k++ {
			c = t[0][c&0xff] ^ c>>8
			t[k][i] = c
		}
	}
	return t
}()

// updateSlicing8 returns the CRC-32C of the bytes whose checksum is crc
// followed by p, by slicing-by-8.
func updateSlicing8(crc uint32, p []byte) uint32 {
	t := &slice8
	c := ^crc
	for len(p) >= 8 {
		c ^= binary.LittleEndian.Uint32(p)
		c = t[7][c&0xff] ^ t[6][c>>8&0xff] ^ t[5][c>>16&0xff] ^ t[4][c>>24] ^
			t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]]
		p = p[8:]
	}
	for _, b := range p {
		c = t[0][byte(c)^b] ^ c>>8
	}
	return ^c
}
