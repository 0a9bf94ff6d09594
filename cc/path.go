package cc

import (
	"fmt"
	"math"
	"time"

	"github.com/mptx-dev/mptx/units"
)

// Path defaults and limits.
const (
	// DefaultMTU is the payload size PathInfo.MTU == 0 stands for: the
	// largest RoCEv2 path MTU (4096 B).
	DefaultMTU units.Bytes = 4096
	// maxPathMTU and maxPathHops bound PathInfo so that derived quantities
	// (windows in MTUs, hop-scaled targets) stay meaningful.
	maxPathMTU  units.Bytes = 1 << 20
	maxPathHops             = 64
	maxBaseRTT              = 10 * time.Second
)

// Validate reports whether p describes a usable path: LineRate finite and
// > 0, BaseRTT in (0, 10s], MTU in [0, 1 MiB] (0 means DefaultMTU) and Hops in
// [0, 64] (0 means 1). Errors name the field, its value and the valid range.
func (p PathInfo) Validate() error {
	_, err := p.withDefaults()
	return err
}

// BDP returns the path's bandwidth-delay product, LineRate × BaseRTT,
// rounded down and saturating.
func (p PathInfo) BDP() units.Bytes { return p.LineRate.BytesIn(p.BaseRTT) }

// withDefaults validates p and fills its zero fields.
func (p PathInfo) withDefaults() (PathInfo, error) {
	if p.LineRate <= 0 || p.LineRate == units.Unlimited {
		return p, fmt.Errorf("cc: PathInfo.LineRate = %v, want a finite rate > 0", p.LineRate)
	}
	if p.BaseRTT <= 0 || p.BaseRTT > maxBaseRTT {
		return p, fmt.Errorf("cc: PathInfo.BaseRTT = %v, want 0s < BaseRTT <= %v", p.BaseRTT, maxBaseRTT)
	}
	if p.MTU < 0 || p.MTU > maxPathMTU {
		return p, fmt.Errorf("cc: PathInfo.MTU = %d, want 0 (means %d) to %d bytes", int64(p.MTU), int64(DefaultMTU), int64(maxPathMTU))
	}
	if p.Hops < 0 || p.Hops > maxPathHops {
		return p, fmt.Errorf("cc: PathInfo.Hops = %d, want 0 (means 1) to %d", p.Hops, maxPathHops)
	}
	if p.MTU == 0 {
		p.MTU = DefaultMTU
	}
	if p.Hops == 0 {
		p.Hops = 1
	}
	return p, nil
}

// twoTo63 is 2^63 as a float64: the smallest float that no longer fits in
// an int64.
const twoTo63 = float64(1 << 63)

// rateOf converts a rate in bit/s held as a float to a BitRate, clamping
// NaN and non-positive values to 0 and saturating at Unlimited.
func rateOf(f float64) units.BitRate {
	switch {
	case !(f > 0):
		return 0
	case f >= twoTo63:
		return units.Unlimited
	}
	return units.BitRate(f)
}

// bytesOf converts a byte count held as a float to Bytes, clamping NaN and
// non-positive values to 0 and saturating at MaxBytes.
func bytesOf(f float64) units.Bytes {
	switch {
	case !(f > 0):
		return 0
	case f >= twoTo63:
		return units.MaxBytes
	}
	return units.Bytes(f)
}

// scaleRate returns r × num / den computed exactly (128-bit intermediate),
// saturating; used for "X per 25 Gb/s of line rate" defaults.
func scaleRate(r, num, den units.BitRate) units.BitRate {
	return units.BitRate(units.MulDiv(int64(r), int64(num), int64(den)))
}

// clampF limits v to [lo, hi]; NaN becomes lo.
func clampF(v, lo, hi float64) float64 {
	if !(v >= lo) { // also catches NaN
		return lo
	}
	return math.Min(v, hi)
}
