package cc

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/mptx-dev/mptx/units"
)

func init() { Register("dcqcn", newDCQCNFromParams) }

// DCQCN variants. The DCQCN paper's equations leave room that real NICs and
// the reference simulator fill differently; each choice is a field of
// DCQCNConfig, named by one of these types. The zero value of each type
// means "the default" (ConnectX firmware's choice).

// DCQCNAlphaUpdate is how α follows CNPs.
type DCQCNAlphaUpdate uint8

const (
	// DCQCNAlphaPeriodic updates α once every AlphaTimer, from the first CNP
	// on: α ← (1−g)·α + g if a CNP arrived during the period, else
	// α ← (1−g)·α. The first CNP only starts the clock. This is ConnectX
	// firmware ("DCQCN CC Parameters": dce_tcp_g, dce_tcp_rtt: "if a CNP is
	// received during this period, alpha is incremented, otherwise it is
	// decremented") and HPCC ns-3 RdmaHw::UpdateAlphaMlx. The default.
	DCQCNAlphaPeriodic DCQCNAlphaUpdate = iota + 1
	// DCQCNAlphaPerCNP raises α on every CNP, α ← (1−g)·α + g (Zhu et al.,
	// Eq. 1), and decays it by (1−g) every AlphaTimer without a CNP (Eq. 2).
	DCQCNAlphaPerCNP
)

// DCQCNDecrease is when a CNP's rate cut happens.
type DCQCNDecrease uint8

const (
	// DCQCNDecreaseImmediate cuts on the CNP itself when at least
	// RateDecreaseInterval has passed since the previous cut; CNPs sooner
	// than that are applied as one cut when the interval ends. ConnectX's
	// rate_reduce_monitor_period ("the time period between rate
	// reductions"). The default.
	DCQCNDecreaseImmediate DCQCNDecrease = iota + 1
	// DCQCNDecreasePeriodic cuts only at periodic checks, every
	// RateDecreaseInterval from the first CNP, if a CNP arrived since the
	// previous check; the first CNP is cut one interval after it arrives.
	// HPCC ns-3 RdmaHw::CheckRateDecreaseMlx.
	DCQCNDecreasePeriodic
)

// DCQCNClamp is when a cut resets the target rate to the current rate.
type DCQCNClamp uint8

const (
	// DCQCNClampAfterTimer sets Rt ← Rc on a cut only if the rate
	// increase timer has fired since the previous cut; a burst of cuts
	// keeps the old target, so recovery heads back towards the
	// pre-congestion rate. ConnectX clamp_tgt_rate 0 with
	// clamp_tgt_rate_after_time_inc 1, and HPCC ns-3's CLAMP_TARGET_RATE 0
	// (RdmaHw::CheckRateDecreaseMlx clamps only when rpTimeStage != 0).
	// The default.
	DCQCNClampAfterTimer DCQCNClamp = iota + 1
	// DCQCNClampAlways sets Rt ← Rc on every cut (Zhu et al., Eq. 1;
	// ConnectX clamp_tgt_rate 1; ns-3 CLAMP_TARGET_RATE 1).
	DCQCNClampAlways
)

// DCQCNIncrease is how rate-increase events map to the recovery stages.
type DCQCNIncrease uint8

const (
	// DCQCNIncreaseQCN counts timer events T and byte-counter events BC
	// (as QCN, IEEE 802.1Qau, and Zhu et al. §3.1): fast recovery while
	// max(T, BC) ≤ F, hyper increase Rt += i·HAI with i = min(T, BC) − F
	// once both exceed F, additive increase Rt += AI otherwise. Hyper
	// increase therefore needs the byte counter too. ConnectX
	// (rpg_time_reset, rpg_byte_reset, rpg_threshold). The default.
	DCQCNIncreaseQCN DCQCNIncrease = iota + 1
	// DCQCNIncreaseTimer counts timer events only (the byte counter must
	// be off): fast recovery for the first F, one additive increase
	// (T = F+1), then hyper increase by a constant HAI per event. HPCC
	// ns-3 RdmaHw::RateIncEventMlx.
	DCQCNIncreaseTimer
)

