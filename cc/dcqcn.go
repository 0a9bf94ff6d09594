package cc

import (
	"errors"
	"math"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

func init() { registerConfig("dcqcn", (*DCQCNConfig).specs, NewDCQCN) }

// DCQCNConfig configures DCQCN's reaction point. Zero fields take the
// defaults below; fields documented with "negative: off" take a negative
// value to mean zero (their parameter takes "0").
//
// Defaults follow the HPCC ns-3 artifact's run.py profile "dcqcn_paper"
// (alibaba-edu/High-Precision-Congestion-Control; CC-PARAMS.md), which
// reproduces the DCQCN paper's settings, except where noted.
type DCQCNConfig struct {
	// G is the alpha gain g in α ← (1−g)α + g (paper Eq. 1) and
	// α ← (1−g)α (Eq. 2). Default 1/256 (dcqcn_paper; also the original
	// DCQCN simulator's mix/config.txt). Range (0, 1). Parameter "g".
	G float64
	// InitAlpha is α before the first CNP. Default 1 (HPCC ns-3 RdmaHw
	// sets α = 1). Range [0, 1]; negative
	// means 0. Parameter "init_alpha".
	InitAlpha float64
	// AlphaTimer is K: α decays by (1−g) every K without a CNP (paper
	// Eq. 2). Default 50 µs (dcqcn_paper ALPHA_RESUME_INTERVAL; the
	// original DCQCN simulator uses 55 µs). Negative: off (α never
	// decays). Parameter "alpha_timer".
	AlphaTimer time.Duration
	// RateDecreaseInterval is the least time between two rate decreases:
	// CNPs arriving sooner after a decrease update α at once, and one
	// decrease is applied when the interval ends (HPCC ns-3's Mellanox
	// model likewise applies at most one decrease per interval). Default
	// 50 µs (dcqcn_paper RATE_DECREASE_INTERVAL), equal to the
	// notification point's CNP interval, so the paper's one-CNP-per-50µs
	// stream is never delayed. Negative: off (every CNP decreases at once,
	// as in the paper's text). Parameter "rate_decrease_interval".
	RateDecreaseInterval time.Duration
	// RateIncreaseTimer is T, the period of timer-driven rate increases
	// (paper, as in QCN). Default 55 µs (dcqcn_paper RP_TIMER).
	// Negative: off. Parameter "rate_increase_timer".
	RateIncreaseTimer time.Duration
	// ByteCounter is B: a rate increase every B bytes sent (paper, as
	// in QCN). Default 10 MB, the value the DCQCN paper is quoted with
	// (CC-PARAMS.md marks it unverified; the original simulator's
	// mix/config.txt uses 300000 B; the HPCC ns-3 profiles have no byte
	// counter). Negative: off, which also turns off hyper increase (it
	// needs both counters). Parameter "byte_counter".
	ByteCounter units.Bytes
	// F is the number of fast-recovery iterations after a decrease.
	// Default 5 (paper; HPCC ns-3 RdmaHw). Range [1, 1000].
	// Parameter "f".
	F int
	// AI is R_AI, the additive-increase step of the target rate. Default
	// 5 Mb/s × LineRate/25 Gb/s (dcqcn_paper). Range [LineRate/10^6,
	// LineRate]. Parameter "ai".
	AI units.BitRate
	// HAI is R_HAI, the hyper-increase step. Default 50 Mb/s ×
	// LineRate/25 Gb/s (dcqcn_paper). Range [0, LineRate]; negative means
	// 0. Parameter "hai".
	HAI units.BitRate
	// MinRate floors the current rate. Default 100 Mb/s (HPCC ns-3 RdmaHw
	// MinRate), or LineRate when the line is slower. Range (0, LineRate].
	// Parameter "min_rate".
	MinRate units.BitRate
	// Window caps the bytes in flight. Default unlimited (units.MaxBytes):
	// DCQCN is rate-based. Parameter "window".
	Window units.Bytes
}

// WithDefaults returns c with its zero fields set to the defaults for path
// (which must be valid).
func (c DCQCNConfig) WithDefaults(path PathInfo) DCQCNConfig {
	path, _ = path.withDefaults()
	if c.G == 0 {
		c.G = 1.0 / 256
	}
	if c.InitAlpha == 0 {
		c.InitAlpha = 1
	}
	if c.AlphaTimer == 0 {
		c.AlphaTimer = 50 * time.Microsecond
	}
	if c.RateDecreaseInterval == 0 {
		c.RateDecreaseInterval = 50 * time.Microsecond
	}
	if c.RateIncreaseTimer == 0 {
		c.RateIncreaseTimer = 55 * time.Microsecond
	}
	if c.ByteCounter == 0 {
		c.ByteCounter = 10 * units.MB
	}
	if c.F == 0 {
		c.F = 5
	}
	if c.AI == 0 {
		c.AI = max(scaleRate(path.LineRate, 5*units.Mbps, 25*units.Gbps), 1)
	}
	if c.HAI == 0 {
		c.HAI = scaleRate(path.LineRate, 50*units.Mbps, 25*units.Gbps)
	}
	if c.MinRate == 0 {
		c.MinRate = min(100*units.Mbps, path.LineRate)
	}
	if c.Window == 0 {
		c.Window = units.MaxBytes
	}
	return c
}

// specs describes c's fields for validation and parameter decoding.
func (c *DCQCNConfig) specs(path PathInfo) []spec {
	line := float64(path.LineRate)
	return []spec{
		{field: "G", param: "g", kind: kNumber, ptr: &c.G, lo: 0, hi: 1, loOpen: true, hiOpen: true},
		{field: "InitAlpha", param: "init_alpha", kind: kNumber, ptr: &c.InitAlpha, off: true, lo: 0, hi: 1},
		{field: "AlphaTimer", param: "alpha_timer", kind: kDuration, ptr: &c.AlphaTimer, off: true, lo: 0, hi: float64(time.Second)},
		{field: "RateDecreaseInterval", param: "rate_decrease_interval", kind: kDuration, ptr: &c.RateDecreaseInterval, off: true, lo: 0, hi: float64(time.Second)},
		{field: "RateIncreaseTimer", param: "rate_increase_timer", kind: kDuration, ptr: &c.RateIncreaseTimer, off: true, lo: 0, hi: float64(time.Second)},
		{field: "ByteCounter", param: "byte_counter", kind: kSize, ptr: &c.ByteCounter, off: true, lo: 0, hi: float64(units.TiB)},
		{field: "F", param: "f", kind: kInt, ptr: &c.F, lo: 1, hi: 1000},
		{field: "AI", param: "ai", kind: kRate, ptr: &c.AI, lo: math.Ceil(line / 1e6), hi: line},
		{field: "HAI", param: "hai", kind: kRate, ptr: &c.HAI, off: true, lo: 0, hi: line},
		{field: "MinRate", param: "min_rate", kind: kRate, ptr: &c.MinRate, lo: 0, hi: line, loOpen: true},
		{field: "Window", param: "window", kind: kSize, ptr: &c.Window, lo: 1, hi: inf},
	}
}

// Validate applies the defaults for path and checks every field. Errors
// name the field, its parameter, the value and the valid range.
func (c DCQCNConfig) Validate(path PathInfo) error {
	path, err := path.withDefaults()
	if err != nil {
		return err
	}
	c = c.WithDefaults(path)
	if err := checkAll("dcqcn", c.specs(path)); err != nil {
		return err
	}
	if c.RateIncreaseTimer < 0 && c.ByteCounter < 0 {
		return errDCQCNNoIncrease
	}
	return nil
}

var errDCQCNNoIncrease = errors.New("cc: dcqcn: RateIncreaseTimer (parameter rate_increase_timer) and ByteCounter (parameter byte_counter) are both off, so the rate could never recover; turn one on")

// DCQCN is the reaction point (sender NIC) of DCQCN (Zhu et al., "Congestion
// Control for Large-Scale RDMA Deployments", SIGCOMM 2015, the reaction-point algorithm).
// It is rate-based and reacts only to CNPs, which the receiver's
// notification point sends (at most one per QP per 50 µs) when it sees
// ECN-marked packets.
//
// # Model
//
// State: current rate Rc, target rate Rt, α, the timer and byte-counter
// cycle counts T and BC since the last decrease, and three timers.
//
// A CNP decreases the rate and raises α (Eq. 1, in this order, so the cut
// uses α before the update):
//
//	Rt ← Rc;  Rc ← max(MinRate, Rc·(1 − α/2));  α ← (1 − g)·α + g
//
// and resets T, BC, the byte counter and the rate-increase timer. With a
// RateDecreaseInterval, a CNP arriving less than that after the previous
// decrease only raises α; one decrease (using α at that time) is applied
// when the interval ends.
//
// The alpha timer fires every AlphaTimer after the last CNP while no other
// CNP arrives: α ← (1 − g)·α (Eq. 2).
//
// A rate increase happens every RateIncreaseTimer (T ← T+1) and every
// ByteCounter bytes reported by OnSend (BC ← BC+1). With the incremented
// counters, the stage is (the paper's state machine, as in QCN):
//
//	fast recovery, max(T, BC) ≤ F:        Rc ← (Rt + Rc)/2
//	hyper increase, min(T, BC) > F:       Rt ← Rt + i·HAI, i = min(T, BC) − F;  Rc ← (Rt + Rc)/2
//	additive increase, otherwise:         Rt ← Rt + AI;                         Rc ← (Rt + Rc)/2
//
// so each counter gives exactly F fast-recovery iterations, and hyper
// increase needs both counters past F. Rt and Rc are capped at the line
// rate; Rc is snapped to Rt once within 1 bit/s of it. There is no slow
// start: a new DCQCN sends at line rate.
//
// # Timers and events
//
// Deadline is the earliest pending timer. Every event first runs the
// timers due at or before its Now (alpha, then increase, then a deferred
// decrease at equal instants), in closed form for long gaps, so results do
// not depend on whether or how late the driver called OnTimer. Once Rc is
// back at the line rate the increase timer stops and the alpha timer is no
// longer reported: it then changes nothing but α, which is caught up
// exactly at the next event. An idle, uncongested DCQCN has no deadline.
//
// OnAck, OnLoss and OnTimeout only advance the timers: DCQCN ignores
// RTTs, ECN marks on ACKs (the NP turns marks into CNPs) and losses
// (go-back-N is the NIC's business). OnSend feeds the byte counter, so
// the simulator's per-QP "NIC DCQCN" calls OnSend per packet and OnCNP per
// CNP; each is a few comparisons.
//
// The zero DCQCN is not usable; call NewDCQCN. A DCQCN is not safe for
// concurrent use.
type DCQCN struct {
	cfg DCQCNConfig

	line, minRate, ai, hai float64 // bit/s
	g, oneMinusG           float64
	f                      int
	alphaK, incT, rdi      time.Duration // ≤ 0: off
	bc                     units.Bytes   // ≤ 0: off

	rc, rt, alpha  float64 // bit/s, bit/s, [0, 1]
	tStage, bStage int     // cycles since the last decrease (saturating)
	bytes          units.Bytes

	alphaNext, incNext, decNext vtime.Time // 0: not pending
	lastDec                     vtime.Time
	decreased                   bool
	now                         vtime.Time // latest event time seen
}

var _ Algorithm = (*DCQCN)(nil)
var _ Stater = (*DCQCN)(nil)

// NewDCQCN returns a DCQCN for path, sending at line rate. Zero fields of
// cfg take their defaults; invalid fields are an error naming the field.
func NewDCQCN(cfg DCQCNConfig, path PathInfo) (*DCQCN, error) {
	path, err := path.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(path); err != nil {
		return nil, err
	}
	c := cfg.WithDefaults(path)
	d := &DCQCN{
		cfg:       c,
		line:      float64(path.LineRate),
		minRate:   float64(c.MinRate),
		ai:        float64(c.AI),
		hai:       float64(offOr(c.HAI)),
		g:         c.G,
		oneMinusG: 1 - c.G,
		f:         c.F,
		alphaK:    c.AlphaTimer,
		incT:      c.RateIncreaseTimer,
		rdi:       c.RateDecreaseInterval,
		bc:        c.ByteCounter,
		alpha:     max(c.InitAlpha, 0),
	}
	d.rc, d.rt = d.line, d.line
	return d, nil
}

// Name returns "dcqcn".
func (d *DCQCN) Name() string { return "dcqcn" }

// Config returns the configuration in use, defaults applied.
func (d *DCQCN) Config() DCQCNConfig { return d.cfg }

// OnSend feeds the byte counter: every ByteCounter bytes is
// one rate-increase event.
func (d *DCQCN) OnSend(s Sent) {
	d.advance(s.Now)
	if d.bc <= 0 || s.Bytes <= 0 || d.rc >= d.line {
		return // off, nothing sent, or nothing to recover
	}
	d.bytes = d.bytes.AddSat(s.Bytes)
	if d.bytes < d.bc {
		return
	}
	n := d.bytes / d.bc
	d.bytes -= n * d.bc
	for ; n > 0 && d.rc < d.line; n-- {
		d.bStage = satInc(d.bStage)
		d.increase()
	}
	if d.rc >= d.line {
		d.quiesce()
	}
}

// OnAck only advances the timers; DCQCN does not use ACKs.
func (d *DCQCN) OnAck(a Ack) { d.advance(a.Now) }

// OnCNP applies c.Count CNPs (at least one) received at c.Now: Eq. 1 for
// each, subject to the rate-decrease interval.
func (d *DCQCN) OnCNP(c CNP) {
	now := d.advance(c.Now)
	n := max(c.Count, 1)
	if d.canCut(now) {
		d.cut(now) // uses α before this CNP's update (Eq. 1 order)
		d.bumpAlpha(1)
		n--
		if d.rdi <= 0 { // no interval: every CNP cuts, until the floor
			// The cap only matters for absurd counts with a tiny g, where α
			// (and so the cut) barely moves; the remaining CNPs still
			// raise α below.
			for i := 1; n > 0 && i < maxCutsPerEvent && (d.rc > d.minRate || d.rt > d.minRate); i++ {
				d.cut(now)
				d.bumpAlpha(1)
				n--
			}
		}
	}
	if n > 0 {
		d.bumpAlpha(n)
		if d.rdi > 0 && d.decNext == 0 {
			d.decNext = d.lastDec.Add(d.rdi) // > now: canCut was false
		}
	}
	if d.alphaK > 0 {
		d.alphaNext = now.Add(d.alphaK) // "no CNP for K" restarts (Eq. 2)
	}
}

// OnLoss only advances the timers: DCQCN does not react to loss.
func (d *DCQCN) OnLoss(l Loss) { d.advance(l.Now) }

// OnTimeout only advances the timers: DCQCN does not react to timeouts.
func (d *DCQCN) OnTimeout(now vtime.Time) { d.advance(now) }

// OnTimer runs every timer due at or before now; early calls do nothing.
func (d *DCQCN) OnTimer(now vtime.Time) { d.advance(now) }

// Deadline returns the earliest pending timer: the rate-increase timer, a
// deferred decrease and, while either is pending, the alpha timer. It is 0
// when the rate is at line rate and no decrease is pending.
func (d *DCQCN) Deadline() vtime.Time {
	dl := vtime.Earliest(d.incNext, d.decNext)
	if dl == 0 {
		return 0
	}
	return vtime.Earliest(dl, d.alphaNext)
}

// Window returns the configured cap, units.MaxBytes by default.
func (d *DCQCN) Window() units.Bytes { return d.cfg.Window }

// Rate returns the current rate Rc.
func (d *DCQCN) Rate() units.BitRate { return rateOf(d.rc) }

// TargetRate returns the target rate Rt.
func (d *DCQCN) TargetRate() units.BitRate { return rateOf(d.rt) }

// Alpha returns α as of the latest event.
func (d *DCQCN) Alpha() float64 { return d.alpha }

// State returns α, Rc and Rt (bit/s), the timer and byte-counter stages
// and the byte counter's progress (bytes), as of the latest event.
func (d *DCQCN) State() map[string]float64 {
	return map[string]float64{
		"alpha":       d.alpha,
		"rc_bps":      d.rc,
		"rt_bps":      d.rt,
		"timer_stage": float64(d.tStage),
		"byte_stage":  float64(d.bStage),
		"byte_count":  float64(d.bytes),
	}
}

// advance clamps now to the latest time seen (time never runs backwards
// inside the algorithm) and runs every timer due at or before it.
func (d *DCQCN) advance(now vtime.Time) vtime.Time {
	if now < d.now {
		now = d.now
	}
	d.now = now
	if d.decNext != 0 && d.decNext <= now {
		at := d.decNext
		d.alphaTo(at)
		d.incTo(at)
		d.cut(at)
	}
	d.alphaTo(now)
	d.incTo(now)
	return now
}

// canCut reports whether a decrease may happen at now.
func (d *DCQCN) canCut(now vtime.Time) bool {
	return d.rdi <= 0 || !d.decreased || now.Sub(d.lastDec) >= d.rdi
}

// cut is the rate part of Eq. 1 plus the resets that go with it.
func (d *DCQCN) cut(now vtime.Time) {
	d.rt = d.rc
	d.rc = max(d.minRate, d.rc*(1-d.alpha/2))
	d.lastDec, d.decreased = now, true
	d.decNext = 0
	d.tStage, d.bStage, d.bytes = 0, 0, 0
	if d.incT > 0 {
		d.incNext = now.Add(d.incT)
	}
}

// bumpAlpha applies α ← (1−g)α + g n times: 1 − α shrinks by (1−g)^n.
func (d *DCQCN) bumpAlpha(n int) {
	if n == 1 {
		d.alpha = d.oneMinusG*d.alpha + d.g
		return
	}
	d.alpha = 1 - (1-d.alpha)*math.Pow(d.oneMinusG, float64(n))
}

// alphaTo runs the alpha timer's ticks at or before t (Eq. 2).
func (d *DCQCN) alphaTo(t vtime.Time) {
	if d.alphaNext == 0 || d.alphaNext > t {
		return
	}
	n := int64(t-d.alphaNext)/int64(d.alphaK) + 1
	if n == 1 {
		d.alpha *= d.oneMinusG
	} else {
		d.alpha *= math.Pow(d.oneMinusG, float64(n))
	}
	d.alphaNext = d.alphaNext.Add(time.Duration(n-1) * d.alphaK).Add(d.alphaK)
}

// incTo runs the rate-increase timer's ticks at or before t. The loop
// stops as soon as the rate is back at line rate, so it is bounded by the
// steps needed to recover however long the gap.
func (d *DCQCN) incTo(t vtime.Time) {
	if d.incNext == 0 || d.incNext > t {
		return
	}
	n := int64(t-d.incNext)/int64(d.incT) + 1
	next := d.incNext.Add(time.Duration(n-1) * d.incT).Add(d.incT)
	for ; n > 0 && d.rc < d.line; n-- {
		d.tStage = satInc(d.tStage)
		d.increase()
	}
	if d.rc >= d.line {
		d.quiesce()
		return
	}
	d.incNext = next
}

// increase is one rate-increase event; the triggering counter has already
// been incremented.
func (d *DCQCN) increase() {
	hi, lo := max(d.tStage, d.bStage), min(d.tStage, d.bStage)
	switch {
	case hi <= d.f: // fast recovery
	case lo > d.f: // hyper increase
		d.rt += float64(lo-d.f) * d.hai
	default: // additive increase
		d.rt += d.ai
	}
	d.rt = min(d.rt, d.line)
	d.rc = (d.rt + d.rc) / 2
	if d.rt-d.rc < 1 {
		d.rc = d.rt
	}
}

// quiesce stops the increase machinery once Rc is at line rate: further
// increases could change nothing but the stage counters, which the next
// CNP resets.
func (d *DCQCN) quiesce() {
	d.rc, d.rt = d.line, d.line
	d.incNext = 0
	d.bytes = 0
}

// maxCutsPerEvent bounds the decreases one OnCNP applies when the
// rate-decrease interval is off.
const maxCutsPerEvent = 1 << 12

// satInc returns n+1, saturating far below overflow.
func satInc(n int) int {
	if n >= 1<<30 {
		return n
	}
	return n + 1
}
