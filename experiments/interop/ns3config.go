package interop

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mptx-dev/mptx/units"
)

// NS3Config is an HPCC ns-3 config.txt (simulation/mix/config.txt, read by
// scratch/third.cc): one "KEY value..." per line. Every key third.cc
// reads is accepted; an unknown key, a repeated one or a bad value is an
// error naming the line. Fields hold the values with third.cc's defaults
// where the file is silent (third.cc's own or, where third.cc leaves a
// variable unset, RdmaHw's attribute defaults); Given records the line of
// each key the file sets.
//
// Units follow third.cc: intervals in microseconds, SIMULATOR_STOP_TIME in
// seconds, rates as ns-3 DataRate strings ("50Mb/s"), KMIN_MAP/KMAX_MAP in
// KB (×1000) per link rate in bit/s, BUFFER_SIZE in MiB,
// L2_ACK_INTERVAL and L2_CHUNK_SIZE in bytes (third.cc's comment says
// packets, but RdmaHw compares it with byte sequence numbers: 1 means every
// packet).
type NS3Config struct {
	EnableQCN           bool          // ENABLE_QCN: ECN marking at switches
	DynamicPFCThreshold bool          // USE_DYNAMIC_PFC_THRESHOLD
	PayloadSize         units.Bytes   // PACKET_PAYLOAD_SIZE
	TopologyFile        string        // TOPOLOGY_FILE (as written)
	FlowFile            string        // FLOW_FILE (as written)
	StopTime            time.Duration // SIMULATOR_STOP_TIME
	CCMode              int           // CC_MODE: 1 DCQCN, 3 HPCC, 7 TIMELY, 8 DCTCP, 10 HPCC-PINT

	// DCQCN (CC_MODE 1), RdmaHw's "Mellanox" model.
	AlphaResumeInterval  time.Duration // ALPHA_RESUME_INTERVAL
	RateDecreaseInterval time.Duration // RATE_DECREASE_INTERVAL
	ClampTargetRate      bool          // CLAMP_TARGET_RATE
	RPTimer              time.Duration // RP_TIMER
	EWMAGain             float64       // EWMA_GAIN
	FastRecoveryTimes    int           // FAST_RECOVERY_TIMES
	RateAI               units.BitRate // RATE_AI (DCQCN and HPCC)
	RateHAI              units.BitRate // RATE_HAI
	MinRate              units.BitRate // MIN_RATE (DCQCN and HPCC)

	ErrorRatePerLink float64     // ERROR_RATE_PER_LINK
	L2ChunkSize      units.Bytes // L2_CHUNK_SIZE
	L2AckInterval    units.Bytes // L2_ACK_INTERVAL
	L2BackToZero     bool        // L2_BACK_TO_ZERO

	// HPCC (CC_MODE 3).
	HasWin         bool    // HAS_WIN
	GlobalT        bool    // GLOBAL_T: T is the network's largest base RTT
	VarWin         bool    // VAR_WIN
	FastReact      bool    // FAST_REACT: react per ACK
	UTarget        float64 // U_TARGET: η
	MiThresh       int     // MI_THRESH: maxStage
	IntMulti       int     // INT_MULTI
	MultiRate      bool    // MULTI_RATE
	SampleFeedback bool    // SAMPLE_FEEDBACK
	RateBound      bool    // RATE_BOUND

	AckHighPrio bool // ACK_HIGH_PRIO

	LinkDown NS3LinkDown // LINK_DOWN

	KMin, KMax  map[units.BitRate]units.Bytes // KMIN_MAP, KMAX_MAP
	PMax        map[units.BitRate]float64     // PMAX_MAP
	BufferSize  units.Bytes                   // BUFFER_SIZE
	EnableTrace bool                          // ENABLE_TRACE (no effect here)

	// Given maps each key the file sets to its line.
	Given map[string]int
}

