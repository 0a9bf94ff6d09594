package cc

import (
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// us returns the instant n microseconds after the epoch's zero.
func us(n int64) vtime.Time { return vtime.Time(n * int64(time.Microsecond)) }

// usd returns n microseconds as a duration.
func usd(n float64) time.Duration { return time.Duration(n * float64(time.Microsecond)) }

const gbps = float64(units.Gbps)

// near reports whether got is within a relative 1e-9 (or absolute 1e-9
// near zero) of want.
func near(got, want float64) bool {
	if got == want {
		return true
	}
	d := math.Abs(got - want)
	return d <= 1e-9 || d <= 1e-9*math.Abs(want)
}

// path100G is a 100 Gb/s path with a 10 µs base RTT and 4 KiB MTU.
var path100G = PathInfo{LineRate: 100 * units.Gbps, BaseRTT: 10 * time.Microsecond, MTU: 4096, Hops: 1}

// testSeed returns the seed for randomised tests: TEST_SEED if set,
// otherwise a fixed value, logged either way so a failure can be replayed.
func testSeed(t testing.TB) uint64 {
	t.Helper()
	seed := uint64(20240917)
	if s := os.Getenv("TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TEST_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("TEST_SEED=%d", seed)
	return seed
}

// mustAlg builds a registered algorithm with default parameters.
func mustAlg(t testing.TB, name string, path PathInfo) Algorithm {
	t.Helper()
	a, err := New(name, nil, path)
	if err != nil {
		t.Fatalf("New(%q) = %v", name, err)
	}
	return a
}
