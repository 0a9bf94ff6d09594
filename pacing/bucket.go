package pacing

import (
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// bucket is the token bucket shared by Pacer and Port: a rate.Limiter
// holding the bucket (one token per byte, never negative here) plus a debt,
// the bytes sent beyond an empty bucket, repaid by the refill before the
// limiter refills again.
type bucket struct {
	lim   *rate.Limiter // nil only in the zero value, which is unpaced
	rate  units.BitRate // current refill rate; Unlimited bypasses lim
	burst units.Bytes   // bucket depth; lim's burst

	last   vtime.Time  // latest instant given to a mutating call
	debt   units.Bytes // bytes owed as of debtAt (0: none)
	debtAt vtime.Time
}

// budgetEpsilon absorbs float64 error in the limiter's token count (its
// refill is d.Seconds()*limit) so that a byte that has exactly accrued is
// not lost to rounding down. It is far below a byte and far above the
// error of the magnitudes involved (burst <= 2^53 tokens is exact).
const budgetEpsilon = 1.0 / 1024

// refillUnlimited is the limiter's limit, in bytes per second, while the
// rate is Unlimited: not rate.Inf, whose zero-elapsed refill is 0*Inf = NaN,
// but a finite rate that refills any bucket within a nanosecond, so that a
// bucket returning to a finite rate starts full (an unpaced sender is
// owed nothing).
const refillUnlimited rate.Limit = 1e30

// stdTime maps a vtime.Time to the time.Time the limiter takes: monotone,
// exact and allocation-free for every int64.
func stdTime(t vtime.Time) time.Time { return time.Unix(0, int64(t)) }

// limitOf converts a rate in bit/s to the limiter's bytes per second.
func limitOf(r units.BitRate) rate.Limit {
	if r == units.Unlimited {
		return refillUnlimited
	}
	return rate.Limit(float64(r) / 8)
}

// addSat returns t+d saturating at vtime.Never (d >= 0).
func addSat(t vtime.Time, d time.Duration) vtime.Time {
	if s := t + vtime.Time(d); s >= t {
		return s
	}
	return vtime.Never
}

func (b *bucket) init(r units.BitRate, burst units.Bytes) {
	b.lim = rate.NewLimiter(limitOf(r), int(burst)) // starts full
	b.rate, b.burst = r, burst
}

func (b *bucket) unpaced() bool { return b.lim == nil || b.rate == units.Unlimited }

// mutate clamps now to the latest instant seen, records it, and ends a
// debt that has been repaid by then. Every method starts here.
func (b *bucket) mutate(now vtime.Time) vtime.Time {
	now = max(now, b.last)
	b.last = now
	if b.debt > 0 {
		if until := b.debtUntil(); now >= until {
			b.drain(until)
			b.debt = 0
		}
	}
	return now
}

// debtUntil returns when the refill will have repaid the debt.
func (b *bucket) debtUntil() vtime.Time { return addSat(b.debtAt, b.rate.TxTime(b.debt)) }

// drain empties the bucket at t (>= every instant the limiter has seen):
// with burst 0 the limiter caps its tokens at 0, and restoring the burst
// at the same instant refills nothing.
func (b *bucket) drain(t vtime.Time) {
	st := stdTime(t)
	b.lim.SetBurstAt(st, 0)
	b.lim.SetBurstAt(st, int(b.burst))
}

// whole returns the limiter's token count as whole bytes in [0, burst].
func (b *bucket) whole(tokens float64) units.Bytes {
	switch {
	case !(tokens > 0): // also NaN, which cannot happen but must not leak
		return 0
	case tokens >= float64(b.burst):
		return b.burst
	}
	return min(units.Bytes(tokens+budgetEpsilon), b.burst)
}

func (b *bucket) budget(now vtime.Time) units.Bytes {
	if b.unpaced() {
		return units.MaxBytes
	}
	return b.whole(b.tokensAt(b.mutate(now)))
}

func (b *bucket) onSent(now vtime.Time, n units.Bytes) {
	if n <= 0 || b.unpaced() {
		return
	}
	now = b.mutate(now)
	if b.debt > 0 {
		b.debt = b.debt.AddSat(n)
		return
	}
	st := stdTime(now)
	if n <= b.burst && b.lim.AllowN(st, int(n)) {
		return
	}
	have := b.whole(b.lim.TokensAt(st))
	b.drain(now)
	if n > have {
		b.debt, b.debtAt = n-have, now
	}
}

// maxAdjust bounds NextSend's nanosecond corrections; float64 error is far
// below one nanosecond's refill at any rate where it could matter, so in
// practice there is at most one step.
const maxAdjust = 64

func (b *bucket) nextSend(now vtime.Time, n units.Bytes) vtime.Time {
	given := max(now, vtime.Epoch)
	if n <= 0 || b.unpaced() {
		return given
	}
	now = b.mutate(now)
	n = min(n, b.burst)
	have := b.tokensAt(now)
	if b.whole(have) >= n {
		return given
	}
	if b.rate <= 0 {
		return vtime.Never
	}
	base := now
	if b.debt > 0 {
		base, have = b.debtUntil(), 0
	}
	// Budget counts a byte once the tokens are within budgetEpsilon of
	// it, so aim there; the loops below correct float64 error.
	ns := math.Ceil((float64(n) - budgetEpsilon - have) * 8e9 / float64(b.rate))
	if !(ns < math.MaxInt64) {
		return vtime.Never
	}
	t := addSat(base, time.Duration(ns))
	for i := 0; i < maxAdjust && t < vtime.Never && !b.fits(t, n); i++ {
		t++
	}
	for i := 0; i < maxAdjust && t-1 > now && b.fits(t-1, n); i++ {
		t--
	}
	return t
}

// tokensAt returns the tokens at t >= b.last as Budget will see them: with
// a debt, the bucket is emptied at debtUntil and refills from there by the
// limiter's own formula (elapsed seconds times the limit, capped at burst).
// It does not change the bucket.
func (b *bucket) tokensAt(t vtime.Time) float64 {
	if b.debt == 0 {
		return b.lim.TokensAt(stdTime(t))
	}
	until := b.debtUntil()
	if t <= until {
		return 0
	}
	return min(float64(b.burst), time.Duration(t-until).Seconds()*float64(limitOf(b.rate)))
}

// fits reports whether Budget at t >= b.last holds n.
func (b *bucket) fits(t vtime.Time, n units.Bytes) bool { return b.whole(b.tokensAt(t)) >= n }

func (b *bucket) setRate(now vtime.Time, r units.BitRate) {
	if b.lim == nil {
		panic("pacing: BUG: SetRate on a zero Pacer or Port; use New or NewPort")
	}
	now = b.mutate(now)
	if b.debt > 0 {
		// Bytes repaid at the old rate stay repaid; the rest is owed
		// at the new one.
		b.debt -= min(b.rate.BytesIn(now.Sub(b.debtAt)), b.debt-1)
		b.debtAt = now
	}
	b.rate = r
	b.lim.SetLimitAt(stdTime(now), limitOf(r))
}

func checkRate(what string, r units.BitRate) {
	if r < 0 {
		panic(fmt.Sprintf("pacing: BUG: %s.SetRate(%d bit/s): rates are >= 0", what, int64(r)))
	}
}

func (b *bucket) refill(n units.Bytes) time.Duration {
	if b.unpaced() {
		return 0
	}
	return b.rate.TxTime(n)
}