// NS3LinkDown is LINK_DOWN "a b c": take the link between nodes B and C
// down at 2 s + A µs (third.cc schedules it after the flows' usual 2 s
// start). A = B = C = 0 means none.
type NS3LinkDown struct {
	At   time.Duration // after 2 s
	A, B int
}

// None reports whether no link goes down.
func (l NS3LinkDown) None() bool { return l.At == 0 && l.A == 0 && l.B == 0 }

// NS3OutputKeys are the keys of ns-3's output files and tracing, which
// NS3Config accepts and mptx ignores: mptx writes fct.txt with --fct-out
// and its own results.
var NS3OutputKeys = []string{"TRACE_FILE", "TRACE_OUTPUT_FILE", "FCT_OUTPUT_FILE", "PFC_OUTPUT_FILE",
	"QLEN_MON_FILE", "QLEN_MON_START", "QLEN_MON_END", "ENABLE_TRACE"}

// ns3Key describes how one config.txt key reads.
type ns3Key struct {
	args int // values after the key; -1 for a map (count, then pairs)
	set  func(c *NS3Config, v []string) error
}

func boolKey(f func(*NS3Config) *bool) ns3Key {
	return ns3Key{1, func(c *NS3Config, v []string) error {
		switch v[0] {
		case "0":
			*f(c) = false
		case "1":
			*f(c) = true
		default:
			return fmt.Errorf("%q: want 0 or 1", v[0])
		}
		return nil
	}}
}

func intKey(lo, hi int, f func(*NS3Config, int)) ns3Key {
	return ns3Key{1, func(c *NS3Config, v []string) error {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("%q: want a whole number in [%d, %d]", v[0], lo, hi)
		}
		f(c, n)
		return nil
	}}
}

func floatKey(lo, hi float64, what string, f func(*NS3Config, float64)) ns3Key {
	return ns3Key{1, func(c *NS3Config, v []string) error {
		x, err := strconv.ParseFloat(v[0], 64)
		if err != nil || !(x >= lo && x <= hi) {
			return fmt.Errorf("%q: want %s in [%g, %g]", v[0], what, lo, hi)
		}
		f(c, x)
		return nil
	}}
}

// usKey reads microseconds (third.cc: MicroSeconds(v)) into a duration.
func usKey(f func(*NS3Config) *time.Duration) ns3Key {
	return floatKey(0, 1e6, "microseconds", func(c *NS3Config, x float64) {
		*f(c) = time.Duration(math.Round(x * 1e3))
	})
}

func rateKey(f func(*NS3Config) *units.BitRate) ns3Key {
	return ns3Key{1, func(c *NS3Config, v []string) error {
		r, err := ParseNS3Rate(v[0])
		if err != nil {
			return err
		}
		*f(c) = r
		return nil
	}}
}

func pathKey(f func(*NS3Config) *string) ns3Key {
	return ns3Key{1, func(c *NS3Config, v []string) error { *f(c) = v[0]; return nil }}
}

var ignoreKey = ns3Key{1, func(*NS3Config, []string) error { return nil }}