var (
	alphaUpdateNames = []string{"periodic", "per_cnp"}
	decreaseNames    = []string{"immediate", "periodic"}
	clampNames       = []string{"after_timer", "always"}
	increaseNames    = []string{"qcn", "timer"}
)

func enumName(names []string, v uint8) string {
	if v >= 1 && int(v) <= len(names) {
		return names[v-1]
	}
	if v == 0 {
		return "default"
	}
	return fmt.Sprintf("variant(%d)", v)
}

// String returns the parameter name of the variant ("periodic", "per_cnp").
func (v DCQCNAlphaUpdate) String() string { return enumName(alphaUpdateNames, uint8(v)) }

// String returns the parameter name of the variant ("immediate", "periodic").
func (v DCQCNDecrease) String() string { return enumName(decreaseNames, uint8(v)) }

// String returns the parameter name of the variant ("after_timer", "always").
func (v DCQCNClamp) String() string { return enumName(clampNames, uint8(v)) }

// String returns the parameter name of the variant ("qcn", "timer").
func (v DCQCNIncrease) String() string { return enumName(increaseNames, uint8(v)) }

// DCQCNConfig configures DCQCN's reaction point. Zero fields take the
// defaults below; fields documented with "negative: off" take a negative
// value to mean zero (their parameter takes "0").
//
// Defaults follow NVIDIA ConnectX firmware (ConnectX-4 and later, the
// "DCQCN CC Parameters" page of the NVIDIA DOCA / MLNX_OFED documentation;
// CC-PARAMS.md), the DCQCN most RoCE traffic runs. The page's alpha-update
// and rate-decrease rows (dce_tcp_g 1019, dce_tcp_rtt 1 µs,
// initial_alpha_value 1023, rpg_min_rate 1 Mb/s, rate_reduce_monitor_period
// 4 µs) were checked against it; the rate-increase rows (clamp_tgt_rate 0,
// clamp_tgt_rate_after_time_inc 1, rpg_time_reset 300 µs, rpg_byte_reset
// 32767 (64-byte units), rpg_threshold 1, rpg_ai_rate 5 Mb/s, rpg_hai_rate 50 Mb/s) are
// quoted from memory of the same page [unverified]. DCQCNProfile names the
// other parameter sets: HPCC ns-3's RdmaHw ("ns3") and the paper ("paper").
// A field the firmware has but this model lacks is listed under Deviation
// on DCQCN.
type DCQCNConfig struct {
	// G is the alpha gain g. Default 5/1024 (ConnectX dce_tcp_g = 1019,
	// α ← (1019/1024)·α + 5/1024). Range (0, 1). Parameter "g".
	G float64
	// InitAlpha is α at the first CNP. Default 1023/1024 (ConnectX
	// initial_alpha_value; ns-3 RdmaHw uses 1). Range [0, 1]; negative
	// means 0. Parameter "init_alpha".
	InitAlpha float64
	// AlphaUpdate is how α follows CNPs. Default DCQCNAlphaPeriodic.
	// Parameter "alpha_update": "periodic" or "per_cnp".
	AlphaUpdate DCQCNAlphaUpdate
	// AlphaTimer is the α update period (periodic) or K, the decay period
	// without a CNP (per_cnp, Eq. 2). Default 1 µs (ConnectX dce_tcp_rtt).
	// Negative: off (α never decays). Parameter "alpha_timer".
	AlphaTimer time.Duration
	// Decrease is when a CNP's cut happens. Default DCQCNDecreaseImmediate.
	// Parameter "decrease": "immediate" or "periodic".
	Decrease DCQCNDecrease
	// RateDecreaseInterval is the least time between two cuts (immediate)
	// or the period of the decrease check (periodic). Default 4 µs
	// (ConnectX rate_reduce_monitor_period; ns-3 RATE_DECREASE_INTERVAL).
	// Negative: off (immediate only: every CNP cuts at once, as in the
	// paper's text). Parameter "rate_decrease_interval".
	RateDecreaseInterval time.Duration
	// Clamp is when a cut resets the target rate. Default
	// DCQCNClampAfterTimer. Parameter "clamp_target": "after_timer" or
	// "always".
	Clamp DCQCNClamp
	// Increase maps increase events to stages. Default DCQCNIncreaseQCN.
	// Parameter "increase": "qcn" or "timer".
	Increase DCQCNIncrease
	// RateIncreaseTimer is T, the period of timer-driven rate increases,
	// restarted by every cut. Default 300 µs (ConnectX rpg_time_reset).
	// Negative: off. Parameter "rate_increase_timer".
	RateIncreaseTimer time.Duration
	// ByteCounter is B: a rate increase every B bytes sent. Default
	// 2,097,088 bytes: ConnectX rpg_byte_reset 32767, read as 64-byte
	// units [unverified unit: read as bytes, a byte-counter event every 32
	// KB makes fast recovery nearly immediate and the 16:1 incast never
	// settles in the simulator]. Negative: off (required with Increase =
	// timer). Parameter "byte_counter".
	ByteCounter units.Bytes
	// F is the fast-recovery threshold. Default 1 (ConnectX
	// rpg_threshold; the paper and ns-3 use 5). Range [1, 1000].
	// Parameter "f".
	F int
	// AI is R_AI, the additive-increase step of the target rate. Default
	// 5 Mb/s (ConnectX rpg_ai_rate), or LineRate/10^6 on lines above 5
	// Tb/s. Range [LineRate/10^6, LineRate].
	// Parameter "ai".
	AI units.BitRate
	// HAI is R_HAI, the hyper-increase step. Default 50 Mb/s (ConnectX
	// rpg_hai_rate). Range [0, LineRate]; negative means 0. Parameter
	// "hai".
	HAI units.BitRate
	// MinRate floors the current rate. Default 1 Mb/s (ConnectX
	// rpg_min_rate). Range (0, LineRate]. Parameter "min_rate".
	MinRate units.BitRate
	// Window caps the bytes in flight. Default unlimited (units.MaxBytes):
	// DCQCN is rate-based. Parameter "window".
	Window units.Bytes
}

