package cc

import (
	"math"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// DCQCN is the reaction point (sender NIC) of DCQCN (Zhu et al., "Congestion
// Control for Large-Scale RDMA Deployments", SIGCOMM 2015, §3.1), with the
// variants ConnectX firmware and the HPCC ns-3 simulator choose as
// parameters (DCQCNConfig; docs/dcqcn.md compares them). It is rate-based
// and reacts only to CNPs, which the receiver's notification point sends
// when it sees ECN-marked packets.
//
// # Model
//
// State: current rate Rc, target rate Rt, α, the timer and byte-counter
// event counts T and BC since the last cut, and the rate-increase, alpha
// and decrease timers.
//
// A cut (Eq. 1's rate part) is
//
//	Rt ← Rc (always, or only if the increase timer fired since the previous cut: Clamp)
//	Rc ← max(MinRate, Rc·(1 − α/2))
//
// and resets T, BC, the byte counter and the rate-increase timer. When it
// happens depends on Decrease: on the CNP itself, at most one per
// RateDecreaseInterval (later CNPs in the interval give one cut when it
// ends), or at the next periodic check after the CNP.
//
// α depends on AlphaUpdate: per CNP α ← (1 − g)·α + g (Eq. 1, applied
// after an immediate cut, which uses the α before it) and α ← (1 − g)·α
// every AlphaTimer without a CNP (Eq. 2); or periodically, every
// AlphaTimer from the first CNP, α ← (1 − g)·α + g if a CNP arrived in the
// period and α ← (1 − g)·α otherwise.
//
// A rate increase happens every RateIncreaseTimer (T ← T+1) and every
// ByteCounter bytes reported by OnSend (BC ← BC+1). With the incremented
// counters, the stage is (Increase = qcn, the paper's state machine, as in
// QCN):
//
//	fast recovery, max(T, BC) ≤ F:        Rc ← (Rt + Rc)/2
//	hyper increase, min(T, BC) > F:       Rt ← Rt + i·HAI, i = min(T, BC) − F;  Rc ← (Rt + Rc)/2
//	additive increase, otherwise:         Rt ← Rt + AI;                         Rc ← (Rt + Rc)/2
//
// or (Increase = timer, HPCC ns-3 RdmaHw, timer events only)
//
//	fast recovery, T ≤ F;  additive increase, T = F+1;  hyper increase Rt ← Rt + HAI, T > F+1.
//
// Rt and Rc are capped at the line rate; Rc is snapped to Rt once within 1
// bit/s of it. There is no slow start: a new DCQCN sends at line rate.
//
// # Timers and events
//
// Deadline is the earliest of the rate-increase timer and a pending cut.
// Every event first runs the timers due at or before its Now (alpha, then
// increase, then a pending cut at equal instants), in closed form for
// long gaps, so results do not depend on whether or how late the driver
// called OnTimer. The alpha timer changes nothing but α, which only the
// next cut reads, so it is caught up at the next event and never reported
// as a deadline. Once Rc is back at the line rate the increase timer
// stops: an idle, uncongested DCQCN has no deadline.
//
// OnAck, OnLoss and OnTimeout only advance the timers: DCQCN ignores
// RTTs, ECN marks on ACKs (the NP turns marks into CNPs) and losses
// (go-back-N is the NIC's business). OnSend feeds the byte counter, so
// the simulator's per-QP "NIC DCQCN" calls OnSend per packet and OnCNP per
// CNP; each is a few comparisons.
//
// Deviation: ConnectX's rpg_min_dec_fac (a cut keeps at least that share
// of the rate; 50 % by default, which α/2 ≤ 1/2 never reaches),
// rpg_gd (the cut's α multiplier; 11 means the paper's α/2) and
// rate_to_set_on_first_cnp (0 by default: none) are not modelled. ns-3
// offsets its decrease checks by 1 ns so that they follow the alpha
// update; here timers due at the same instant run alpha, increase, cut, in
// that order, to the same effect.
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
	periodicAlpha          bool
	periodicDec            bool
	clampAlways            bool
	timerStages            bool

	rc, rt, alpha  float64 // bit/s, bit/s, [0, 1]
	tStage, bStage int     // events since the last cut (saturating)
	bytes          units.Bytes

	alphaNext, incNext, decNext vtime.Time // 0: not pending
	lastDec                     vtime.Time
	gridAt                      vtime.Time // periodic decrease: the first CNP, origin of the checks
	decreased                   bool       // a cut has happened
	seen                        bool       // a CNP has arrived
	alphaCNP                    bool       // periodic α: a CNP arrived in the current period
	timerInc                    bool       // the increase timer fired since the last cut
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
	c, err := cfg.WithDefaults(path)
	if err != nil {
		return nil, err
	}
	d := &DCQCN{
		cfg:           c,
		line:          float64(path.LineRate),
		minRate:       float64(c.MinRate),
		ai:            float64(c.AI),
		hai:           float64(offOr(c.HAI)),
		g:             c.G,
		oneMinusG:     1 - c.G,
		f:             c.F,
		alphaK:        c.AlphaTimer,
		incT:          c.RateIncreaseTimer,
		rdi:           c.RateDecreaseInterval,
		bc:            c.ByteCounter,
		periodicAlpha: c.AlphaUpdate == DCQCNAlphaPeriodic,
		periodicDec:   c.Decrease == DCQCNDecreasePeriodic,
		clampAlways:   c.Clamp == DCQCNClampAlways,
		timerStages:   c.Increase == DCQCNIncreaseTimer,
		alpha:         max(c.InitAlpha, 0),
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
	d.steps(int64(n), false)
	if d.rc >= d.line {
		d.quiesce()
	}
}

// OnAck only advances the timers; DCQCN does not use ACKs.
func (d *DCQCN) OnAck(a Ack) { d.advance(a.Now) }

// OnCNP applies c.Count CNPs (at least one) received at c.Now.
func (d *DCQCN) OnCNP(c CNP) {
	now := d.advance(c.Now)
	d.cnp(now, max(c.Count, 1))
	if !d.periodicAlpha && d.alphaK > 0 {
		d.alphaNext = now.Add(d.alphaK) // "no CNP for K" restarts (Eq. 2)
	}
}

// cnp is OnCNP after the timers have run: α and the cut, by variant.
func (d *DCQCN) cnp(now vtime.Time, n int) {
	first := !d.seen
	d.seen = true
	if d.periodicAlpha {
		if first {
			// The first CNP starts the α clock; it is not counted in its
			// first period (ns-3 cnp_received_mlx; ConnectX sets α to
			// initial_alpha_value at the first CNP).
			if d.alphaK > 0 {
				d.alphaNext = now.Add(d.alphaK)
			}
		} else {
			d.alphaCNP = true
		}
	}
	if d.periodicDec {
		if first {
			d.gridAt = now
		}
		if !d.periodicAlpha {
			d.bumpAlpha(n)
		}
		if d.decNext == 0 {
			d.decNext = d.nextCheck(now)
		}
		return
	}
	perCNP := !d.periodicAlpha
	if d.canCut(now) {
		d.cut(now) // uses α before this CNP's update (Eq. 1 order)
		if perCNP {
			d.bumpAlpha(1)
		}
		n--
		if d.rdi <= 0 { // no interval: every CNP cuts, until the floor
			// The cap only matters for absurd counts with a tiny g, where α
			// (and so the cut) barely moves; the remaining CNPs still
			// raise α below.
			for i := 1; n > 0 && i < maxCutsPerEvent && (d.rc > d.minRate || (d.clampAlways && d.rt > d.minRate)); i++ {
				d.cut(now)
				if perCNP {
					d.bumpAlpha(1)
				}
				n--
			}
		}
	}
	if n > 0 {
		if perCNP {
			d.bumpAlpha(n)
		}
		if d.rdi > 0 && d.decNext == 0 {
			d.decNext = d.lastDec.Add(d.rdi) // > now: canCut was false
		}
	}
}

// OnLoss only advances the timers: DCQCN does not react to loss.
func (d *DCQCN) OnLoss(l Loss) { d.advance(l.Now) }

// OnTimeout only advances the timers: DCQCN does not react to timeouts.
func (d *DCQCN) OnTimeout(now vtime.Time) { d.advance(now) }

// OnTimer runs every timer due at or before now; early calls do nothing.
func (d *DCQCN) OnTimer(now vtime.Time) { d.advance(now) }

// Deadline returns the earliest pending timer that changes the rate: the
// rate-increase timer or a pending cut. It is 0 when the rate is at line
// rate and no cut is pending.
func (d *DCQCN) Deadline() vtime.Time { return vtime.Earliest(d.incNext, d.decNext) }

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

// canCut reports whether an immediate cut may happen at now.
func (d *DCQCN) canCut(now vtime.Time) bool {
	return d.rdi <= 0 || !d.decreased || now.Sub(d.lastDec) >= d.rdi
}

// nextCheck returns the first periodic decrease check after now: the
// checks are every RateDecreaseInterval from the first CNP.
func (d *DCQCN) nextCheck(now vtime.Time) vtime.Time {
	k := int64(now-d.gridAt)/int64(d.rdi) + 1
	return d.gridAt.Add(time.Duration(k) * d.rdi)
}

// cut is the rate part of Eq. 1 plus the resets that go with it.
func (d *DCQCN) cut(at vtime.Time) {
	if d.clampAlways || d.timerInc {
		d.rt = d.rc
	}
	d.rc = max(d.minRate, d.rc*(1-d.alpha/2))
	d.lastDec, d.decreased = at, true
	d.decNext = 0
	d.tStage, d.bStage, d.bytes = 0, 0, 0
	d.timerInc = false
	if d.incT > 0 {
		d.incNext = at.Add(d.incT)
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

// alphaTo runs the alpha timer's ticks at or before t: Eq. 2 per tick
// (per-CNP mode), or the periodic update, whose first tick counts the
// CNPs of its period and the rest find none.
func (d *DCQCN) alphaTo(t vtime.Time) {
	if d.alphaNext == 0 || d.alphaNext > t {
		return
	}
	n := int64(t-d.alphaNext)/int64(d.alphaK) + 1
	a := d.oneMinusG * d.alpha
	if d.periodicAlpha && d.alphaCNP {
		a += d.g
		d.alphaCNP = false
	}
	if n > 1 {
		a *= math.Pow(d.oneMinusG, float64(n-1))
	}
	d.alpha = a
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
	d.steps(n, true)
	if d.rc >= d.line {
		d.quiesce()
		return
	}
	d.incNext = next
}

// steps runs n rate-increase events of one counter (the timer's T, or the
// byte counter's BC), stopping once Rc reaches the line rate. Once every
// further event adds the same step to Rt (bulkStep), the rest run in
// closed form, so a very late timer or a huge send costs O(1) however
// slowly the rate climbs (AI is 5 Mb/s; a Pb/s line would take 10^8
// events).
func (d *DCQCN) steps(n int64, timer bool) {
	for ; n > 0 && d.rc < d.line; n-- {
		if n > 64 {
			if step, ok := d.bulkStep(timer); ok {
				d.bulk(n, step, timer)
				return
			}
		}
		if timer {
			d.tStage = satInc(d.tStage)
			d.timerInc = true
		} else {
			d.bStage = satInc(d.bStage)
		}
		d.increase()
	}
}

// bulkStep reports whether every further event of the given counter adds
// the same step to Rt, and that step.
func (d *DCQCN) bulkStep(timer bool) (float64, bool) {
	if d.timerStages {
		if timer && d.tStage >= d.f+1 { // the next T is past F+1: hyper
			return d.hai, true
		}
		return 0, false
	}
	c, o := d.bStage, d.tStage // the counting counter, the other
	if timer {
		c, o = d.tStage, d.bStage
	}
	switch {
	case c+1 <= d.f: // still fast recovery
		return 0, false
	case o <= d.f: // additive increase from now on
		return d.ai, true
	case c+1 >= o: // hyper increase with i = o − F from now on
		return float64(o-d.f) * d.hai, true
	}
	return 0, false // i still grows
}

// bulk runs m events that each add step to Rt (capped at the line rate)
// and then halve Rc's distance to Rt. With e = Rc − Rt, j uncapped events
// give Rt + j·step and e_j = (e_0 + step)/2^j − step; once Rt is at the
// line rate, each event halves the gap to it.
func (d *DCQCN) bulk(m int64, step float64, timer bool) {
	u := m // events before Rt would reach the line rate
	if step > 0 {
		if k := math.Ceil((d.line - d.rt) / step); k-1 < float64(m) {
			u = max(int64(k)-1, 0)
		}
	}
	if u > 0 {
		e := d.rc - d.rt
		d.rt += float64(u) * step
		d.rc = d.rt + math.Ldexp(e+step, -int(min(u, 1<<20))) - step
	}
	if r := m - u; r > 0 {
		d.rt = d.line
		d.rc = d.line - math.Ldexp(d.line-d.rc, -int(min(r, 1<<20)))
	}
	d.rt = min(d.rt, d.line)
	d.rc = min(d.rc, d.rt)
	if d.rt-d.rc < 1 {
		d.rc = d.rt
	}
	if timer {
		d.tStage = satAdd(d.tStage, m)
	} else {
		d.bStage = satAdd(d.bStage, m)
	}
	if timer {
		d.timerInc = true
	}
}

// increase is one rate-increase event; the triggering counter has already
// been incremented.
func (d *DCQCN) increase() {
	if d.timerStages {
		switch t := d.tStage; {
		case t <= d.f: // fast recovery
		case t == d.f+1: // additive increase
			d.rt += d.ai
		default: // hyper increase, constant step
			d.rt += d.hai
		}
	} else {
		hi, lo := max(d.tStage, d.bStage), min(d.tStage, d.bStage)
		switch {
		case hi <= d.f: // fast recovery
		case lo > d.f: // hyper increase
			d.rt += float64(lo-d.f) * d.hai
		default: // additive increase
			d.rt += d.ai
		}
	}
	d.rt = min(d.rt, d.line)
	d.rc = (d.rt + d.rc) / 2
	if d.rt-d.rc < 1 {
		d.rc = d.rt
	}
}

// quiesce stops the increase machinery once Rc is at line rate: further
// increases could change nothing but the stage counters, which the next
// cut resets. (Whether the timer fired since the last cut is kept: it
// decides the next cut's clamp.)
func (d *DCQCN) quiesce() {
	d.rc, d.rt = d.line, d.line
	d.incNext = 0
	d.bytes = 0
}

// maxCutsPerEvent bounds the decreases one OnCNP applies when the
// rate-decrease interval is off.
const maxCutsPerEvent = 1 << 12

// satAdd returns n+m (m >= 0), saturating as satInc does.
func satAdd(n int, m int64) int {
	if m >= 1<<30 || n >= 1<<30-int(m) {
		return max(n, 1<<30)
	}
	return n + int(m)
}

// satInc returns n+1, saturating far below overflow.
func satInc(n int) int {
	if n >= 1<<30 {
		return n
	}
	return n + 1
}