// ns3Keys lists every key third.cc reads.
var ns3Keys = map[string]ns3Key{
	"ENABLE_QCN":                boolKey(func(c *NS3Config) *bool { return &c.EnableQCN }),
	"USE_DYNAMIC_PFC_THRESHOLD": boolKey(func(c *NS3Config) *bool { return &c.DynamicPFCThreshold }),
	"CLAMP_TARGET_RATE":         boolKey(func(c *NS3Config) *bool { return &c.ClampTargetRate }),
	"PAUSE_TIME":                floatKey(0, 1e9, "a pause quantum", func(*NS3Config, float64) {}),
	"DATA_RATE":                 ignoreKey, // read and printed, unused by third.cc
	"LINK_DELAY":                ignoreKey, // read and printed, unused by third.cc
	"PACKET_PAYLOAD_SIZE": intKey(1, 1<<16, func(c *NS3Config, n int) {
		c.PayloadSize = units.Bytes(n)
	}),
	"L2_CHUNK_SIZE":     intKey(0, 1<<30, func(c *NS3Config, n int) { c.L2ChunkSize = units.Bytes(n) }),
	"L2_ACK_INTERVAL":   intKey(0, 1<<30, func(c *NS3Config, n int) { c.L2AckInterval = units.Bytes(n) }),
	"L2_BACK_TO_ZERO":   boolKey(func(c *NS3Config) *bool { return &c.L2BackToZero }),
	"TOPOLOGY_FILE":     pathKey(func(c *NS3Config) *string { return &c.TopologyFile }),
	"FLOW_FILE":         pathKey(func(c *NS3Config) *string { return &c.FlowFile }),
	"TRACE_FILE":        ignoreKey,
	"TRACE_OUTPUT_FILE": ignoreKey,
	"SIMULATOR_STOP_TIME": floatKey(0, 3600, "seconds", func(c *NS3Config, x float64) {
		c.StopTime = time.Duration(math.Round(x * 1e9))
	}),
	"ALPHA_RESUME_INTERVAL":  usKey(func(c *NS3Config) *time.Duration { return &c.AlphaResumeInterval }),
	"RP_TIMER":               usKey(func(c *NS3Config) *time.Duration { return &c.RPTimer }),
	"RATE_DECREASE_INTERVAL": usKey(func(c *NS3Config) *time.Duration { return &c.RateDecreaseInterval }),
	"EWMA_GAIN":              floatKey(0, 1, "a gain", func(c *NS3Config, x float64) { c.EWMAGain = x }),
	"FAST_RECOVERY_TIMES":    intKey(1, 1000, func(c *NS3Config, n int) { c.FastRecoveryTimes = n }),
	"RATE_AI":                rateKey(func(c *NS3Config) *units.BitRate { return &c.RateAI }),
	"RATE_HAI":               rateKey(func(c *NS3Config) *units.BitRate { return &c.RateHAI }),
	"MIN_RATE":               rateKey(func(c *NS3Config) *units.BitRate { return &c.MinRate }),
	"DCTCP_RATE_AI":          rateKey(func(*NS3Config) *units.BitRate { return new(units.BitRate) }),
	"ERROR_RATE_PER_LINK":    floatKey(0, 1, "a probability", func(c *NS3Config, x float64) { c.ErrorRatePerLink = x }),
	"CC_MODE":                intKey(0, 1000, func(c *NS3Config, n int) { c.CCMode = n }),
	"FCT_OUTPUT_FILE":        ignoreKey,
	"PFC_OUTPUT_FILE":        ignoreKey,
	"HAS_WIN":                boolKey(func(c *NS3Config) *bool { return &c.HasWin }),
	"GLOBAL_T":               boolKey(func(c *NS3Config) *bool { return &c.GlobalT }),
	"MI_THRESH":              intKey(0, 1000, func(c *NS3Config, n int) { c.MiThresh = n }),
	"VAR_WIN":                boolKey(func(c *NS3Config) *bool { return &c.VarWin }),
	"FAST_REACT":             boolKey(func(c *NS3Config) *bool { return &c.FastReact }),
	"U_TARGET":               floatKey(0, 1, "a utilisation", func(c *NS3Config, x float64) { c.UTarget = x }),
	"INT_MULTI":              intKey(1, 1<<20, func(c *NS3Config, n int) { c.IntMulti = n }),
	"RATE_BOUND":             boolKey(func(c *NS3Config) *bool { return &c.RateBound }),
	"ACK_HIGH_PRIO":          boolKey(func(c *NS3Config) *bool { return &c.AckHighPrio }),
	"LINK_DOWN": {3, func(c *NS3Config, v []string) error {
		var n [3]int64
		for i, s := range v {
			x, err := strconv.ParseInt(s, 10, 64)
			if err != nil || x < 0 || (i > 0 && x >= MaxNodes) || (i == 0 && x > 3600e6) {
				return fmt.Errorf("%q: want \"time_us node node\" (whole numbers; nodes below %d)", strings.Join(v, " "), MaxNodes)
			}
			n[i] = x
		}
		c.LinkDown = NS3LinkDown{At: time.Duration(n[0]) * time.Microsecond, A: int(n[1]), B: int(n[2])}
		return nil
	}},
	"ENABLE_TRACE": boolKey(func(c *NS3Config) *bool { return &c.EnableTrace }),
	"KMAX_MAP":     mapKey(func(c *NS3Config, r units.BitRate, v float64) { c.KMax[r] = units.Bytes(v * 1000) }, "KB", 1e6),
	"KMIN_MAP":     mapKey(func(c *NS3Config, r units.BitRate, v float64) { c.KMin[r] = units.Bytes(v * 1000) }, "KB", 1e6),
	"PMAX_MAP":     mapKey(func(c *NS3Config, r units.BitRate, v float64) { c.PMax[r] = v }, "a probability", 1),
	"BUFFER_SIZE": intKey(1, 1<<14, func(c *NS3Config, n int) {
		c.BufferSize = units.Bytes(n) * units.MiB
	}),
	"QLEN_MON_FILE":   ignoreKey,
	"QLEN_MON_START":  ignoreKey,
	"QLEN_MON_END":    ignoreKey,
	"MULTI_RATE":      boolKey(func(c *NS3Config) *bool { return &c.MultiRate }),
	"SAMPLE_FEEDBACK": boolKey(func(c *NS3Config) *bool { return &c.SampleFeedback }),
	"PINT_LOG_BASE":   floatKey(1, 100, "a log base", func(*NS3Config, float64) {}),
	"PINT_PROB":       floatKey(0, 1, "a probability", func(*NS3Config, float64) {}),
}

