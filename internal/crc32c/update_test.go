package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"
)

// TestUpdateMatchesStdlib: Update, and each implementation this processor
// can run (fold only on amd64 with AVX-512), agree with hash/crc32 for
// every length around the fold's thresholds and block multiples, at every
// alignment, from several starting CRCs.
func TestUpdateMatchesStdlib(t *testing.T) {
	t.Logf("fold available: %v; Update uses %s", haveFold, Impl())
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 64<<10+64)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	var lens []int
	for n := 0; n <= 2*foldMin+3*foldBlock; n++ {
		lens = append(lens, n)
	}
	lens = append(lens, 4096, 4097, 8191, 65535, 64<<10)
	fs := map[string]func(uint32, []byte) uint32{"Update": Update}
	for _, m := range candidates() {
		fs[m.String()] = m.run
	}
	for name, f := range fs {
		for _, init := range []uint32{0, 1, 0xffffffff, 0x12345678} {
			for _, n := range lens {
				for _, off := range []int{0, 1, 7, 13, 63} {
					p := buf[off : off+n]
					want := crc32.Update(init, castagnoli, p)
					if got := f(init, p); got != want {
						t.Fatalf("%s(%#x, %d bytes at offset %d) = %#x, want %#x", name, init, n, off, got, want)
					}
				}
			}
		}
	}
}

// TestFastest: the choice goes to the shortest best-of-runs time, however
// long a candidate's other runs took (an interrupted run does not decide),
// and to the earlier candidate on a tie.
func TestFastest(t *testing.T) {
	for _, c := range []struct {
		name  string
		times map[impl][]time.Duration // successive measurements; the last repeats
		want  impl
	}{
		{"instruction fastest", map[impl][]time.Duration{implStdlib: {900, 1000}, implSlicing8: {4000}}, implStdlib},
		{"emulated instruction", map[impl][]time.Duration{implStdlib: {90000}, implSlicing8: {30000}}, implSlicing8},
		{"fold, one run interrupted", map[impl][]time.Duration{implFold: {500, 500, 90000, 500}, implStdlib: {1000}, implSlicing8: {6000}}, implFold},
		{"slowed warm-up and first runs", map[impl][]time.Duration{implStdlib: {50000, 50000, 50000, 1000}, implSlicing8: {4000}}, implStdlib},
		{"tie", map[impl][]time.Duration{implStdlib: {1000}, implSlicing8: {1000}}, implStdlib},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cands []impl
			for m := range numImpls {
				if _, ok := c.times[m]; ok {
					cands = append(cands, m)
				}
			}
			calls := map[impl]int{}
			got := fastest(cands, func(m impl, p []byte) time.Duration {
				if len(p) != calibrationBytes {
					t.Fatalf("measured %d bytes, want %d", len(p), calibrationBytes)
				}
				ts := c.times[m]
				d := ts[min(calls[m], len(ts)-1)]
				calls[m]++
				return d
			})
			if got != c.want {
				t.Errorf("fastest = %v, want %v", got, c.want)
			}
			for _, m := range cands {
				if calls[m] != calibrationRuns+1 {
					t.Errorf("%v measured %d times, want %d (a warm-up and %d runs)", m, calls[m], calibrationRuns+1, calibrationRuns)
				}
			}
		})
	}
}

// TestFoldPair pins the conventions the fold's constants rest on:
// xnmodp's reflected representation (bit 31 is x^0, and x^32 mod P is the
// polynomial itself) and foldPair's exponents (x^(64+D−1) and x^(D−1):
// the carry-less product of reflected operands carries an extra factor
// of x). A wrong constant would also fail TestUpdateMatchesStdlib; this
// test says which half is wrong.
func TestFoldPair(t *testing.T) {
	lo, hi := foldPair(128)
	// x^191 mod P and x^127 mod P, reflected, shifted into the high half.
	if lo != uint64(xnmodp(191))<<32 || hi != uint64(xnmodp(127))<<32 {
		t.Fatalf("foldPair(128) = %#x, %#x", lo, hi)
	}
	if xnmodp(0) != 1<<31 || xnmodp(1) != 1<<30 || xnmodp(31) != 1 || xnmodp(32) != poly {
		t.Fatalf("xnmodp: x^0=%#x x^1=%#x x^31=%#x x^32=%#x", xnmodp(0), xnmodp(1), xnmodp(31), xnmodp(32))
	}
}

func FuzzUpdate(f *testing.F) {
	f.Add(uint32(0), make([]byte, 2048))
	f.Fuzz(func(t *testing.T, init uint32, p []byte) {
		want := crc32.Update(init, castagnoli, p)
		if got := Update(init, p); got != want {
			t.Fatalf("Update(%#x, %d bytes) = %#x, want %#x", init, len(p), got, want)
		}
		for _, m := range candidates() {
			if got := m.run(init, p); got != want {
				t.Fatalf("%v(%#x, %d bytes) = %#x, want %#x", m, init, len(p), got, want)
			}
		}
	})
}

func benchUpdate(b *testing.B, n int, f func(uint32, []byte) uint32) {
	p := make([]byte, n)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		f(0, p)
	}
}

func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{1 << 10, 4 << 10, 256 << 10, 64 << 20} {
		b.Run(sizeName(n)+"/Update", func(b *testing.B) { benchUpdate(b, n, Update) })
		for _, m := range candidates() {
			b.Run(sizeName(n)+"/"+m.String(), func(b *testing.B) { benchUpdate(b, n, m.run) })
		}
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return itoa(n>>20) + "MiB"
	case n >= 1<<10:
		return itoa(n>>10) + "KiB"
	}
	return itoa(n) + "B"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