// DCQCNProfiles returns the names DCQCNProfile accepts.
func DCQCNProfiles() []string { return []string{"connectx", "ns3", "paper"} }

// DCQCNProfile returns a named DCQCN parameter set for path; the registry
// takes it as parameter "profile", and other parameters override its
// fields.
//
//   - "connectx": ConnectX firmware defaults (the zero DCQCNConfig).
//   - "ns3": HPCC ns-3's RdmaHw with its attribute defaults
//     (alibaba-edu/High-Precision-Congestion-Control,
//     simulation/src/point-to-point/model/rdma-hw.cc): g = 1/16, α = 1 at
//     the first CNP and updated every 55 µs (periodic), a decrease check
//     every 4 µs (periodic), no target clamp unless the timer fired,
//     timer-only increase every 1500 µs with F = 5, AI 5 Mb/s, HAI 50
//     Mb/s, no byte counter, minimum rate 100 Mb/s. An ns-3 config.txt
//     overrides these (ALPHA_RESUME_INTERVAL, RATE_DECREASE_INTERVAL,
//     RP_TIMER, EWMA_GAIN, FAST_RECOVERY_TIMES, RATE_AI, RATE_HAI,
//     MIN_RATE, CLAMP_TARGET_RATE).
//   - "paper": the DCQCN paper's equations as HPCC ns-3's run.py profile
//     "dcqcn_paper" sets them (g = 1/256, α per CNP with a 50 µs decay
//     timer, cuts at once at most every 50 µs, Rt ← Rc on every cut, QCN
//     stages with a 55 µs timer, a 10 MB byte counter and F = 5, AI 5
//     Mb/s and HAI 50 Mb/s per 25 Gb/s of line rate, minimum rate 100
//     Mb/s).
func DCQCNProfile(name string, path PathInfo) (DCQCNConfig, error) {
	path, err := path.withDefaults()
	if err != nil {
		return DCQCNConfig{}, err
	}
	switch name {
	case "connectx":
		return DCQCNConfig{}, nil
	case "ns3":
		return DCQCNConfig{
			G: 1.0 / 16, InitAlpha: 1,
			AlphaUpdate: DCQCNAlphaPeriodic, AlphaTimer: 55 * time.Microsecond,
			Decrease: DCQCNDecreasePeriodic, RateDecreaseInterval: 4 * time.Microsecond,
			Clamp: DCQCNClampAfterTimer, Increase: DCQCNIncreaseTimer,
			RateIncreaseTimer: 1500 * time.Microsecond, ByteCounter: -1, F: 5,
			AI: min(max(5*units.Mbps, units.BitRate(math.Ceil(float64(path.LineRate)/1e6))), path.LineRate), HAI: min(50*units.Mbps, path.LineRate),
			MinRate: min(100*units.Mbps, path.LineRate),
		}, nil
	case "paper":
		return DCQCNConfig{
			G: 1.0 / 256, InitAlpha: 1,
			AlphaUpdate: DCQCNAlphaPerCNP, AlphaTimer: 50 * time.Microsecond,
			Decrease: DCQCNDecreaseImmediate, RateDecreaseInterval: 50 * time.Microsecond,
			Clamp: DCQCNClampAlways, Increase: DCQCNIncreaseQCN,
			RateIncreaseTimer: 55 * time.Microsecond, ByteCounter: 10 * units.MB, F: 5,
			AI:      max(scaleRate(path.LineRate, 5*units.Mbps, 25*units.Gbps), 1),
			HAI:     scaleRate(path.LineRate, 50*units.Mbps, 25*units.Gbps),
			MinRate: min(100*units.Mbps, path.LineRate),
		}, nil
	}
	return DCQCNConfig{}, fmt.Errorf("cc: dcqcn: unknown profile %q (valid: %s)", name, strings.Join(DCQCNProfiles(), ", "))
}