// mapKey reads "n rate value rate value ..." (whole bit/s rates; value
// integral in KB for the K maps, as third.cc reads a uint32).
func mapKey(put func(*NS3Config, units.BitRate, float64), what string, hi float64) ns3Key {
	return ns3Key{-1, func(c *NS3Config, v []string) error {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > 64 {
			return fmt.Errorf("count %q: want the number of rate/value pairs that follow, 1 to 64", v[0])
		}
		if len(v) != 1+2*n {
			return fmt.Errorf("want %d rate/value pairs after the count %d, got %d values", n, n, len(v)-1)
		}
		for i := 0; i < n; i++ {
			r, err := strconv.ParseInt(v[1+2*i], 10, 64)
			if err != nil || r < 1e9 || r > 1600e9 {
				return fmt.Errorf("rate %q: want bit/s as a whole number in [1e9, 1.6e12]", v[1+2*i])
			}
			x, err := strconv.ParseFloat(v[2+2*i], 64)
			if err != nil || !(x >= 0 && x <= hi) || (what == "KB" && x != math.Trunc(x)) {
				return fmt.Errorf("value %q for rate %d: want %s in [0, %g]", v[2+2*i], r, what, hi)
			}
			put(c, units.BitRate(r), x)
		}
		return nil
	}}
}

