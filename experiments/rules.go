package experiments

import (
	"fmt"
	"strconv"
	"time"

	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/units"
)

// A rule is one spec field's validation: a default for when the file does
// not set the field, then a range check. The scalar sections (switch, nic,
// stop, sample, the topology's rates) are tables of rules; checks that
// relate two fields follow each table as small functions.
//
// A default applies only when the field is absent (or null): a value the
// file writes, zero included, is checked like any other, so host_rate: 0
// is an error rather than silently 100Gbps.
type rule interface {
	apply(v *validator) error
}

// field is a rule for one field of type T.
type field[T any] struct {
	path string
	get  func(*Spec) *T
	// def gives the default (nil: none, the zero value stays).
	def func(*Spec) T
	// ok reports whether a value is valid (nil: any); want says what is
	// valid, for the error.
	ok   func(s *Spec, x T) bool
	want func(s *Spec) string
}

func (f field[T]) apply(v *validator) error {
	p := f.get(v.s)
	if f.def != nil && !v.set(f.path) {
		*p = f.def(v.s)
	}
	if f.ok != nil && !f.ok(v.s, *p) {
		return v.fail(f.path, format(*p), f.want(v.s))
	}
	return nil
}

// format renders a field's value for an error message.
func format(x any) string {
	switch x := x.(type) {
	case units.Bytes:
		return x.String()
	case units.BitRate:
		return x.String()
	case Duration:
		return x.String()
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return fmtFloat(x)
	case *int:
		if x == nil {
			return ""
		}
		return strconv.Itoa(*x)
	case *bool:
		if x == nil {
			return ""
		}
		return strconv.FormatBool(*x)
	}
	return fmt.Sprint(x)
}

// Constructors for the common shapes.

func constant[T any](x T) func(*Spec) T { return func(*Spec) T { return x } }

// defTrue defaults a *bool to a fresh true (specs never share pointers).
func defTrue(*Spec) *bool { return ptr(true) }

func msg(s string) func(*Spec) string { return func(*Spec) string { return s } }

// within is the closed range [lo, hi].
func within[T int | int64 | units.Bytes | units.BitRate | Duration | float64](lo, hi T) func(*Spec, T) bool {
	return func(_ *Spec, x T) bool { return x >= lo && x <= hi }
}

// applyRules runs a table of rules in order.
func applyRules(rs []rule) func(*validator) error {
	return func(v *validator) error {
		for _, r := range rs {
			if err := r.apply(v); err != nil {
				return err
			}
		}
		return nil
	}
}

// rateRange is every link rate the simulator is exercised at.
var rateRange = within(units.Gbps, 1600*units.Gbps)

const rateWant = "want a rate in [1Gbps, 1600Gbps]"

// topoRateRules apply to every generated topology (not ns3).
var topoRateRules = []rule{
	field[units.BitRate]{path: "topology.host_rate", get: func(s *Spec) *units.BitRate { return &s.Topology.HostRate },
		def: constant(100 * units.Gbps), ok: rateRange, want: msg(rateWant)},
	field[units.BitRate]{path: "topology.fabric_rate", get: func(s *Spec) *units.BitRate { return &s.Topology.FabricRate },
		def: func(s *Spec) units.BitRate { return s.Topology.HostRate }, ok: rateRange, want: msg(rateWant)},
	field[Duration]{path: "topology.link_delay", get: func(s *Spec) *Duration { return &s.Topology.LinkDelay },
		def: constant(Duration(time.Microsecond)), ok: within[Duration](0, Duration(time.Second)), want: msg("want a delay in [0, 1s]")},
	field[float64]{path: "topology.loss", get: func(s *Spec) *float64 { return &s.Topology.Loss },
		ok: within(0.0, 1.0), want: msg("want a probability in [0, 1]")},
}

// belowBuffer accepts sizes up to switch.buffer.
func belowBuffer(s *Spec, x units.Bytes) bool { return x <= s.Switch.Buffer }

func exceedsBuffer(s *Spec) string { return "exceeds switch.buffer " + s.Switch.Buffer.String() }