// WithDefaults returns c with its zero fields set to the defaults for
// path, or path's error when it is not valid (a zero line rate, say).
func (c DCQCNConfig) WithDefaults(path PathInfo) (DCQCNConfig, error) {
	path, err := path.withDefaults()
	if err != nil {
		return c, err
	}
	if c.G == 0 {
		c.G = 5.0 / 1024
	}
	if c.InitAlpha == 0 {
		c.InitAlpha = 1023.0 / 1024
	}
	if c.AlphaUpdate == 0 {
		c.AlphaUpdate = DCQCNAlphaPeriodic
	}
	if c.AlphaTimer == 0 {
		c.AlphaTimer = time.Microsecond
	}
	if c.Decrease == 0 {
		c.Decrease = DCQCNDecreaseImmediate
	}
	if c.RateDecreaseInterval == 0 {
		c.RateDecreaseInterval = 4 * time.Microsecond
	}
	if c.Clamp == 0 {
		c.Clamp = DCQCNClampAfterTimer
	}
	if c.Increase == 0 {
		c.Increase = DCQCNIncreaseQCN
	}
	if c.RateIncreaseTimer == 0 {
		c.RateIncreaseTimer = 300 * time.Microsecond
	}
	if c.ByteCounter == 0 {
		c.ByteCounter = 32767 * 64
	}
	if c.F == 0 {
		c.F = 1
	}
	if c.AI == 0 {
		// 5 Mb/s, kept within the valid range on extreme line rates.
		c.AI = min(max(5*units.Mbps, units.BitRate(math.Ceil(float64(path.LineRate)/1e6))), path.LineRate)
	}
	if c.HAI == 0 {
		c.HAI = min(50*units.Mbps, path.LineRate)
	}
	if c.MinRate == 0 {
		c.MinRate = min(units.Mbps, path.LineRate)
	}
	if c.Window == 0 {
		c.Window = units.MaxBytes
	}
	return c, nil
}

