#include "textflag.h"

// func foldAVX512(crc uint32, p *byte, n int, k *[12]uint64) uint32
//
// n is a positive multiple of 256. See fold_amd64.go for the method and
// the layout of k.
TEXT ·foldAVX512(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), AX
	MOVQ p+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ k+24(FP), DX

	// The first 256 bytes are the four accumulators; the register goes on
	// the first 32 bits.
	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVD     AX, X4      // zeroes the rest of Z4
	VPXORQ    Z4, Z0, Z0
	ADDQ      $256, SI
	SUBQ      $256, CX
	JZ        reduce

	VBROADCASTI32X4 0(DX), Z8 // D = 2048 in every lane

loop:
	// Each accumulator moves 256 bytes on and takes the next 256 in.
	VMOVDQU64  0(SI), Z12
	VMOVDQU64  64(SI), Z13
	VMOVDQU64  128(SI), Z14
	VMOVDQU64  192(SI), Z15
	VPCLMULQDQ $0x00, Z8, Z0, Z4
	VPCLMULQDQ $0x11, Z8, Z0, Z0
	VPCLMULQDQ $0x00, Z8, Z1, Z5
	VPCLMULQDQ $0x11, Z8, Z1, Z1
	VPCLMULQDQ $0x00, Z8, Z2, Z6
	VPCLMULQDQ $0x11, Z8, Z2, Z2
	VPCLMULQDQ $0x00, Z8, Z3, Z7
	VPCLMULQDQ $0x11, Z8, Z3, Z3
	VPTERNLOGD $0x96, Z12, Z4, Z0 // Z0 ^= Z4 ^ Z12
	VPTERNLOGD $0x96, Z13, Z5, Z1
	VPTERNLOGD $0x96, Z14, Z6, Z2
	VPTERNLOGD $0x96, Z15, Z7, Z3
	ADDQ       $256, SI
	SUBQ       $256, CX
	JNZ        loop

reduce:
	// Registers into Z3, 64 bytes at a time (D = 512).
	VBROADCASTI32X4 16(DX), Z9
	VPCLMULQDQ      $0x00, Z9, Z0, Z4
	VPCLMULQDQ      $0x11, Z9, Z0, Z0
	VPTERNLOGD      $0x96, Z4, Z0, Z1
	VPCLMULQDQ      $0x00, Z9, Z1, Z4
	VPCLMULQDQ      $0x11, Z9, Z1, Z1
	VPTERNLOGD      $0x96, Z4, Z1, Z2
	VPCLMULQDQ      $0x00, Z9, Z2, Z4
	VPCLMULQDQ      $0x11, Z9, Z2, Z2
	VPTERNLOGD      $0x96, Z4, Z2, Z3

	// Lanes 0, 1, 2 onto lane 3 (D = 384, 256, 128; lane 3's constants are
	// zero), then every lane into X4.
	VMOVDQU64     32(DX), Z10
	VPCLMULQDQ    $0x00, Z10, Z3, Z4
	VPCLMULQDQ    $0x11, Z10, Z3, Z5
	VPXORQ        Z5, Z4, Z4
	VEXTRACTI32X4 $3, Z3, X6
	VEXTRACTI64X4 $1, Z4, Y5
	VPXOR         Y5, Y4, Y4
	VEXTRACTI128  $1, Y4, X5
	VPXOR         X5, X4, X4
	VPXOR         X6, X4, X4

	// The CRC register of the folded block: A(x)·x^32 mod P.
	VMOVQ   X4, AX
	VPEXTRQ $1, X4, BX
	XORL    CX, CX
	CRC32Q  AX, CX
	CRC32Q  BX, CX
	VZEROUPPER
	MOVL    CX, ret+32(FP)
	RET
