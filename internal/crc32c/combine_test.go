package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

var table = crc32.MakeTable(crc32.Castagnoli)

// TestCombine checks Combine against the checksum of the concatenation,
// computed directly, for split points that cover empty parts, odd lengths
// and lengths past a power of two.
func TestCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20+37)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for _, n := range []int{0, 1, 7, 64, 4096, 65535, 1 << 20, len(buf)} {
		for _, cut := range []int{0, 1, n / 3, n / 2, n - 1, n} {
			if cut < 0 || cut > n {
				continue
			}
			a, b := buf[:cut], buf[cut:n]
			want := crc32.Checksum(buf[:n], table)
			got := Combine(crc32.Checksum(a, table), crc32.Checksum(b, table), uint64(len(b)))
			if got != want {
				t.Errorf("Combine(CRC of %d bytes, CRC of %d bytes) = %#08x, want %#08x", len(a), len(b), got, want)
			}
		}
	}
	// Many parts, folded left to right.
	var crc uint32
	for off := 0; off < len(buf); {
		n := min(1+rng.IntN(100_000), len(buf)-off)
		crc = Combine(crc, crc32.Checksum(buf[off:off+n], table), uint64(n))
		off += n
	}
	if want := crc32.Checksum(buf, table); crc != want {
		t.Errorf("folded Combine over random parts = %#08x, want %#08x", crc, want)
	}
	// The check value of RFC 3720 §B.4 survives a split.
	s := []byte("123456789")
	if got := Combine(crc32.Checksum(s[:4], table), crc32.Checksum(s[4:], table), 5); got != 0xe3069283 {
		t.Errorf("Combine over \"1234\"‖\"56789\" = %#08x, want 0xe3069283", got)
	}
}

func TestCombineNoAllocs(t *testing.T) {
	if a := testing.AllocsPerRun(100, func() { _ = Combine(1, 2, 4<<20) }); a != 0 {
		t.Errorf("Combine allocates %.1f times; want 0", a)
	}
}

func BenchmarkCombine(b *testing.B) {
	b.ReportAllocs()
	var s uint32
	for i := range b.N {
		s = Combine(s, uint32(i), 4<<20)
	}
	sink = s
}

var sink uint32

// TestPowersBeyond2To32: x^(a+b) = x^a·x^b for exponents past 2^32 bits
// (tensors of 512 MiB and more). A table of x^(2^k) that wrapped every 32
// entries, as zlib's does for the IEEE polynomial, fails it: for
// Castagnoli's P, x^(2^32) mod P is x^2.
func TestPowersBeyond2To32(t *testing.T) {
	sq := uint32(1) << 30 // x
	for range 32 {
		sq = multmodp(sq, sq)
	}
	if got := x8nmodp(1 << 29); got != sq || got != 1<<29 {
		t.Fatalf("x^(2^32) mod P = %#x by the table, %#x by squaring; want %#x (x^2)", got, sq, uint32(1)<<29)
	}
	for _, c := range [][2]uint64{{1 << 29, 1}, {3 << 30, 12345}, {1 << 40, 1<<40 + 7}, {1<<61 - 1, 1 << 60}} {
		a, b := c[0], c[1]
		if got, want := multmodp(x8nmodp(a), x8nmodp(b)), x8nmodp(a+b); got != want {
			t.Errorf("x^(8·%d)·x^(8·%d) = %#x, x^(8·%d) = %#x", a, b, got, a+b, want)
		}
	}
}