var switchRules = []rule{
	field[units.Bytes]{path: "switch.buffer", get: func(s *Spec) *units.Bytes { return &s.Switch.Buffer },
		def: constant(16 * units.MiB), ok: within(64*units.KiB, 16*units.GiB), want: msg("want a size in [64KiB, 16GiB]")},
	field[*bool]{path: "switch.pfc.enabled", get: func(s *Spec) **bool { return &s.Switch.PFC.Enabled }, def: defTrue},
	field[float64]{path: "switch.pfc.alpha", get: func(s *Spec) *float64 { return &s.Switch.PFC.Alpha },
		def: constant(0.125), ok: func(_ *Spec, x float64) bool { return x > 0 && x <= 8 }, want: msg("want a fraction of free buffer in (0, 8]")},
	field[units.Bytes]{path: "switch.pfc.hysteresis", get: func(s *Spec) *units.Bytes { return &s.Switch.PFC.Hysteresis },
		def: constant(3 * units.KiB), ok: func(s *Spec, x units.Bytes) bool { return x > 0 && x <= s.Switch.Buffer },
		want: func(s *Spec) string { return "want a size in [1B, switch.buffer " + s.Switch.Buffer.String() + "]" }},
	field[units.Bytes]{path: "switch.pfc.xoff", get: func(s *Spec) *units.Bytes { return &s.Switch.PFC.XOFF }, ok: belowBuffer, want: exceedsBuffer},
	field[units.Bytes]{path: "switch.pfc.headroom", get: func(s *Spec) *units.Bytes { return &s.Switch.PFC.Headroom }, ok: belowBuffer, want: exceedsBuffer},
	field[Duration]{path: "switch.pfc.watchdog.threshold", get: func(s *Spec) *Duration { return &s.Switch.PFC.Watchdog.Threshold },
		ok: within[Duration](0, Duration(time.Minute)), want: msg("want a duration in [0, 1m]")},
	field[*bool]{path: "switch.ecn.enabled", get: func(s *Spec) **bool { return &s.Switch.ECN.Enabled }, def: defTrue},
	field[float64]{path: "switch.ecn.pmax", get: func(s *Spec) *float64 { return &s.Switch.ECN.PMax },
		def: constant(0.2), ok: func(_ *Spec, x float64) bool { return x > 0 && x <= 1 }, want: msg("want a probability in (0, 1]")},
}

// switchChecks relate switch fields to each other.
func (v *validator) switchChecks() error {
	p := &v.s.Switch.PFC
	if p.XOFF != 0 && p.Hysteresis >= p.XOFF {
		return v.fail("switch.pfc.hysteresis", p.Hysteresis.String(), "must be below xoff "+p.XOFF.String())
	}
	wd := &p.Watchdog
	if wd.Threshold == 0 && (wd.Recover || wd.Restore != 0) {
		return v.fail("switch.pfc.watchdog.threshold", "", "required when the watchdog recovers or restores")
	}
	if wd.Threshold != 0 && wd.Restore == 0 {
		wd.Restore = 10 * wd.Threshold
	}
	e := &v.s.Switch.ECN
	if (e.KMin == 0) != (e.KMax == 0) {
		field := "switch.ecn.kmax"
		if e.KMin == 0 {
			field = "switch.ecn.kmin"
		}
		return v.fail(field, "", "give both kmin and kmax, or neither (both then scale with link rate: 100KB/400KB per 25Gbps)")
	}
	if e.KMin > e.KMax {
		return v.fail("switch.ecn.kmin", e.KMin.String(), "must not exceed kmax "+e.KMax.String())
	}
	if e.KMax > v.s.Switch.Buffer {
		return v.fail("switch.ecn.kmax", e.KMax.String(), exceedsBuffer(v.s))
	}
	for i, r := range e.ByRate {
		f := fmt.Sprintf("switch.ecn.by_rate[%d]", i)
		switch {
		case r.Rate < units.Gbps || r.Rate > 1600*units.Gbps:
			return v.fail(f+".rate", r.Rate.String(), "want a link rate in [1Gbps, 1600Gbps]")
		case r.KMin < 0 || r.KMax <= r.KMin || r.KMax > v.s.Switch.Buffer:
			return v.fail(f+".kmax", r.KMax.String(), "want kmin < kmax <= switch.buffer")
		case !(r.PMax > 0 && r.PMax <= 1):
			return v.fail(f+".pmax", fmtFloat(r.PMax), "want a probability in (0, 1]")
		}
		for _, o := range e.ByRate[:i] {
			if o.Rate == r.Rate {
				return v.fail(f+".rate", r.Rate.String(), "listed twice")
			}
		}
	}
	return nil
}

