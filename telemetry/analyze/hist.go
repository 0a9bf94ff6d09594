package analyze

import (
	"math"
	"math/bits"
)

// hist is a log-linear histogram of non-negative int64 values (durations
// in nanoseconds, rates in bit/s): each power of two is split into
// histSub equal buckets, as HdrHistogram does, so a value's bucket is
// found with a leading-zero count and a shift, and a percentile read from
// it is within 1/histSub (3.1 %) of the exact nearest-rank value. Its
// size is fixed (64 × 32 counters, 16 KiB) whatever the number of values,
// which is what bounds the aggregate report's memory. The zero value is
// an empty histogram.
type hist struct {
	n      int64
	min    int64
	max    int64
	counts *[64 * histSub]int64 // allocated on the first value
}

const (
	histSubBits = 5
	histSub     = 1 << histSubBits
)

// bucket returns v's bucket index.
func bucket(v int64) int {
	if v < histSub {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - 1 // v in [2^e, 2^(e+1)), e >= histSubBits
	sub := int(v>>(e-histSubBits)) - histSub
	return (e-histSubBits+1)*histSub + sub
}

// lowest returns the smallest value in bucket i.
func lowest(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	e := i/histSub + histSubBits - 1
	sub := int64(i%histSub) + histSub
	return sub << (e - histSubBits)
}

// add records v (negative values count as 0).
func (h *hist) add(v int64) {
	v = max(v, 0)
	if h.counts == nil {
		h.counts = new([64 * histSub]int64)
		h.min, h.max = v, v
	}
	h.counts[bucket(v)]++
	h.n++
	h.min, h.max = min(h.min, v), max(h.max, v)
}

// merge adds o's values to h.
func (h *hist) merge(o *hist) {
	if o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = new([64 * histSub]int64)
		h.min, h.max = o.min, o.max
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.min, h.max = min(h.min, o.min), max(h.max, o.max)
}

// quantile returns the p-th percentile (0 < p <= 100, nearest rank): the
// midpoint of the bucket holding that rank, clamped to the values seen; 0
// when empty.
func (h *hist) quantile(p float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(p / 100 * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			lo, hi := lowest(i), int64(math.MaxInt64)
			if next := lowest(i + 1); next > lo {
				hi = next - 1
			}
			return min(max(lo+(hi-lo)/2, h.min), h.max)
		}
	}
	return h.max
}