// ParseNS3Config reads a config.txt; file names it in errors.
func ParseNS3Config(r io.Reader, file string) (*NS3Config, error) {
	c := &NS3Config{
		// third.cc's initial values; RdmaHw attribute defaults where
		// third.cc leaves a variable unset (rp_timer, rate_ai, rate_hai)
		// or sets a degenerate one (ewma_gain = 1 / 16 is 0 in C++).
		EnableQCN: true, DynamicPFCThreshold: true, PayloadSize: 1000,
		StopTime: 3010 * time.Millisecond, CCMode: 1,
		AlphaResumeInterval: 55 * time.Microsecond, RateDecreaseInterval: 4 * time.Microsecond,
		RPTimer: 1500 * time.Microsecond, EWMAGain: 1.0 / 16, FastRecoveryTimes: 5,
		RateAI: 5 * units.Mbps, RateHAI: 50 * units.Mbps, MinRate: 100 * units.Mbps,
		HasWin: true, GlobalT: true, MiThresh: 5, FastReact: true, MultiRate: true,
		UTarget: 0.95, IntMulti: 1, RateBound: true, EnableTrace: true,
		BufferSize: 16 * units.MiB,
		KMin:       map[units.BitRate]units.Bytes{}, KMax: map[units.BitRate]units.Bytes{},
		PMax:  map[units.BitRate]float64{},
		Given: map[string]int{},
	}
	l := newLineReader(r, file)
	for {
		f, err := l.next()
		if err != nil {
			return nil, err
		}
		if f == nil {
			break
		}
		key, vals := f[0], f[1:]
		k, ok := ns3Keys[key]
		if !ok {
			return nil, l.fail("unknown key %q (HPCC ns-3's third.cc reads: %s)", key, strings.Join(sortedKeys(), ", "))
		}
		if prev, dup := c.Given[key]; dup {
			return nil, l.fail("%s given twice (first at line %d)", key, prev)
		}
		if k.args >= 0 && len(vals) != k.args {
			return nil, l.fail("%s takes %d value(s), got %d", key, k.args, len(vals))
		}
		if k.args < 0 && len(vals) == 0 {
			return nil, l.fail("%s takes a count and rate/value pairs", key)
		}
		if err := k.set(c, vals); err != nil {
			return nil, l.fail("%s %v", key, err)
		}
		c.Given[key] = l.n
	}
	return c, nil
}

