package cc

import (
	"fmt"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

func init() { registerConfig("timely", (*TimelyConfig).specs, NewTimely) }

// TimelyConfig configures TIMELY. Zero fields take the defaults below;
// fields documented with "negative: off" take a negative value to mean
// zero (their parameter takes "0").
//
// Defaults follow the HPCC ns-3 artifact's TIMELY (rdma-hw.cc and run.py
// profile "timely"; CC-PARAMS.md). The authors' published snippet differs
// in two places, both settable: EWMA 0.02 and THigh 1 ms.
type TimelyConfig struct {
	// EWMA is α, the weight of the newest RTT difference in rtt_diff ←
	// (1−α)·rtt_diff + α·new_rtt_diff (paper Algorithm 1). Default 0.875
	// (HPCC ns-3). Range (0, 1]. Parameter "ewma".
	EWMA float64
	// TLow: RTT samples below it increase the rate additively whatever the
	// gradient. Default 50 µs (HPCC ns-3; the authors' value for 64 KB
	// segments). Negative: off (the authors' value for per-packet pacing).
	// Parameter "t_low".
	TLow time.Duration
	// THigh: RTT samples above it decrease the rate by
	// 1 − β·(1 − THigh/rtt). Default 500 µs (HPCC ns-3). Must exceed TLow.
	// Parameter "t_high".
	THigh time.Duration
	// Beta is β, the multiplicative-decrease factor. Default 0.8 (paper;
	// HPCC ns-3). Range (0, 1]. Parameter "beta".
	Beta float64
	// Delta is δ, the additive step. Default 10 Mb/s per 10 Gb/s of line
	// rate (the authors' snippet; HPCC ns-3 run.py ai = 10·bw/10 Mb/s).
	// Range (0, LineRate]. Parameter "delta".
	Delta units.BitRate
	// HAIThreshold is how many consecutive negative gradients switch the
	// additive step to HAIFactor·δ (hyper-active increase). Default 5
	// (paper). Range [1, 1000]. Parameter "hai_threshold".
	HAIThreshold int
	// HAIFactor is N, the step multiplier in hyper-active increase.
	// Default 5 (paper; HPCC ns-3 run.py hai = 5 × ai). Range [1, 1000].
	// Parameter "hai_factor".
	HAIFactor int
	// MinRTT normalises the gradient (gradient = rtt_diff/MinRTT). Default
	// the path's BaseRTT (HPCC ns-3 uses a fixed 20 µs). Range (0, 10s].
	// Parameter "min_rtt".
	MinRTT time.Duration
	// MinRate floors the rate. Default 100 Mb/s (HPCC ns-3 RdmaHw
	// MinRate), or LineRate when the line is slower. Range (0, LineRate].
	// Parameter "min_rate".
	MinRate units.BitRate
	// InitRate is the starting rate. Default LineRate (HPCC ns-3).
	// Range [MinRate, LineRate]. Parameter "init_rate".
	InitRate units.BitRate
	// Window caps the bytes in flight. Default unlimited: TIMELY is
	// rate-based. Parameter "window".
	Window units.Bytes
}

// WithDefaults returns c with its zero fields set to the defaults for
// path, or path's error when it is not valid (a zero line rate, say).
func (c TimelyConfig) WithDefaults(path PathInfo) (TimelyConfig, error) {
	path, err := path.withDefaults()
	if err != nil {
		return c, err
	}
	if c.EWMA == 0 {
		c.EWMA = 0.875
	}
	if c.TLow == 0 {
		c.TLow = 50 * time.Microsecond
	}
	if c.THigh == 0 {
		c.THigh = 500 * time.Microsecond
	}
	if c.Beta == 0 {
		c.Beta = 0.8
	}
	if c.Delta == 0 {
		c.Delta = max(scaleRate(path.LineRate, 10*units.Mbps, 10*units.Gbps), 1)
	}
	if c.HAIThreshold == 0 {
		c.HAIThreshold = 5
	}
	if c.HAIFactor == 0 {
		c.HAIFactor = 5
	}
	if c.MinRTT == 0 {
		c.MinRTT = path.BaseRTT
	}
	if c.MinRate == 0 {
		c.MinRate = min(100*units.Mbps, path.LineRate)
	}
	if c.InitRate == 0 {
		c.InitRate = path.LineRate
	}
	if c.Window == 0 {
		c.Window = units.MaxBytes
	}
	return c, nil
}

func (c *TimelyConfig) specs(path PathInfo) []spec {
	line := float64(path.LineRate)
	return []spec{
		{field: "EWMA", param: "ewma", kind: kNumber, ptr: &c.EWMA, lo: 0, hi: 1, loOpen: true},
		{field: "TLow", param: "t_low", kind: kDuration, ptr: &c.TLow, off: true, lo: 0, hi: float64(10 * time.Second)},
		{field: "THigh", param: "t_high", kind: kDuration, ptr: &c.THigh, lo: 0, hi: float64(10 * time.Second), loOpen: true},
		{field: "Beta", param: "beta", kind: kNumber, ptr: &c.Beta, lo: 0, hi: 1, loOpen: true},
		{field: "Delta", param: "delta", kind: kRate, ptr: &c.Delta, lo: 0, hi: line, loOpen: true},
		{field: "HAIThreshold", param: "hai_threshold", kind: kInt, ptr: &c.HAIThreshold, lo: 1, hi: 1000},
		{field: "HAIFactor", param: "hai_factor", kind: kInt, ptr: &c.HAIFactor, lo: 1, hi: 1000},
		{field: "MinRTT", param: "min_rtt", kind: kDuration, ptr: &c.MinRTT, lo: 0, hi: float64(10 * time.Second), loOpen: true},
		{field: "MinRate", param: "min_rate", kind: kRate, ptr: &c.MinRate, lo: 0, hi: line, loOpen: true},
		{field: "InitRate", param: "init_rate", kind: kRate, ptr: &c.InitRate, lo: 0, hi: line, loOpen: true},
		{field: "Window", param: "window", kind: kSize, ptr: &c.Window, lo: 1, hi: inf},
	}
}

// Validate applies the defaults for path and checks every field. Errors
// name the field, its parameter, the value and the valid range.
func (c TimelyConfig) Validate(path PathInfo) error {
	path, err := path.withDefaults()
	if err != nil {
		return err
	}
	if c, err = c.WithDefaults(path); err != nil {
		return err
	}
	if err := checkAll("timely", c.specs(path)); err != nil {
		return err
	}
	if c.THigh <= offOr(c.TLow) {
		return fmt.Errorf("cc: timely: THigh = %v (parameter t_high), want THigh > TLow (%v)", c.THigh, offOr(c.TLow))
	}
	if c.InitRate < c.MinRate {
		return fmt.Errorf("cc: timely: InitRate = %v (parameter init_rate), want MinRate (%v) <= InitRate <= %v", c.InitRate, c.MinRate, path.LineRate)
	}
	return nil
}

// Timely is TIMELY (Mittal et al., "TIMELY: RTT-based Congestion Control
// for the Datacenter", SIGCOMM 2015, Algorithm 1): rate-based control
// from RTT samples and their gradient. It needs an RTT sample per
// completion event (Ack.RTT, one per acknowledged segment or chunk); acks
// without one change nothing.
//
// # Model
//
// For each RTT sample new_rtt after the first (which only seeds prev_rtt):
//
//	new_rtt_diff = new_rtt − prev_rtt;  prev_rtt = new_rtt
//	rtt_diff     = (1 − α)·rtt_diff + α·new_rtt_diff
//	gradient     = rtt_diff / MinRTT
//
// then exactly one of:
//
//	new_rtt < TLow:     rate ← rate + δ
//	new_rtt > THigh:    rate ← rate · (1 − β·(1 − THigh/new_rtt))
//	gradient ≤ 0:       rate ← rate + N·δ, N = HAIFactor once this is the
//	                    HAIThreshold-th (or later) consecutive sample with a
//	                    negative gradient, else N = 1
//	gradient > 0:       rate ← rate · max(0, 1 − β·gradient)
//
// and the rate is clamped to [MinRate, LineRate]. The count of consecutive
// negative gradients runs over every sample, whichever branch it took.
//
// Window is the configured cap (unlimited by default); Deadline is always
// 0. Loss, timeout and CNP events change nothing (TIMELY is RTT-only).
//
// The zero Timely is not usable; call NewTimely. A Timely is not safe for
// concurrent use.
type Timely struct {
	cfg TimelyConfig

	ewma, beta           float64
	delta, line, minRate float64 // bit/s
	tLow, tHigh          time.Duration
	minRTT               float64 // ns

	rate      float64 // bit/s
	prevRTT   time.Duration
	seeded    bool
	rttDiff   float64 // ns
	gradient  float64
	negStreak int
}

var _ Algorithm = (*Timely)(nil)
var _ Stater = (*Timely)(nil)

// NewTimely returns a TIMELY for path. Zero fields of cfg take their
// defaults; invalid fields are an error naming the field.
func NewTimely(cfg TimelyConfig, path PathInfo) (*Timely, error) {
	path, err := path.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(path); err != nil {
		return nil, err
	}
	c, err := cfg.WithDefaults(path)
	if err != nil {
		return nil, err
	}
	return &Timely{
		cfg:     c,
		ewma:    c.EWMA,
		beta:    c.Beta,
		delta:   float64(c.Delta),
		line:    float64(path.LineRate),
		minRate: float64(c.MinRate),
		tLow:    offOr(c.TLow),
		tHigh:   c.THigh,
		minRTT:  float64(c.MinRTT),
		rate:    float64(c.InitRate),
	}, nil
}

// Name returns "timely".
func (t *Timely) Name() string { return "timely" }

// Config returns the configuration in use, defaults applied.
func (t *Timely) Config() TimelyConfig { return t.cfg }

// OnSend does nothing.
func (t *Timely) OnSend(Sent) {}

// OnAck runs Algorithm 1 on a.RTT if the ack carries a sample.
func (t *Timely) OnAck(a Ack) {
	rtt := a.RTT
	if rtt <= 0 {
		return
	}
	if !t.seeded {
		t.prevRTT, t.seeded = rtt, true
		return
	}
	newDiff := float64(rtt) - float64(t.prevRTT)
	t.prevRTT = rtt
	t.rttDiff = (1-t.ewma)*t.rttDiff + t.ewma*newDiff
	t.gradient = t.rttDiff / t.minRTT
	if t.gradient < 0 {
		t.negStreak = satInc(t.negStreak)
	} else {
		t.negStreak = 0
	}
	switch {
	case rtt < t.tLow:
		t.rate += t.delta
	case rtt > t.tHigh:
		t.rate *= 1 - t.beta*(1-float64(t.tHigh)/float64(rtt))
	case t.gradient <= 0:
		n := 1.0
		if t.negStreak >= t.cfg.HAIThreshold {
			n = float64(t.cfg.HAIFactor)
		}
		t.rate += n * t.delta
	default:
		t.rate *= max(0, 1-t.beta*t.gradient)
	}
	t.rate = clampF(t.rate, t.minRate, t.line)
}

// OnCNP does nothing: TIMELY uses RTTs only.
func (t *Timely) OnCNP(CNP) {}

// OnLoss does nothing: TIMELY uses RTTs only.
func (t *Timely) OnLoss(Loss) {}

// OnTimeout does nothing: TIMELY uses RTTs only.
func (t *Timely) OnTimeout(vtime.Time) {}

// OnTimer does nothing: TIMELY has no timers.
func (t *Timely) OnTimer(vtime.Time) {}

// Deadline returns 0: TIMELY has no timers.
func (t *Timely) Deadline() vtime.Time { return 0 }

// Window returns the configured cap, units.MaxBytes by default.
func (t *Timely) Window() units.Bytes { return t.cfg.Window }

// Rate returns the current rate.
func (t *Timely) Rate() units.BitRate { return rateOf(t.rate) }

// State returns the rate (bit/s), rtt_diff (ns), the normalised gradient,
// the previous RTT (ns) and the negative-gradient streak.
func (t *Timely) State() map[string]float64 {
	return map[string]float64{
		"rate_bps":    t.rate,
		"rtt_diff_ns": t.rttDiff,
		"gradient":    t.gradient,
		"prev_rtt_ns": float64(t.prevRTT),
		"neg_streak":  float64(t.negStreak),
	}
}
