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