func sortedKeys() []string {
	keys := make([]string, 0, len(ns3Keys))
	for k := range ns3Keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ECNFor returns the KMIN_MAP, KMAX_MAP and PMAX_MAP entries for a link
// rate; ok is false when any map lacks it (third.cc asserts "must set kmin
// for each link speed").
func (c *NS3Config) ECNFor(r units.BitRate) (kmin, kmax units.Bytes, pmax float64, ok bool) {
	kmin, ok1 := c.KMin[r]
	kmax, ok2 := c.KMax[r]
	pmax, ok3 := c.PMax[r]
	return kmin, kmax, pmax, ok1 && ok2 && ok3
}

// ECNRates returns the rates the ECN maps cover, in increasing order.
func (c *NS3Config) ECNRates() []units.BitRate {
	var rs []units.BitRate
	for r := range c.KMin {
		rs = append(rs, r)
	}
	slices.Sort(rs)
	return rs
}

// Line returns the line of key, 0 if the file does not set it.
func (c *NS3Config) Line(key string) int { return c.Given[key] }

// NS3Settings is what a config.txt asks of the simulator, in mptx's terms:
// the NIC's congestion control and its registry parameters, the NIC's
// framing and acknowledgements, and the switches' buffer and ECN.
type NS3Settings struct {
	// CC is "nic-dcqcn" (CC_MODE 1) or "nic-hpcc" (CC_MODE 3): the
	// simulated NIC's own congestion control, as RdmaHw runs it.
	CC string
	// CCParams are the cc registry's parameters for it ("dcqcn" with
	// profile ns3, or "hpcc").
	CCParams map[string]string
	// MTU is PACKET_PAYLOAD_SIZE; Header the bytes of headers third.cc
	// counts per data packet (HeaderBytes, plus HPCC's 42-byte INT header
	// under CC_MODE 3).
	MTU, Header units.Bytes
	// AckEvery is packets per ACK (L2_ACK_INTERVAL bytes, rounded up to
	// packets); CNPs then ride on every ACK of a marked packet, which the
	// simulator models as a CNP per marked packet (no CNP interval).
	AckEvery int
	// AckInDataClass is ACK_HIGH_PRIO 0.
	AckInDataClass bool
	// Buffer is BUFFER_SIZE; ECN is ENABLE_QCN, with the thresholds of
	// ECNByRate per link rate (KMIN_MAP, KMAX_MAP, PMAX_MAP).
	Buffer    units.Bytes
	ECN       bool
	ECNByRate []NS3ECN
	// Stop is SIMULATOR_STOP_TIME.
	Stop time.Duration
	// LinkDown is LINK_DOWN: at 2 s + At, the link between A and B fails.
	LinkDown NS3LinkDown
}

// NS3ECN is one link rate's RED thresholds.
type NS3ECN struct {
	Rate       units.BitRate
	KMin, KMax units.Bytes
	PMax       float64
}

// Settings translates c for a run on top (which gives the link rates the
// ECN maps must cover and, with GLOBAL_T, HPCC's T). Settings mptx does not
// model are errors naming the line that asks for them.
func (c *NS3Config) Settings(top *NS3Topology, file string) (*NS3Settings, error) {
	fail := func(key, format string, args ...any) error {
		return &ParseError{File: file, Line: c.Line(key), Msg: key + ": " + fmt.Sprintf(format, args...)}
	}
	s := &NS3Settings{
		MTU: c.PayloadSize, Header: HeaderBytes, AckInDataClass: !c.AckHighPrio,
		Buffer: c.BufferSize, ECN: c.EnableQCN, Stop: c.StopTime, LinkDown: c.LinkDown,
	}
	switch {
	case c.PayloadSize < 256 || c.PayloadSize > 9216:
		return nil, fail("PACKET_PAYLOAD_SIZE", "%d bytes: the simulator takes payloads of 256 to 9216 bytes", int64(c.PayloadSize))
	case !c.DynamicPFCThreshold:
		return nil, fail("USE_DYNAMIC_PFC_THRESHOLD", "0 (static QbbNetDevice thresholds) is not modelled; use 1 (SwitchMmu's dynamic threshold)")
	case c.L2BackToZero:
		return nil, fail("L2_BACK_TO_ZERO", "1 (go-back-0) is not modelled: the simulated NIC recovers go-back-N; use 0")
	case c.L2AckInterval == 0:
		return nil, fail("L2_ACK_INTERVAL", "0 (no ACKs) is not modelled: RC responders acknowledge; give bytes per ACK (1: every packet)")
	case c.ErrorRatePerLink > 0:
		return nil, fail("ERROR_RATE_PER_LINK", "%g: give random loss per link in topology.txt's error_rate column instead", c.ErrorRatePerLink)
	case !c.RateBound:
		return nil, fail("RATE_BOUND", "0 (no rate limiter) is not modelled; use 1")
	}
	s.AckEvery = int(max((c.L2AckInterval+c.PayloadSize-1)/c.PayloadSize, 1))
	for _, k := range []struct {
		key string
		d   time.Duration
	}{{"ALPHA_RESUME_INTERVAL", c.AlphaResumeInterval}, {"RATE_DECREASE_INTERVAL", c.RateDecreaseInterval}, {"RP_TIMER", c.RPTimer}} {
		if c.CCMode == 1 && k.d <= 0 {
			return nil, fail(k.key, "0: RdmaHw would reschedule itself forever at one instant; give an interval in µs")
		}
	}
	us := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e3, 'f', -1, 64) + "us" }
	rate := func(r units.BitRate) string { return strconv.FormatInt(int64(r), 10) + "bps" }
	switch c.CCMode {
	case 1:
		if c.HasWin {
			return nil, fail("HAS_WIN", "1 with DCQCN (a window on top of the rate) is not modelled; use 0")
		}
		if c.EWMAGain <= 0 || c.EWMAGain >= 1 {
			return nil, fail("EWMA_GAIN", "%g: want a gain in (0, 1)", c.EWMAGain)
		}
		clamp := "after_timer"
		if c.ClampTargetRate {
			clamp = "always"
		}
		s.CC = "nic-dcqcn"
		s.CCParams = map[string]string{
			"profile": "ns3", "g": strconv.FormatFloat(c.EWMAGain, 'g', -1, 64),
			"alpha_timer": us(c.AlphaResumeInterval), "rate_decrease_interval": us(c.RateDecreaseInterval),
			"rate_increase_timer": us(c.RPTimer), "f": strconv.Itoa(c.FastRecoveryTimes),
			"ai": rate(c.RateAI), "hai": rate(c.RateHAI), "min_rate": rate(c.MinRate), "clamp_target": clamp,
		}
	case 3:
		switch {
		case !c.HasWin || !c.VarWin:
			return nil, fail("VAR_WIN", "HPCC without its variable window (HAS_WIN 1, VAR_WIN 1) is not modelled")
		case !c.FastReact:
			return nil, fail("FAST_REACT", "0 (react once per RTT) is not modelled: mptx's HPCC reacts per ACK (Li et al. Algorithm 1); use 1")
		case c.SampleFeedback:
			return nil, fail("SAMPLE_FEEDBACK", "1 is not modelled: INT rides on every packet; use 0")
		case c.UTarget <= 0:
			return nil, fail("U_TARGET", "%g: want a utilisation in (0, 1]", c.UTarget)
		}
		s.CC = "nic-hpcc"
		s.Header += 42 // IntHeader::GetStaticSize(): 5 hops × 8 B + 2
		s.CCParams = map[string]string{
			"eta": strconv.FormatFloat(c.UTarget, 'g', -1, 64), "max_stage": strconv.Itoa(c.MiThresh),
			"ai": rate(c.RateAI), "min_rate": rate(c.MinRate),
		}
		if c.GlobalT {
			if t := top.MaxBaseRTT(c.PayloadSize); t > 0 {
				s.CCParams["t"] = t.String()
			}
		}
	case 7, 8, 10:
		return nil, fail("CC_MODE", "%d (%s) is not modelled at the NIC; supported: 1 (DCQCN), 3 (HPCC). (mptx's engine runs TIMELY: mptx sim --cc timely)", c.CCMode, map[int]string{7: "TIMELY", 8: "DCTCP", 10: "HPCC-PINT"}[c.CCMode])
	default:
		return nil, fail("CC_MODE", "%d: want 1 (DCQCN) or 3 (HPCC)", c.CCMode)
	}
	if c.EnableQCN {
		seen := map[units.BitRate]bool{}
		for _, k := range top.Links {
			if seen[k.Rate] {
				continue
			}
			seen[k.Rate] = true
			kmin, kmax, pmax, ok := c.ECNFor(k.Rate)
			if !ok {
				return nil, fail("KMIN_MAP", "no KMIN_MAP, KMAX_MAP and PMAX_MAP entries for %d bit/s, a link rate of the topology (third.cc: \"must set kmin for each link speed\")", int64(k.Rate))
			}
			if kmin >= kmax || pmax <= 0 || pmax > 1 {
				return nil, fail("KMAX_MAP", "at %d bit/s: KMIN %v, KMAX %v, PMAX %g; want KMIN < KMAX and 0 < PMAX <= 1", int64(k.Rate), kmin, kmax, pmax)
			}
			s.ECNByRate = append(s.ECNByRate, NS3ECN{Rate: k.Rate, KMin: kmin, KMax: kmax, PMax: pmax})
		}
		slices.SortFunc(s.ECNByRate, func(a, b NS3ECN) int { return int(a.Rate/units.Mbps - b.Rate/units.Mbps) })
	}
	if !c.LinkDown.None() {
		if c.LinkDown.A >= top.Nodes || c.LinkDown.B >= top.Nodes {
			return nil, fail("LINK_DOWN", "nodes %d and %d: the topology has %d nodes", c.LinkDown.A, c.LinkDown.B, top.Nodes)
		}
	}
	return s, nil
}
