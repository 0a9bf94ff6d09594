package crc32c

import (
	"hash/crc32"
	"math"
	"sync"
	"time"
)

// An impl is one way of computing Update; the package has up to three and
// uses the fastest on the processor it runs on.
type impl uint8

const (
	// implFold folds blocks by carry-less multiplication (amd64 with
	// AVX-512 and VPCLMULQDQ), hash/crc32 for the short rest.
	implFold impl = iota
	// implStdlib is hash/crc32: SSE4.2's CRC32 instruction on amd64,
	// the CRC32C instructions on arm64, else slicing-by-8.
	implStdlib
	// implSlicing8 is this package's slicing-by-8 (slicing.go).
	implSlicing8
	numImpls
)

var implNames = [numImpls]string{"fold", "stdlib", "slicing-by-8"}

func (m impl) String() string { return implNames[m] }

// run computes Update with implementation m.
func (m impl) run(crc uint32, p []byte) uint32 {
	switch m {
	case implFold:
		if len(p) >= foldMin {
			n := len(p) &^ (foldBlock - 1)
			crc = ^fold(^crc, p[:n])
			p = p[n:]
		}
		return crc32.Update(crc, castagnoli, p)
	case implSlicing8:
		return updateSlicing8(crc, p)
	}
	return crc32.Update(crc, castagnoli, p)
}

// candidates returns the implementations this processor can run.
func candidates() []impl {
	if haveFold {
		return []impl{implFold, implStdlib, implSlicing8}
	}
	return []impl{implStdlib, implSlicing8}
}

// The choice is measured, as Linux chooses its RAID-6 and XOR routines at
// boot (lib/raid6/algos.c, crypto/xor.c): what the processor advertises
// does not say what is fast. On hardware, folding beats the CRC32
// instruction (55 against 25 GB/s on Zen 5) and the instruction beats
// table look-ups several times over; under qemu's TCG the instruction is
// emulated by a helper call and the look-ups run 3.4 times as fast
// (slicing.go). The measurement takes each candidate's best of
// calibrationRuns passes over calibrationBytes (about 50 µs in all on
// the host, under 1 ms under TCG), once, at the first Update; the best of
// several runs discards a run that a preemption or an interrupt
// lengthened. A wrong choice would cost speed, never correctness: every
// implementation returns the same checksum (TestUpdateMatchesStdlib,
// FuzzUpdate).
const (
	calibrationBytes = 16 << 10
	calibrationRuns  = 5
)

// chosen is the implementation Update uses, measured once.
var chosen = sync.OnceValue(func() impl {
	return fastest(candidates(), func(m impl, p []byte) time.Duration {
		t0 := time.Now()
		m.run(0, p)
		return time.Since(t0)
	})
})

// fastest returns the candidate whose best of calibrationRuns passes
// over calibrationBytes, as measure times them, was shortest; the earlier
// candidate wins a tie.
func fastest(cands []impl, measure func(impl, []byte) time.Duration) impl {
	p := make([]byte, calibrationBytes)
	for i := range p {
		p[i] = byte(i*131 + i>>8)
	}
	best, bestD := cands[0], time.Duration(math.MaxInt64)
	for _, m := range cands {
		measure(m, p) // warm: code and tables into the caches
		d := measure(m, p)
		for range calibrationRuns - 1 {
			d = min(d, measure(m, p))
		}
		if d < bestD {
			best, bestD = m, d
		}
	}
	return best
}

// Impl names the implementation Update uses on this processor ("fold",
// "stdlib" or "slicing-by-8"), measuring it if it has not been yet: for
// logs and benchmarks.
func Impl() string { return chosen().String() }
