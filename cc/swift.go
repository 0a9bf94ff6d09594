package cc

import (
	"fmt"
	"math"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

func init() { registerConfig("swift", (*SwiftConfig).specs, NewSwift) }

// SwiftConfig configures Swift. Windows are in bytes here and in MTU-sized
// packets inside the algorithm. Zero fields take the defaults below;
// fields documented with "negative: off" take a negative value to mean
// zero (their parameter takes "0").
type SwiftConfig struct {
	// AI is the additive increment, in MTUs per RTT: cwnd += AI/cwnd per
	// acknowledged MTU. Default 1 (CC-PARAMS.md, "another implementation";
	// UCCL's ai = 8 applies to a byte window and is not comparable).
	// Range (0, 1000]. Parameter "ai".
	AI float64
	// Beta is β in cwnd *= 1 − β·(delay − target)/delay. Default 0.8
	// (UCCL include/cc/swift.h). Range (0, 1]. Parameter "beta".
	Beta float64
	// MaxMDF bounds one multiplicative decrease: the factor is never below
	// 1 − MaxMDF. Default 0.5 (UCCL). Range (0, 1). Parameter "max_mdf".
	MaxMDF float64
	// BaseTarget is the delay target of an uncongested path before hop and
	// flow scaling, compared with the whole RTT sample. Default 50 µs
	// (UCCL kBaseDelay). Deviation: raised to 2 × BaseRTT on paths whose
	// base RTT is 25 µs or more, so a long path is not held at MinWindow.
	// Range (BaseRTT, 1m]. Parameter "base_target".
	BaseTarget time.Duration
	// HopScale is h, the target added per switch hop (hop scaling): the
	// target includes PathInfo.Hops × h. Default 1 µs (our choice:
	// CC-PARAMS.md has no value). Negative: off. Parameter "hop_scale".
	HopScale time.Duration
	// FSRange is the most flow scaling adds to the target (paper:
	// a smaller cwnd, i.e. more competing flows, gets a larger target, for
	// fairness). Default 5 × BaseTarget (UCCL kFSRange). Range [0, 10m];
	// negative: off. Parameter "fs_range".
	FSRange time.Duration
	// FSMinCwnd and FSMaxCwnd (MTUs) are the windows at which flow scaling
	// adds FSRange and nothing. Defaults 0.1 and 100 (the Swift paper's
	// values as we recall them [unverified]; UCCL uses 32 and 100, which
	// puts the whole range on windows below 32 MTUs). FSMinCwnd in
	// (0, FSMaxCwnd); FSMaxCwnd in (FSMinCwnd, 10^6]. Parameters
	// "fs_min_cwnd", "fs_max_cwnd".
	FSMinCwnd, FSMaxCwnd float64
	// MinWindow and MaxWindow bound cwnd. Defaults MTU/100 (our choice;
	// Swift lets cwnd fall below one packet and then paces) and the larger
	// of 1 MiB (UCCL kMaxCwnd) and 2 × BDP. Parameters "min_window",
	// "max_window".
	MinWindow, MaxWindow units.Bytes
	// InitWindow is the starting cwnd. Default the path's BDP (at least
	// one MTU), within [MinWindow, MaxWindow]. Parameter "init_window".
	InitWindow units.Bytes
	// RetxResetThreshold is RETX_RESET_THRESHOLD: this many consecutive
	// timeouts reset cwnd to MinWindow (paper Algorithm 1). Default 5 (our
	// choice; the paper names the threshold). Range [1, 1000]. Parameter
	// "retx_reset".
	RetxResetThreshold int
}

// WithDefaults returns c with its zero fields set to the defaults for
// path, or path's error when it is not valid (a zero line rate, say).
func (c SwiftConfig) WithDefaults(path PathInfo) (SwiftConfig, error) {
	path, err := path.withDefaults()
	if err != nil {
		return c, err
	}
	if c.AI == 0 {
		c.AI = 1
	}
	if c.Beta == 0 {
		c.Beta = 0.8
	}
	if c.MaxMDF == 0 {
		c.MaxMDF = 0.5
	}
	if c.BaseTarget == 0 {
		c.BaseTarget = max(50*time.Microsecond, 2*path.BaseRTT)
	}
	if c.HopScale == 0 {
		c.HopScale = time.Microsecond
	}
	if c.FSRange == 0 {
		c.FSRange = 5 * c.BaseTarget
	}
	if c.FSMinCwnd == 0 {
		c.FSMinCwnd = 0.1
	}
	if c.FSMaxCwnd == 0 {
		c.FSMaxCwnd = 100
	}
	if c.MinWindow == 0 {
		c.MinWindow = max(path.MTU/100, 1)
	}
	if c.MaxWindow == 0 {
		c.MaxWindow = max(units.MiB, 2*min(path.BDP(), units.MaxBytes/2))
	}
	if c.InitWindow == 0 {
		c.InitWindow = max(path.BDP(), path.MTU).Clamp(c.MinWindow, c.MaxWindow)
	}
	if c.RetxResetThreshold == 0 {
		c.RetxResetThreshold = 5
	}
	return c, nil
}

func (c *SwiftConfig) specs(path PathInfo) []spec {
	return []spec{
		{field: "AI", param: "ai", kind: kNumber, ptr: &c.AI, lo: 0, hi: 1000, loOpen: true},
		{field: "Beta", param: "beta", kind: kNumber, ptr: &c.Beta, lo: 0, hi: 1, loOpen: true},
		{field: "MaxMDF", param: "max_mdf", kind: kNumber, ptr: &c.MaxMDF, lo: 0, hi: 1, loOpen: true, hiOpen: true},
		{field: "BaseTarget", param: "base_target", kind: kDuration, ptr: &c.BaseTarget, lo: float64(path.BaseRTT), hi: float64(time.Minute), loOpen: true},
		{field: "HopScale", param: "hop_scale", kind: kDuration, ptr: &c.HopScale, off: true, lo: 0, hi: float64(time.Second)},
		{field: "FSRange", param: "fs_range", kind: kDuration, ptr: &c.FSRange, off: true, lo: 0, hi: float64(10 * time.Minute)},
		{field: "FSMinCwnd", param: "fs_min_cwnd", kind: kNumber, ptr: &c.FSMinCwnd, lo: 0, hi: 1e6, loOpen: true},
		{field: "FSMaxCwnd", param: "fs_max_cwnd", kind: kNumber, ptr: &c.FSMaxCwnd, lo: 0, hi: 1e6, loOpen: true},
		{field: "MinWindow", param: "min_window", kind: kSize, ptr: &c.MinWindow, lo: 1, hi: inf},
		{field: "MaxWindow", param: "max_window", kind: kSize, ptr: &c.MaxWindow, lo: 1, hi: inf},
		{field: "InitWindow", param: "init_window", kind: kSize, ptr: &c.InitWindow, lo: 1, hi: inf},
		{field: "RetxResetThreshold", param: "retx_reset", kind: kInt, ptr: &c.RetxResetThreshold, lo: 1, hi: 1000},
	}
}

// Validate applies the defaults for path and checks every field. Errors
// name the field, its parameter, the value and the valid range.
func (c SwiftConfig) Validate(path PathInfo) error {
	path, err := path.withDefaults()
	if err != nil {
		return err
	}
	if c, err = c.WithDefaults(path); err != nil {
		return err
	}
	if err := checkAll("swift", c.specs(path)); err != nil {
		return err
	}
	switch {
	case c.FSMinCwnd >= c.FSMaxCwnd:
		return fmt.Errorf("cc: swift: FSMinCwnd = %g (parameter fs_min_cwnd), want FSMinCwnd < FSMaxCwnd (%g)", c.FSMinCwnd, c.FSMaxCwnd)
	case c.MinWindow > c.MaxWindow:
		return fmt.Errorf("cc: swift: MinWindow = %d bytes (parameter min_window), want MinWindow <= MaxWindow (%d bytes)", int64(c.MinWindow), int64(c.MaxWindow))
	case c.InitWindow < c.MinWindow || c.InitWindow > c.MaxWindow:
		return fmt.Errorf("cc: swift: InitWindow = %d bytes (parameter init_window), want MinWindow (%d) <= InitWindow <= MaxWindow (%d bytes)", int64(c.InitWindow), int64(c.MinWindow), int64(c.MaxWindow))
	}
	return nil
}

// Swift is Swift (Kumar et al., "Swift: Delay is Simple and Effective for
// Congestion Control in the Datacenter", SIGCOMM 2020, Algorithm 1): a
// window from the RTT sample against a delay target. It needs an RTT
// sample per ack (Ack.RTT); acks without one only reset the retransmit
// count.
//
// # Model
//
// cwnd is in MTU-sized packets. On an ack with RTT sample delay and
// num_acked = Acked/MTU:
//
//	delay < target, cwnd ≥ 1:  cwnd += AI/cwnd · num_acked
//	delay < target, cwnd < 1:  cwnd += AI · num_acked
//	delay ≥ target:            cwnd *= max(1 − β·(delay − target)/delay, 1 − MaxMDF)
//	                           if now − t_last_decrease ≥ rtt
//
// A timeout (OnTimeout) counts a retransmission: after RetxResetThreshold
// consecutive ones cwnd ← MinWindow, otherwise cwnd *= 1 − MaxMDF (at most
// once per RTT). A loss (OnLoss, NAK-driven fast recovery) resets the count
// and applies cwnd *= 1 − MaxMDF (at most once per RTT). Any ack resets the
// count. cwnd is then clamped to [MinWindow, MaxWindow], and
// t_last_decrease is set whenever cwnd shrank (the paper's "at most once
// per RTT" guard; a held window does not postpone the next decrease). rtt
// is the latest sample (the path's BaseRTT before the first).
//
// The target is
//
//	target = BaseTarget + Hops·HopScale + clamp(α/√cwnd + β', 0, FSRange)
//	α = FSRange / (1/√FSMinCwnd − 1/√FSMaxCwnd),  β' = −α/√FSMaxCwnd
//
// (the paper's hop scaling and flow scaling). Deviation: the paper splits delay
// into fabric and host parts with separate targets; Ack carries one RTT,
// so one target covers both.
//
// Window returns cwnd in bytes but never less than one MTU. Below one MTU
// Swift sends one packet every rtt/cwnd, so Rate returns cwnd·MTU/rtt;
// otherwise Rate returns units.Unlimited. Deadline is always 0; CNPs and
// sends change nothing.
//
// The zero Swift is not usable; call NewSwift. A Swift is not safe for
// concurrent use.
type Swift struct {
	cfg SwiftConfig

	mtu                  float64 // bytes
	ai, beta, maxMDF     float64
	minCwnd, maxCwnd     float64 // MTUs
	fixedTarget          float64 // ns: BaseTarget + Hops·HopScale
	fsRange, fsA, fsB    float64 // ns
	retxReset            int
	cwnd                 float64 // MTUs
	rtt                  time.Duration
	lastDec              vtime.Time
	decreased            bool
	retx                 int
	now                  vtime.Time
	lastTarget, lastMult float64 // for State
}

var _ Algorithm = (*Swift)(nil)
var _ Stater = (*Swift)(nil)

// NewSwift returns a Swift for path. Zero fields of cfg take their
// defaults; invalid fields are an error naming the field.
func NewSwift(cfg SwiftConfig, path PathInfo) (*Swift, error) {
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
	mtu := float64(path.MTU)
	s := &Swift{
		cfg:         c,
		mtu:         mtu,
		ai:          c.AI,
		beta:        c.Beta,
		maxMDF:      c.MaxMDF,
		minCwnd:     float64(c.MinWindow) / mtu,
		maxCwnd:     float64(c.MaxWindow) / mtu,
		fixedTarget: float64(c.BaseTarget) + float64(path.Hops)*float64(offOr(c.HopScale)),
		fsRange:     float64(offOr(c.FSRange)),
		retxReset:   c.RetxResetThreshold,
		cwnd:        float64(c.InitWindow) / mtu,
		rtt:         path.BaseRTT,
	}
	if s.fsRange > 0 {
		s.fsA = s.fsRange / (1/math.Sqrt(c.FSMinCwnd) - 1/math.Sqrt(c.FSMaxCwnd))
		s.fsB = -s.fsA / math.Sqrt(c.FSMaxCwnd)
	}
	s.lastTarget = s.target()
	return s, nil
}

// Name returns "swift".
func (s *Swift) Name() string { return "swift" }

// Config returns the configuration in use, defaults applied.
func (s *Swift) Config() SwiftConfig { return s.cfg }

// target returns the delay target in ns for the current cwnd.
func (s *Swift) target() float64 {
	t := s.fixedTarget
	if s.fsRange > 0 {
		t += clampF(s.fsA/math.Sqrt(s.cwnd)+s.fsB, 0, s.fsRange)
	}
	return t
}

// Target returns the delay target for the current window.
func (s *Swift) Target() time.Duration { return time.Duration(s.target()) }

// CWND returns the congestion window in MTUs.
func (s *Swift) CWND() float64 { return s.cwnd }

// OnSend does nothing.
func (s *Swift) OnSend(Sent) {}

// OnAck applies additive increase below the target and at most one
// multiplicative decrease per RTT at or above it.
func (s *Swift) OnAck(a Ack) {
	now := s.clock(a.Now)
	s.retx = 0
	if a.RTT <= 0 {
		return
	}
	s.rtt = a.RTT
	prev := s.cwnd
	delay := float64(a.RTT)
	target := s.target()
	s.lastTarget = target
	if delay < target {
		n := float64(max(a.Acked, 0)) / s.mtu
		if s.cwnd >= 1 {
			s.cwnd += s.ai / s.cwnd * n
		} else {
			s.cwnd += s.ai * n
		}
	} else if s.canDecrease(now) {
		s.lastMult = max(1-s.beta*(delay-target)/delay, 1-s.maxMDF)
		s.cwnd *= s.lastMult
	}
	s.finish(now, prev)
}

// OnCNP does nothing: Swift uses delay only.
func (s *Swift) OnCNP(CNP) {}

// OnLoss is fast recovery: the retransmit count resets and cwnd shrinks by
// 1 − MaxMDF, at most once per RTT.
func (s *Swift) OnLoss(l Loss) {
	now := s.clock(l.Now)
	s.retx = 0
	prev := s.cwnd
	if s.canDecrease(now) {
		s.cwnd *= 1 - s.maxMDF
	}
	s.finish(now, prev)
}

// OnTimeout counts a retransmission timeout: cwnd resets to MinWindow
// after RetxResetThreshold in a row, and otherwise shrinks by 1 − MaxMDF
// at most once per RTT.
func (s *Swift) OnTimeout(now vtime.Time) {
	now = s.clock(now)
	s.retx = satInc(s.retx)
	prev := s.cwnd
	if s.retx >= s.retxReset {
		s.cwnd = s.minCwnd
	} else if s.canDecrease(now) {
		s.cwnd *= 1 - s.maxMDF
	}
	s.finish(now, prev)
}

// OnTimer does nothing: Swift has no timers.
func (s *Swift) OnTimer(vtime.Time) {}

// Deadline returns 0: Swift has no timers.
func (s *Swift) Deadline() vtime.Time { return 0 }

// Window returns cwnd in bytes, at least one MTU.
func (s *Swift) Window() units.Bytes { return max(bytesOf(s.cwnd*s.mtu), units.Bytes(s.mtu)) }

// Rate returns cwnd·MTU/rtt when cwnd is below one MTU and
// units.Unlimited otherwise.
func (s *Swift) Rate() units.BitRate {
	if s.cwnd >= 1 {
		return units.Unlimited
	}
	return max(rateOf(s.cwnd*s.mtu*8e9/float64(s.rtt)), 1)
}

// State returns cwnd (MTUs), the latest target and rtt (ns), the
// retransmit count and the latest decrease factor.
func (s *Swift) State() map[string]float64 {
	return map[string]float64{
		"cwnd_mtu":  s.cwnd,
		"target_ns": s.lastTarget,
		"rtt_ns":    float64(s.rtt),
		"retx":      float64(s.retx),
		"last_mdf":  s.lastMult,
	}
}

func (s *Swift) canDecrease(now vtime.Time) bool {
	return !s.decreased || now.Sub(s.lastDec) >= s.rtt
}

// finish clamps cwnd and records a decrease.
func (s *Swift) finish(now vtime.Time, prev float64) {
	s.cwnd = clampF(s.cwnd, s.minCwnd, s.maxCwnd)
	if s.cwnd < prev {
		s.lastDec, s.decreased = now, true
	}
}

// clock clamps now to the latest time seen.
func (s *Swift) clock(now vtime.Time) vtime.Time {
	if now < s.now {
		return s.now
	}
	s.now = now
	return now
}