// specs describes c's fields for validation and parameter decoding.
func (c *DCQCNConfig) specs(path PathInfo) []spec {
	line := float64(path.LineRate)
	return []spec{
		{field: "G", param: "g", kind: kNumber, ptr: &c.G, lo: 0, hi: 1, loOpen: true, hiOpen: true},
		{field: "InitAlpha", param: "init_alpha", kind: kNumber, ptr: &c.InitAlpha, off: true, lo: 0, hi: 1},
		{field: "AlphaUpdate", param: "alpha_update", kind: kEnum, ptr: (*uint8)(&c.AlphaUpdate), names: alphaUpdateNames},
		{field: "AlphaTimer", param: "alpha_timer", kind: kDuration, ptr: &c.AlphaTimer, off: true, lo: 0, hi: float64(time.Second)},
		{field: "Decrease", param: "decrease", kind: kEnum, ptr: (*uint8)(&c.Decrease), names: decreaseNames},
		{field: "RateDecreaseInterval", param: "rate_decrease_interval", kind: kDuration, ptr: &c.RateDecreaseInterval, off: true, lo: 0, hi: float64(time.Second)},
		{field: "Clamp", param: "clamp_target", kind: kEnum, ptr: (*uint8)(&c.Clamp), names: clampNames},
		{field: "Increase", param: "increase", kind: kEnum, ptr: (*uint8)(&c.Increase), names: increaseNames},
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
	if c, err = c.WithDefaults(path); err != nil {
		return err
	}
	if err := checkAll("dcqcn", c.specs(path)); err != nil {
		return err
	}
	switch {
	case c.RateIncreaseTimer < 0 && c.ByteCounter < 0:
		return errDCQCNNoIncrease
	case c.Increase == DCQCNIncreaseTimer && c.ByteCounter > 0:
		return fmt.Errorf("cc: dcqcn: ByteCounter = %d bytes (parameter byte_counter) with Increase = timer (parameter increase), which counts timer events only; turn the byte counter off (0) or use increase qcn", int64(c.ByteCounter))
	case c.Increase == DCQCNIncreaseTimer && c.RateIncreaseTimer < 0:
		return errors.New("cc: dcqcn: RateIncreaseTimer (parameter rate_increase_timer) is off with Increase = timer (parameter increase), so the rate could never recover; turn the timer on")
	case c.Decrease == DCQCNDecreasePeriodic && c.RateDecreaseInterval < 0:
		return errors.New("cc: dcqcn: RateDecreaseInterval (parameter rate_decrease_interval) is off with Decrease = periodic (parameter decrease), which needs its period; give an interval or use decrease immediate")
	}
	return nil
}

var errDCQCNNoIncrease = errors.New("cc: dcqcn: RateIncreaseTimer (parameter rate_increase_timer) and ByteCounter (parameter byte_counter) are both off, so the rate could never recover; turn one on")

// newDCQCNFromParams is the registry's factory: parameter "profile" picks
// the base configuration (DCQCNProfile), the others override its fields.
func newDCQCNFromParams(p Params, path PathInfo) (Algorithm, error) {
	path, err := path.withDefaults()
	if err != nil {
		return nil, err
	}
	var c DCQCNConfig
	if name, ok := p["profile"]; ok {
		if c, err = DCQCNProfile(strings.TrimSpace(name), path); err != nil {
			return nil, err
		}
		p = maps.Clone(p)
		delete(p, "profile")
	}
	var profile uint8 // listed so that unknown-parameter errors name it; never set
	specs := append(c.specs(path), spec{field: "profile", param: "profile", kind: kEnum, ptr: &profile, names: DCQCNProfiles()})
	if err := decode("dcqcn", p, specs); err != nil {
		return nil, err
	}
	return NewDCQCN(c, path)
}
