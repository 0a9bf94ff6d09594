package chunk

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// testRand returns a seeded generator; TEST_SEED overrides the seed, which
// is logged so that a failure can be replayed.
func testRand(tb testing.TB) *rand.Rand {
	tb.Helper()
	seed := uint64(1)
	if s := os.Getenv("TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			tb.Fatalf("TEST_SEED=%q: %v", s, err)
		}
		seed = v
	}
	tb.Logf("TEST_SEED=%d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func TestCRC32C(t *testing.T) {
	inc, dec := make([]byte, 32), make([]byte, 32)
	for i := range 32 {
		inc[i], dec[i] = byte(i), byte(31-i)
	}
	for _, tt := range []struct {
		name string
		in   []byte
		want uint32
	}{
		{"empty", nil, 0},
		{"123456789", []byte("123456789"), 0xE3069283}, // the CRC catalogue's check value
		// RFC 3720 §B.4 test vectors.
		{"32 zeros", make([]byte, 32), 0x8A9136AA},
		{"32 ones", bytes.Repeat([]byte{0xFF}, 32), 0x62A8AB43},
		{"incrementing", inc, 0x46DD794E},
		{"decrementing", dec, 0x113FDB5C},
	} {
		if got := CRC32C(tt.in); got != tt.want {
			t.Errorf("CRC32C(%s) = %#08x, want %#08x", tt.name, got, tt.want)
		}
	}
}

func TestUpdateCRC32C(t *testing.T) {
	r := testRand(t)
	b := make([]byte, 1<<16)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	want := CRC32C(b)
	for _, cut := range []int{0, 1, 4095, 4096, 1 << 15, len(b)} {
		if got := UpdateCRC32C(CRC32C(b[:cut]), b[cut:]); got != want {
			t.Errorf("UpdateCRC32C(CRC32C(b[:%d]), b[%d:]) = %#08x, want %#08x", cut, cut, got, want)
		}
	}
}

func BenchmarkCRC32C4MiB(b *testing.B) {
	buf := make([]byte, 4*MiB)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		sinkU32 = CRC32C(buf)
	}
}

var sinkU32 uint32
