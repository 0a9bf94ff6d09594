package cc

import (
	"fmt"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

func init() { registerConfig("hpcc", (*HPCCConfig).specs, NewHPCC) }

// HPCCConfig configures HPCC. Zero fields take the defaults below; fields
// documented with "negative: off" take a negative value to mean zero
// (their parameter takes "0").
//
// Defaults follow the HPCC paper and its ns-3 artifact
// (alibaba-edu/High-Precision-Congestion-Control, run.py profile "hp" and
// rdma-hw.cc; CC-PARAMS.md).
type HPCCConfig struct {
	// Eta is η, the target utilisation. Default 0.95 (paper; run.py
	// utgt 95). Range (0, 1]. Parameter "eta".
	Eta float64
	// MaxStage is maxStage: the number of additive-only reference-window
	// updates before a multiplicative one is forced. Default 5 (paper
	// and CC-PARAMS.md; run.py's default mi is 0). Negative: 0. Range [0, 1000].
	// Parameter "max_stage".
	MaxStage int
	// T is the base RTT the window is sized for (W = R·T; the paper uses
	// the largest base RTT in the network). Default the path's BaseRTT.
	// Range (0, 10s]. Parameter "t".
	T time.Duration
	// WAI is W_AI, the additive increase of the window. Default the bytes
	// AI carries in T, at least 1 byte. Range [1, MaxWindow]. Parameter
	// "wai"; give it or AI, not both.
	WAI units.Bytes
	// AI is W_AI as a rate, the way HPCC ns-3 takes it (RATE_AI: the
	// window grows by AI × T): WAI = AI × T when WAI is not given.
	// Default 10 Mb/s × LineRate/25 Gb/s (run.py ai = 10·bw/25). Range
	// [1 bit/s, LineRate]. Parameter "ai".
	AI units.BitRate
	// MinWindow floors W. Default the bytes MinRate carries in T, but at
	// least one MTU: a window below one packet would leave a paced path
	// releasing a packet every several RTTs (HPCC ns-3 floors the rate at
	// MinRate and always lets a packet out). Range [1, MaxWindow].
	// Parameter "min_window"; give it or MinRate, not both.
	MinWindow units.Bytes
	// MinRate floors W/T when MinWindow is not given. Default 100 Mb/s
	// (HPCC ns-3 RdmaHw MinRate), or the line rate if slower. Range
	// (0, LineRate]. Parameter "min_rate".
	MinRate units.BitRate
	// MaxWindow caps W. Default W_init = LineRate × T (the paper's initial
	// and largest window). Parameter "max_window".
	MaxWindow units.Bytes
}

// WithDefaults returns c with its zero fields set to the defaults for
// path, or path's error when it is not valid (a zero line rate, say).
func (c HPCCConfig) WithDefaults(path PathInfo) (HPCCConfig, error) {
	path, err := path.withDefaults()
	if err != nil {
		return c, err
	}
	if c.Eta == 0 {
		c.Eta = 0.95
	}
	if c.MaxStage == 0 {
		c.MaxStage = 5
	}
	if c.T == 0 {
		c.T = path.BaseRTT
	}
	t := max(c.T, 1)
	if c.AI == 0 {
		c.AI = max(scaleRate(path.LineRate, 10*units.Mbps, 25*units.Gbps), 1)
	}
	if c.WAI == 0 {
		c.WAI = max(c.AI.BytesIn(t), 1)
	}
	if c.MinRate == 0 {
		c.MinRate = min(100*units.Mbps, path.LineRate)
	}
	if c.MaxWindow == 0 {
		c.MaxWindow = max(path.LineRate.BytesIn(t), 1)
	}
	if c.MinWindow == 0 { // never above MaxWindow: on a path whose BDP is below one MTU, W is the BDP
		c.MinWindow = min(max(c.MinRate.BytesIn(t), path.MTU, 1), c.MaxWindow)
	}
	return c, nil
}

func (c *HPCCConfig) specs(path PathInfo) []spec {
	line := float64(path.LineRate)
	return []spec{
		{field: "Eta", param: "eta", kind: kNumber, ptr: &c.Eta, lo: 0, hi: 1, loOpen: true},
		{field: "MaxStage", param: "max_stage", kind: kInt, ptr: &c.MaxStage, off: true, lo: 0, hi: 1000},
		{field: "T", param: "t", kind: kDuration, ptr: &c.T, lo: 0, hi: float64(10 * time.Second), loOpen: true},
		{field: "WAI", param: "wai", kind: kSize, ptr: &c.WAI, lo: 1, hi: inf},
		{field: "AI", param: "ai", kind: kRate, ptr: &c.AI, lo: 1, hi: line},
		{field: "MinWindow", param: "min_window", kind: kSize, ptr: &c.MinWindow, lo: 1, hi: inf},
		{field: "MinRate", param: "min_rate", kind: kRate, ptr: &c.MinRate, lo: 0, hi: line, loOpen: true},
		{field: "MaxWindow", param: "max_window", kind: kSize, ptr: &c.MaxWindow, lo: 1, hi: inf},
	}
}

// Validate applies the defaults for path and checks every field. Errors
// name the field, its parameter, the value and the valid range.
func (c HPCCConfig) Validate(path PathInfo) error {
	path, err := path.withDefaults()
	if err != nil {
		return err
	}
	switch {
	case c.WAI != 0 && c.AI != 0:
		return fmt.Errorf("cc: hpcc: both WAI = %d bytes (parameter wai) and AI = %v (parameter ai) given; give one (WAI = AI × T)", int64(c.WAI), c.AI)
	case c.MinWindow != 0 && c.MinRate != 0:
		return fmt.Errorf("cc: hpcc: both MinWindow = %d bytes (parameter min_window) and MinRate = %v (parameter min_rate) given; give one (MinWindow = max(MinRate × T, MTU))", int64(c.MinWindow), c.MinRate)
	}
	if c, err = c.WithDefaults(path); err != nil {
		return err
	}
	if err := checkAll("hpcc", c.specs(path)); err != nil {
		return err
	}
	switch {
	case c.MinWindow > c.MaxWindow:
		return fmt.Errorf("cc: hpcc: MinWindow = %d bytes (parameter min_window), want MinWindow <= MaxWindow (%d bytes)", int64(c.MinWindow), int64(c.MaxWindow))
	case c.WAI > c.MaxWindow:
		return fmt.Errorf("cc: hpcc: WAI = %d bytes (parameter wai), want WAI <= MaxWindow (%d bytes)", int64(c.WAI), int64(c.MaxWindow))
	}
	return nil
}

// HPCC is HPCC (Li et al., "HPCC: High Precision Congestion Control",
// SIGCOMM 2019, Algorithm 1): a window computed from in-band network
// telemetry (INT).
//
// # What it needs
//
// INT on every ACK: Ack.Hops[:NHops] must carry, for each switch egress
// port on the path, its queue length, cumulative transmitted bytes,
// timestamp and line rate, stamped by the data packet the ACK
// acknowledges. The simulator provides this (qp.INTReader). Real RoCE NICs
// and verbs do not: on hardware every ACK has NHops == 0 and HPCC holds
// its window (W_init, the line-rate BDP, unless configured otherwise), so
// it behaves like Fixed. Loss, timeout and CNP events change nothing
// either (HPCC targets lossless fabrics).
//
// # Model
//
// For each ACK with telemetry, against the previous ACK's stamps of the
// same hops (MeasureInflight):
//
//	txRate_i = ΔtxBytes_i / Δts_i
//	u_i      = min(qlen_i, qlen_i')/(B_i·T) + txRate_i/B_i
//	u, τ     = the largest u_i and its Δts_i;  τ ← min(τ, T)
//	U        ← (1 − τ/T)·U + (τ/T)·u        (U starts at 1, as in ns-3)
//
// then (ComputeWind)
//
//	U ≥ η or incStage ≥ MaxStage:  W = Wc/(U/η) + W_AI
//	otherwise:                     W = Wc + W_AI
//
// clamped to [MinWindow, MaxWindow]. The reference window Wc (and
// incStage: reset after a multiplicative step, incremented after an
// additive one) is updated to W only once per RTT, when the ACK covers
// data sent after the previous update: the paper's lastUpdateSeq, kept in
// bytes. The cumulative acknowledged bytes are compared with the send
// mark taken at the previous update, the cumulative bytes reported by
// OnSend or, if the driver never calls OnSend, acknowledged + in-flight
// bytes. Other ACKs compute W from Wc without updating it (the paper's
// per-ACK fast reaction).
//
// The first ACK with telemetry (and any ACK whose hop count changed, a new
// route) only records the stamps. Hops whose timestamp did not advance,
// whose byte counter went backwards or whose rate is 0 are skipped; an
// ACK with no usable hop records its stamps and holds.
//
// Window returns W; Rate returns W/T for the pacer. Deadline is always 0.
//
// The zero HPCC is not usable; call NewHPCC. An HPCC is not safe for
// concurrent use.
type HPCC struct {
	cfg HPCCConfig

	tNS, invT        float64 // T in ns and 1/T
	qScale, rScale   float64 // 8e9/T: bytes queued per T → utilisation·B; W → bit/s
	eta              float64
	maxStage         int
	wai, wMin, wMax  float64 // bytes
	w, wc, u, lastU  float64
	incStage         int
	hops             [MaxHops]INTHop
	nhops            int // 0: no stamps recorded yet
	acked, sent      units.Bytes
	sawSend          bool
	lastUpdateSeq    units.Bytes
	updates, reacted int // counts, for State
}

var _ Algorithm = (*HPCC)(nil)
var _ Stater = (*HPCC)(nil)

// NewHPCC returns an HPCC for path, starting at W = MaxWindow (W_init).
// Zero fields of cfg take their defaults; invalid fields are an error
// naming the field.
func NewHPCC(cfg HPCCConfig, path PathInfo) (*HPCC, error) {
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
	h := &HPCC{
		cfg:      c,
		tNS:      float64(c.T),
		invT:     1 / float64(c.T),
		qScale:   8e9 / float64(c.T),
		rScale:   8e9 / float64(c.T),
		eta:      c.Eta,
		maxStage: max(c.MaxStage, 0),
		wai:      float64(c.WAI),
		wMin:     float64(c.MinWindow),
		wMax:     float64(c.MaxWindow),
		u:        1,
	}
	h.w, h.wc = h.wMax, h.wMax
	return h, nil
}

// Name returns "hpcc".
func (h *HPCC) Name() string { return "hpcc" }

// Config returns the configuration in use, defaults applied.
func (h *HPCC) Config() HPCCConfig { return h.cfg }

// OnSend counts sent bytes for the once-per-RTT update mark.
func (h *HPCC) OnSend(s Sent) {
	h.sawSend = true
	h.sent = h.sent.AddSat(max(s.Bytes, 0))
}

// OnAck runs Algorithm 1's NewAck on the ACK's telemetry; with none it
// holds.
func (h *HPCC) OnAck(a Ack) {
	h.acked = h.acked.AddSat(max(a.Acked, 0))
	n := a.NHops
	if n <= 0 || n > MaxHops {
		return // no INT: hold
	}
	sndNxt := h.sent
	if !h.sawSend {
		sndNxt = h.acked.AddSat(max(a.InFlight, 0))
	}
	if h.nhops != n { // first telemetry, or a new route
		copy(h.hops[:n], a.Hops[:n])
		h.nhops = n
		h.lastUpdateSeq = sndNxt
		return
	}
	update := h.acked > h.lastUpdateSeq
	if !h.measure(&a) {
		return
	}
	h.computeWind(update)
	if update {
		h.lastUpdateSeq = sndNxt
		h.updates = satInc(h.updates)
	} else {
		h.reacted = satInc(h.reacted)
	}
}

// measure is MeasureInflight: it folds the ACK's hop stamps into U,
// records them, and reports whether any hop was usable.
func (h *HPCC) measure(a *Ack) bool {
	var umax, tau float64
	ok := false
	for i := 0; i < h.nhops; i++ {
		cur, prev := &a.Hops[i], &h.hops[i]
		dt := cur.TS - prev.TS
		dB := cur.TxBytes - prev.TxBytes
		if dt <= 0 || dB < 0 || cur.Rate <= 0 {
			continue
		}
		// u = qlen/(B·T) + txRate/B with txRate = ΔtxBytes·8/Δts, as one
		// division: (qlen·(8/T)·Δts + ΔtxBytes·8) / (B·Δts), times in ns.
		q := min(cur.QLen, prev.QLen)
		if q < 0 {
			q = 0
		}
		fdt := float64(dt)
		u := (float64(q)*h.qScale*fdt + float64(dB)*8e9) / (float64(cur.Rate) * fdt)
		if !ok || u > umax {
			umax, tau, ok = u, fdt, true
		}
	}
	copy(h.hops[:h.nhops], a.Hops[:h.nhops])
	if !ok {
		return false
	}
	if tau > h.tNS {
		tau = h.tNS
	}
	f := tau * h.invT
	h.u = (1-f)*h.u + f*umax
	h.lastU = umax
	return true
}

// computeWind is ComputeWind; update says whether Wc moves.
func (h *HPCC) computeWind(update bool) {
	var w float64
	if h.u >= h.eta || h.incStage >= h.maxStage {
		u := h.u
		if !(u > 1e-12) { // U ≈ 0 with incStage ≥ maxStage: W is capped below
			u = 1e-12
		}
		w = h.wc*h.eta/u + h.wai // Wc/(U/η) + W_AI
		if update {
			h.incStage = 0
		}
	} else {
		w = h.wc + h.wai
		if update {
			h.incStage = satInc(h.incStage)
		}
	}
	switch {
	case !(w >= h.wMin): // also NaN
		w = h.wMin
	case w > h.wMax:
		w = h.wMax
	}
	h.w = w
	if update {
		h.wc = w
	}
}

// OnCNP does nothing: HPCC uses INT, not ECN.
func (h *HPCC) OnCNP(CNP) {}

// OnLoss does nothing: HPCC assumes a lossless fabric.
func (h *HPCC) OnLoss(Loss) {}

// OnTimeout does nothing: HPCC assumes a lossless fabric.
func (h *HPCC) OnTimeout(vtime.Time) {}

// OnTimer does nothing: HPCC has no timers.
func (h *HPCC) OnTimer(vtime.Time) {}

// Deadline returns 0: HPCC has no timers.
func (h *HPCC) Deadline() vtime.Time { return 0 }

// Window returns W, at least 1 byte.
func (h *HPCC) Window() units.Bytes { return max(bytesOf(h.w), 1) }

// Rate returns W/T.
func (h *HPCC) Rate() units.BitRate { return max(rateOf(h.w*h.rScale), 1) }

// U returns the smoothed utilisation U.
func (h *HPCC) U() float64 { return h.u }

// State returns U, the latest per-ACK u, W and Wc (bytes), incStage and
// the counts of reference updates and fast reactions.
func (h *HPCC) State() map[string]float64 {
	return map[string]float64{
		"u":         h.u,
		"u_last":    h.lastU,
		"w_bytes":   h.w,
		"wc_bytes":  h.wc,
		"inc_stage": float64(h.incStage),
		"updates":   float64(h.updates),
		"reactions": float64(h.reacted),
	}
}
