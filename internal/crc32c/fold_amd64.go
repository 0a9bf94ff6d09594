package crc32c

import "golang.org/x/sys/cpu"

// Folding (Gopal et al., "Fast CRC Computation for Generic Polynomials
// Using PCLMULQDQ Instruction", Intel, 2009), with four 512-bit
// accumulators, so 16 independent 128-bit lanes.
//
// A 128-bit block A of the message, with n bits of message after it,
// contributes A(x)·x^n. Splitting A into its first 64 bits L (the higher
// degrees) and the rest H, A·x^D ≡ L·(x^(64+D) mod P) + H·(x^D mod P)
// (mod P), a polynomial of degree < 96 that can be added to the block D
// bits further on without changing the message's residue mod P. A
// carry-less product of two bit-reflected 64-bit values comes out
// multiplied by x, so the constants are x^(64+D−1) mod P and x^(D−1) mod P
// (foldPair). The CRC only depends on the message's residue, so once the
// message is folded into one 128-bit block A (with the initial CRC added
// to its first 32 bits, as a CRC register does), the CRC is A(x)·x^32 mod
// P: two CRC32 instructions from a zero register.
//
// The main loop folds each accumulator across D = 2048 bits (the four
// registers, 256 bytes); then the registers are folded into one (D =
// 512) and its four lanes into one (D = 384, 256, 128).

// foldBlock is the unit fold consumes: its input length is a multiple.
const foldBlock = 256

// foldMin is the shortest input folded: one block. At 256 bytes the fold
// took 8–11 ns against hash/crc32's 19–28 (512 bytes: 11–13 against 31).
const foldMin = foldBlock

// haveFold reports whether this processor runs foldAVX512.
var haveFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasSSE42

// foldK holds the constant pairs (low qword's, high qword's) of foldPair:
// [0] D = 2048 (the main loop), [1] D = 512 (register into register),
// [2..4] D = 384, 256, 128 (lanes 0, 1, 2 into lane 3), [5] zero (lane 3
// stays); laid out for foldAVX512.
var foldK = [12]uint64{}

func init() {
	for i, d := range []uint64{2048, 512, 384, 256, 128} {
		foldK[2*i], foldK[2*i+1] = foldPair(d)
	}
}

// fold returns the CRC register (not inverted) after p, from register
// crc; len(p) is a positive multiple of foldBlock.
func fold(crc uint32, p []byte) uint32 { return foldAVX512(crc, &p[0], len(p), &foldK) }

// foldAVX512 is fold in assembly (fold_amd64.s).
//
//go:noescape
func foldAVX512(crc uint32, p *byte, n int, k *[12]uint64) uint32
