package analyze

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestHistQuantile checks the histogram's percentiles against the exact
// nearest-rank ones (percentile) on several distributions: within 1/32.
func TestHistQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, gen := range map[string]func() int64{
		"small":     func() int64 { return rng.Int64N(40) },
		"uniform":   func() int64 { return rng.Int64N(int64(time.Second)) },
		"lognormal": func() int64 { return int64(math.Exp(rng.NormFloat64()*2 + 12)) },
		"huge":      func() int64 { return math.MaxInt64 - rng.Int64N(1000) },
	} {
		var h hist
		var exact []time.Duration
		for range 20000 {
			v := gen()
			h.add(v)
			exact = append(exact, time.Duration(v))
		}
		slices.Sort(exact)
		for _, p := range []int{1, 10, 50, 90, 99, 100} {
			want := float64(percentile(exact, p))
			got := float64(h.quantile(float64(p)))
			if d := math.Abs(got - want); d > want/32+0.5 {
				t.Errorf("%s: p%d = %v, exact %v (error %.2f%%, want <= 3.1%%)", name, p, got, want, 100*d/want)
			}
		}
	}
	var h hist
	if h.quantile(50) != 0 {
		t.Errorf("empty histogram's median = %d, want 0", h.quantile(50))
	}
	h.add(-5)
	if h.quantile(99) != 0 {
		t.Errorf("negative values count as 0: got %d", h.quantile(99))
	}
	var a, b hist
	a.add(10)
	b.add(1000)
	a.merge(&b)
	if a.n != 2 || a.quantile(100) < 990 || a.quantile(1) != 10 {
		t.Errorf("merge: n=%d p1=%d p100=%d", a.n, a.quantile(1), a.quantile(100))
	}
}
