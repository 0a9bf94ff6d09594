package chunk

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/mptx-dev/mptx/units"
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

func TestChunker(t *testing.T) {
	r := testRand(t)
	size := 3*MinSize + 1000
	p, err := NewPlan(size, MinSize, 1)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for _, batch := range []int{1, 2, 3, 4, 64} {
		for _, withCRC := range []bool{false, true} {
			c := NewChunker(42, p)
			if withCRC {
				if err := c.SetData(data); err != nil {
					t.Fatal(err)
				}
			}
			var got []Chunk
			dst := make([]Chunk, batch)
			for {
				n := c.Next(dst)
				if n == 0 {
					break
				}
				if n > batch {
					t.Fatalf("Next(len %d) = %d", batch, n)
				}
				got = append(got, dst[:n]...)
				if c.Remaining() != p.Count-len(got) {
					t.Fatalf("Remaining() = %d after %d chunks of %d", c.Remaining(), len(got), p.Count)
				}
			}
			if len(got) != p.Count {
				t.Fatalf("batch %d: got %d chunks, want %d", batch, len(got), p.Count)
			}
			for i, ch := range got {
				off, n := p.Span(i)
				want := Chunk{Transfer: 42, Index: uint32(i), Offset: off, Len: n}
				if withCRC {
					want.CRC, want.HasCRC = CRC32C(data[off:off+n]), true
				}
				if ch != want {
					t.Errorf("batch %d crc %v: chunk %d = %+v, want %+v", batch, withCRC, i, ch, want)
				}
				if !ch.Verify(data[off : off+n]) {
					t.Errorf("chunk %+v does not verify its own payload", ch)
				}
				if withCRC {
					bad := bytes.Clone(data[off : off+n])
					bad[len(bad)/2] ^= 1
					if ch.Verify(bad) {
						t.Errorf("chunk %+v verifies a corrupted payload", ch)
					}
				}
				if ch.Verify(data[off : off+n-1]) {
					t.Errorf("chunk %+v verifies a payload one byte short", ch)
				}
			}
		}
	}
}

func TestChunkerResetAndZero(t *testing.T) {
	var zero Chunker
	if n := zero.Next(make([]Chunk, 4)); n != 0 || zero.Remaining() != 0 {
		t.Errorf("zero Chunker: Next = %d, Remaining = %d; want 0, 0", n, zero.Remaining())
	}
	p1, _ := NewPlan(10*MiB, 4*MiB, 1)
	p2, _ := NewPlan(MinSize, MinSize, 1)
	c := NewChunker(1, p1)
	if err := c.SetData(make([]byte, p1.Size)); err != nil {
		t.Fatal(err)
	}
	dst := make([]Chunk, 1)
	c.Next(dst)
	c.Reset(2, p2)
	if n := c.Next(dst); n != 1 || dst[0] != (Chunk{Transfer: 2, Len: MinSize}) {
		t.Errorf("after Reset: Next = %d, %+v; want 1, chunk 0 of transfer 2 without CRC", n, dst[0])
	}
	if c.Plan() != p2 {
		t.Errorf("Plan() = %v, want %v", c.Plan(), p2)
	}
	if n := c.Next(dst); n != 0 {
		t.Errorf("Next after the last chunk = %d, want 0", n)
	}
	if n := c.Next(nil); n != 0 {
		t.Errorf("Next(nil) = %d, want 0", n)
	}
}

func TestChunkerSetDataLength(t *testing.T) {
	p, _ := NewPlan(10*MiB, 4*MiB, 1)
	c := NewChunker(1, p)
	err := c.SetData(make([]byte, 100))
	want := "chunk: SetData: payload length 100 does not match the plan's tensor size 10MiB (valid: exactly 10485760 bytes)"
	if err == nil || err.Error() != want {
		t.Errorf("SetData(100 bytes) = %v, want %q", err, want)
	}
}

func TestChunkerNoAllocs(t *testing.T) {
	p, _ := NewPlan(64*MiB, MinSize, 1)
	data := make([]byte, p.Size)
	c := NewChunker(7, p)
	dst := make([]Chunk, 16)
	if a := testing.AllocsPerRun(100, func() {
		if c.Next(dst) == 0 {
			c.Reset(7, p)
		}
	}); a != 0 {
		t.Errorf("Chunker.Next allocates %v times per call, want 0", a)
	}
	if err := c.SetData(data); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(20, func() {
		if c.Next(dst[:1]) == 0 {
			c.Reset(7, p)
			_ = c.SetData(data)
		}
	}); a != 0 {
		t.Errorf("Chunker.Next with CRC allocates %v times per call, want 0", a)
	}
}

func BenchmarkChunkerNext(b *testing.B) {
	p, _ := NewPlan(64*units.GiB, 0, 4)
	c := NewChunker(1, p)
	dst := make([]Chunk, 32)
	b.ReportAllocs()
	for b.Loop() {
		n := c.Next(dst)
		if n == 0 {
			c.Reset(1, p)
		}
		sinkInt += n
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

var (
	sinkInt int
	sinkU32 uint32
)