var nicRules = []rule{
	field[units.Bytes]{path: "nic.mtu", get: func(s *Spec) *units.Bytes { return &s.NIC.MTU }, def: constant[units.Bytes](4096),
		ok: within[units.Bytes](256, sim.MaxMTU), want: msg(fmt.Sprintf("want a payload of 256 to %d bytes", sim.MaxMTU))},
	field[units.Bytes]{path: "nic.header", get: func(s *Spec) *units.Bytes { return &s.NIC.Header },
		ok: within[units.Bytes](0, 1024), want: msg("want 0 (RoCEv2 framing) or header bytes in [1, 1024]")},
	field[int]{path: "nic.ack_every", get: func(s *Spec) *int { return &s.NIC.AckEvery }, def: constant(4),
		ok: within(1, 65536), want: msg("want packets per ACK in [1, 65536]")},
	field[Duration]{path: "nic.cnp_interval", get: func(s *Spec) *Duration { return &s.NIC.CNPInterval },
		def: constant(Duration(50 * time.Microsecond)), ok: within[Duration](0, Duration(time.Second)), want: msg("want a duration in [0, 1s]")},
	field[Duration]{path: "nic.nak_interval", get: func(s *Spec) *Duration { return &s.NIC.NAKInterval },
		def: constant(Duration(500 * time.Microsecond)), ok: within[Duration](0, Duration(time.Second)), want: msg("want a duration in [0, 1s]")},
	field[int]{path: "nic.ack_timeout", get: func(s *Spec) *int { return &s.NIC.AckTimeout }, def: constant(14),
		ok:   func(_ *Spec, x int) bool { return x == -1 || (x >= 1 && x <= 31) },
		want: msg("want the exponent t of 4.096us × 2^t in [1, 31], or -1 for infinite")},
	field[*int]{path: "nic.retry_count", get: func(s *Spec) **int { return &s.NIC.RetryCount }, def: func(*Spec) *int { return ptr(7) },
		ok: func(_ *Spec, x *int) bool { return *x >= 0 && *x <= 7 }, want: msg("want retries in [0, 7]")},
	field[int]{path: "nic.send_queue", get: func(s *Spec) *int { return &s.NIC.SendQueue }, def: constant(256),
		ok: within(2, 65536), want: msg("want work requests per QP in [2, 65536]")},
}

func (v *validator) nicChecks() error {
	if err := v.ccParams("nic.dcqcn", "dcqcn", v.s.NIC.DCQCN); err != nil {
		return err
	}
	return v.ccParams("nic.hpcc", "hpcc", v.s.NIC.HPCC)
}

var stopRules = []rule{
	field[Duration]{path: "stop.time", get: func(s *Spec) *Duration { return &s.Stop.Time }, def: constant(Duration(100 * time.Millisecond)),
		ok: within(Duration(1), Duration(time.Hour)), want: msg("want a virtual-time limit in (0, 1h]")},
	field[int64]{path: "stop.max_events", get: func(s *Spec) *int64 { return &s.Stop.MaxEvents },
		ok: func(_ *Spec, x int64) bool { return x >= 0 }, want: msg("want 0 (no cap) or a positive count")},
	field[Duration]{path: "sample.interval", get: func(s *Spec) *Duration { return &s.Sample.Interval }, def: constant(Duration(10 * time.Microsecond)),
		ok: func(_ *Spec, x Duration) bool { return x.D() >= 100*time.Nanosecond }, want: msg("want at least 100ns")},
	field[*bool]{path: "sample.queues", get: func(s *Spec) **bool { return &s.Sample.Queues }, def: defTrue},
	field[*bool]{path: "sample.paths", get: func(s *Spec) **bool { return &s.Sample.Paths }, def: defTrue},
	field[*bool]{path: "sample.cc", get: func(s *Spec) **bool { return &s.Sample.CC }, def: defTrue},
	field[int]{path: "sample.top_queues", get: func(s *Spec) *int { return &s.Sample.TopQueues }, def: constant(4),
		ok: within(0, 64), want: msg("want a whole number in [0, 64]")},
}

func (v *validator) sampleChecks() error {
	st, sa := &v.s.Stop, &v.s.Sample
	if sa.Interval > st.Time {
		return v.fail("sample.interval", sa.Interval.String(), "must not exceed stop.time "+st.Time.String())
	}
	if st.Time.D()/sa.Interval.D() > 10000000 {
		return v.fail("sample.interval", sa.Interval.String(), "too fine: more than 10^7 samples per run; raise it to at least "+(st.Time.D()/10000000).String())
	}
	return nil
}
