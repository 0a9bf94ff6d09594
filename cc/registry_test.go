package cc

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
)

func TestNames(t *testing.T) {
	want := []string{"dcqcn", "fixed", "hpcc", "swift", "timely"}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
}

func TestNewEach(t *testing.T) {
	for _, name := range Names() {
		a, err := New(name, nil, path100G)
		if err != nil {
			t.Errorf("New(%q, nil) = %v", name, err)
			continue
		}
		if got := a.Name(); got != name {
			t.Errorf("New(%q).Name() = %q", name, got)
		}
		if a.Window() <= 0 || a.Rate() <= 0 {
			t.Errorf("New(%q): Window() = %v, Rate() = %v, want both > 0", name, a.Window(), a.Rate())
		}
		if _, ok := a.(Stater); !ok {
			t.Errorf("New(%q) does not implement Stater", name)
		}
	}
}

func TestNewUnknown(t *testing.T) {
	_, err := New("cubic", nil, path100G)
	if err == nil {
		t.Fatal(`New("cubic") = nil error, want unknown algorithm`)
	}
	for _, want := range append([]string{`"cubic"`}, Names()...) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New(\"cubic\") error %q does not mention %s", err, want)
		}
	}
}

func TestNewBadPath(t *testing.T) {
	for _, name := range Names() {
		if _, err := New(name, nil, PathInfo{LineRate: 0, BaseRTT: usd(10)}); err == nil || !strings.Contains(err.Error(), "LineRate") {
			t.Errorf("New(%q) with LineRate 0: error %v, want one naming LineRate", name, err)
		}
	}
}

func TestRegisterPanics(t *testing.T) {
	f := func(Params, PathInfo) (Algorithm, error) { return nil, nil }
	mustPanic := func(what, want string, fn func()) {
		t.Helper()
		defer func() {
			r := recover()
			if r == nil {
				t.Errorf("%s: no panic", what)
				return
			}
			if msg, _ := r.(string); !strings.Contains(msg, want) {
				t.Errorf("%s: panic %q, want it to mention %q", what, r, want)
			}
		}()
		fn()
	}
	mustPanic("empty name", "empty name", func() { Register("", f) })
	mustPanic("nil factory", "nil factory", func() { Register("x", nil) })
	mustPanic("duplicate", "twice", func() { Register("dcqcn", f) })
	Names() // seals the registry
	mustPanic("after init", "after init", func() { Register("late-algorithm", f) })
}

// TestParamsDecode checks that parameters of every kind reach the config.
func TestParamsDecode(t *testing.T) {
	a, err := New("dcqcn", Params{
		"g": "0.0625", "alpha_timer": "20us", "ai": "40Mbps", "hai": "0",
		"byte_counter": "300000", "rate_decrease_interval": "0", "window": "1MiB", "f": "3",
	}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	got := a.(*DCQCN).Config()
	want := path100G
	_ = want
	checks := []struct {
		name      string
		got, want any
	}{
		{"G", got.G, 0.0625},
		{"AlphaTimer", got.AlphaTimer, 20 * time.Microsecond},
		{"AI", got.AI, 40 * units.Mbps},
		{"HAI", got.HAI, units.BitRate(-1)},
		{"ByteCounter", got.ByteCounter, units.Bytes(300000)},
		{"RateDecreaseInterval", got.RateDecreaseInterval, time.Duration(-1)},
		{"Window", got.Window, units.MiB},
		{"F", got.F, 3},
		{"RateIncreaseTimer (default)", got.RateIncreaseTimer, 300 * time.Microsecond},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("dcqcn params: %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	f, err := New("fixed", Params{"window": "unlimited", "rate": "unlimited"}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	if f.Window() != units.MaxBytes || f.Rate() != units.Unlimited {
		t.Errorf("fixed unlimited: Window() = %v, Rate() = %v, want unlimited both", f.Window(), f.Rate())
	}
}

// TestParamsErrors: unknown names and bad values are errors naming the
// algorithm, the parameter, the value and the valid range.
func TestParamsErrors(t *testing.T) {
	tests := []struct {
		alg  string
		p    Params
		want []string
	}{
		{"dcqcn", Params{"gain": "1"}, []string{"dcqcn", `unknown parameter "gain"`, "g, hai"}},
		{"dcqcn", Params{"g": "abc"}, []string{"dcqcn", "parameter g", `"abc"`, "0 < g < 1"}},
		{"dcqcn", Params{"g": "1.5"}, []string{"dcqcn", "parameter g", `"1.5"`, "0 < g < 1"}},
		{"dcqcn", Params{"g": "0"}, []string{"parameter g", `"0"`, "0 < g < 1"}},
		{"dcqcn", Params{"alpha_timer": "50"}, []string{"parameter alpha_timer", `"50"`, "duration", "0 turns it off"}},
		{"dcqcn", Params{"alpha_timer": "-5us"}, []string{"parameter alpha_timer", `"-5us"`}},
		{"dcqcn", Params{"ai": "200Gbps"}, []string{"parameter ai", `"200Gbps"`, "100Gbps"}},
		{"dcqcn", Params{"f": "2.5"}, []string{"parameter f", `"2.5"`, "integer", "1 <= f <= 1000"}},
		{"dcqcn", Params{"rate_increase_timer": "0", "byte_counter": "0"}, []string{"RateIncreaseTimer", "ByteCounter", "never recover"}},
		{"timely", Params{"t_high": "10us"}, []string{"timely", "THigh", "t_high", "TLow"}},
		{"timely", Params{"ewma": "1.01"}, []string{"timely", "parameter ewma", `"1.01"`, "0 < ewma <= 1"}},
		{"timely", Params{"min_rate": "1Tbps"}, []string{"parameter min_rate", `"1Tbps"`}},
		{"swift", Params{"max_mdf": "1"}, []string{"swift", "parameter max_mdf", "0 < max_mdf < 1"}},
		{"swift", Params{"base_target": "5us"}, []string{"parameter base_target", `"5us"`, "10µs < base_target"}},
		{"swift", Params{"fs_min_cwnd": "200"}, []string{"FSMinCwnd", "fs_min_cwnd", "FSMaxCwnd"}},
		{"swift", Params{"min_window": "2MiB"}, []string{"MinWindow", "min_window", "MaxWindow"}},
		{"swift", Params{"init_window": "4MiB"}, []string{"InitWindow", "init_window"}},
		{"hpcc", Params{"eta": "x"}, []string{"hpcc", "parameter eta", `"x"`, "0 < eta <= 1"}},
		{"hpcc", Params{"wai": "1GiB"}, []string{"WAI", "wai", "MaxWindow"}},
		{"hpcc", Params{"max_stage": "-1"}, []string{"parameter max_stage", `"-1"`}},
		{"fixed", Params{"rate": "fast"}, []string{"fixed", "parameter rate", `"fast"`, "rate >= 1bps"}},
		{"fixed", Params{"window": "0"}, []string{"parameter window", `"0"`, "window >= 1 bytes"}},
	}
	for _, tt := range tests {
		_, err := New(tt.alg, tt.p, path100G)
		if err == nil {
			t.Errorf("New(%q, %v) = nil error", tt.alg, tt.p)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("New(%q, %v) error %q does not mention %q", tt.alg, tt.p, err, w)
			}
		}
	}
}

// TestValidateConfigs: bad Go configs are errors naming the field, its
// parameter, the value and the range.
func TestValidateConfigs(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{"dcqcn G", DCQCNConfig{G: 1.5}.Validate(path100G), []string{"dcqcn", "G = 1.5", "parameter g", "0 < G < 1"}},
		{"dcqcn F", DCQCNConfig{F: -2}.Validate(path100G), []string{"F = -2", "1 <= F <= 1000"}},
		{"dcqcn InitAlpha", DCQCNConfig{InitAlpha: 2}.Validate(path100G), []string{"InitAlpha = 2", "0 <= InitAlpha <= 1"}},
		{"dcqcn AI", DCQCNConfig{AI: 1}.Validate(path100G), []string{"AI = 1bps", "100Kbps <= AI <= 100Gbps"}},
		{"dcqcn MinRate", DCQCNConfig{MinRate: 200 * units.Gbps}.Validate(path100G), []string{"MinRate = 200Gbps", "parameter min_rate"}},
		{"dcqcn timer", DCQCNConfig{RateIncreaseTimer: 2 * time.Second}.Validate(path100G), []string{"RateIncreaseTimer = 2s", "0s <= RateIncreaseTimer <= 1s"}},
		{"dcqcn window", DCQCNConfig{Window: -1}.Validate(path100G), []string{"Window = -1 bytes", "parameter window"}},
		{"timely EWMA", TimelyConfig{EWMA: -0.5}.Validate(path100G), []string{"timely", "EWMA = -0.5", "0 < EWMA <= 1"}},
		{"timely THigh", TimelyConfig{TLow: usd(100), THigh: usd(90)}.Validate(path100G), []string{"THigh = 90µs", "TLow (100µs)"}},
		{"timely InitRate", TimelyConfig{MinRate: units.Gbps, InitRate: units.Mbps}.Validate(path100G), []string{"InitRate = 1Mbps", "MinRate (1Gbps)"}},
		{"timely HAIFactor", TimelyConfig{HAIFactor: 5000}.Validate(path100G), []string{"HAIFactor = 5000", "hai_factor"}},
		{"swift Beta", SwiftConfig{Beta: 2}.Validate(path100G), []string{"swift", "Beta = 2", "0 < Beta <= 1"}},
		{"swift BaseTarget", SwiftConfig{BaseTarget: usd(5)}.Validate(path100G), []string{"BaseTarget = 5µs", "10µs < BaseTarget"}},
		{"swift windows", SwiftConfig{MinWindow: 10000, MaxWindow: 5000}.Validate(path100G), []string{"MinWindow = 10000 bytes", "MaxWindow (5000 bytes)"}},
		{"swift fs", SwiftConfig{FSMinCwnd: 5, FSMaxCwnd: 5}.Validate(path100G), []string{"FSMinCwnd = 5", "FSMaxCwnd (5)"}},
		{"hpcc Eta", HPCCConfig{Eta: 1.2}.Validate(path100G), []string{"hpcc", "Eta = 1.2", "0 < Eta <= 1"}},
		{"hpcc T", HPCCConfig{T: -time.Second}.Validate(path100G), []string{"T = -1s", "parameter t"}},
		{"hpcc MaxStage", HPCCConfig{MaxStage: 5000}.Validate(path100G), []string{"MaxStage = 5000", "0 <= MaxStage <= 1000"}},
		{"fixed Rate", FixedConfig{Rate: -5}.Validate(path100G), []string{"fixed", "Rate = -5bps", "Rate >= 1bps"}},
		{"path LineRate", PathInfo{BaseRTT: usd(10)}.Validate(), []string{"PathInfo.LineRate = 0bps", "finite rate > 0"}},
		{"path unlimited", PathInfo{LineRate: units.Unlimited, BaseRTT: usd(10)}.Validate(), []string{"PathInfo.LineRate = unlimited"}},
		{"path BaseRTT", PathInfo{LineRate: units.Gbps}.Validate(), []string{"PathInfo.BaseRTT = 0s", "0s < BaseRTT <= 10s"}},
		{"path MTU", PathInfo{LineRate: units.Gbps, BaseRTT: 1, MTU: -1}.Validate(), []string{"PathInfo.MTU = -1"}},
		{"path Hops", PathInfo{LineRate: units.Gbps, BaseRTT: 1, Hops: 99}.Validate(), []string{"PathInfo.Hops = 99", "64"}},
	}
	for _, tt := range tests {
		if tt.err == nil {
			t.Errorf("%s: Validate() = nil, want an error", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(tt.err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tt.name, tt.err, w)
			}
		}
	}
	// The constructors refuse what Validate refuses.
	if _, err := NewDCQCN(DCQCNConfig{G: 2}, path100G); err == nil {
		t.Error("NewDCQCN(G 2) = nil error")
	}
	if _, err := NewTimely(TimelyConfig{Beta: 2}, path100G); err == nil {
		t.Error("NewTimely(Beta 2) = nil error")
	}
	if _, err := NewSwift(SwiftConfig{AI: -1}, path100G); err == nil {
		t.Error("NewSwift(AI -1) = nil error")
	}
	if _, err := NewHPCC(HPCCConfig{Eta: 2}, path100G); err == nil {
		t.Error("NewHPCC(Eta 2) = nil error")
	}
	if _, err := NewFixed(FixedConfig{Window: -1}, path100G); err == nil {
		t.Error("NewFixed(Window -1) = nil error")
	}
}

// TestSpecsCoverConfigs: every config field has exactly one spec (so it can
// be validated and set by parameter), and parameter names are unique.
func TestSpecsCoverConfigs(t *testing.T) {
	p, _ := path100G.withDefaults()
	var (
		d DCQCNConfig
		m TimelyConfig
		s SwiftConfig
		h HPCCConfig
		f FixedConfig
	)
	for _, c := range []struct {
		cfg   any
		specs []spec
	}{
		{d, d.specs(p)}, {m, m.specs(p)}, {s, s.specs(p)}, {h, h.specs(p)}, {f, f.specs(p)},
	} {
		typ := reflect.TypeOf(c.cfg)
		var fields, specFields, params []string
		for i := range typ.NumField() {
			fields = append(fields, typ.Field(i).Name)
		}
		for _, sp := range c.specs {
			specFields = append(specFields, sp.field)
			params = append(params, sp.param)
		}
		slices.Sort(fields)
		slices.Sort(specFields)
		if !slices.Equal(fields, specFields) {
			t.Errorf("%s: fields %v, specs %v", typ.Name(), fields, specFields)
		}
		slices.Sort(params)
		if len(slices.Compact(params)) != len(c.specs) {
			t.Errorf("%s: duplicate parameter names in %v", typ.Name(), params)
		}
	}
}

// must returns v and panics on err (the paths here are valid).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestWithDefaultsRefusesBadPath: WithDefaults reports the path's error
// instead of defaulting against a zero line rate.
func TestWithDefaultsRefusesBadPath(t *testing.T) {
	bad := PathInfo{BaseRTT: usd(10)} // no line rate
	for name, f := range map[string]func() error{
		"dcqcn":  func() error { _, err := DCQCNConfig{}.WithDefaults(bad); return err },
		"timely": func() error { _, err := TimelyConfig{}.WithDefaults(bad); return err },
		"swift":  func() error { _, err := SwiftConfig{}.WithDefaults(bad); return err },
		"hpcc":   func() error { _, err := HPCCConfig{}.WithDefaults(bad); return err },
		"fixed":  func() error { _, err := FixedConfig{}.WithDefaults(bad); return err },
	} {
		if err := f(); err == nil || !strings.Contains(err.Error(), "LineRate") {
			t.Errorf("%s: WithDefaults(no line rate) = %v, want an error naming LineRate", name, err)
		}
	}
}

// TestDefaults pins the documented defaults on a 100 Gb/s, 10 µs path.
func TestDefaults(t *testing.T) {
	d := must(DCQCNConfig{}.WithDefaults(path100G))
	wd := DCQCNConfig{
		G: 5.0 / 1024, InitAlpha: 1023.0 / 1024, AlphaUpdate: DCQCNAlphaPeriodic, AlphaTimer: usd(1),
		Decrease: DCQCNDecreaseImmediate, RateDecreaseInterval: usd(4), Clamp: DCQCNClampAfterTimer,
		Increase: DCQCNIncreaseQCN, RateIncreaseTimer: usd(300), ByteCounter: 32767 * 64, F: 1,
		AI: 5 * units.Mbps, HAI: 50 * units.Mbps, MinRate: units.Mbps, Window: units.MaxBytes,
	}
	if d != wd {
		t.Errorf("DCQCN defaults = %+v, want %+v (ConnectX firmware)", d, wd)
	}
	if got := must((DCQCNConfig{}).WithDefaults(PathInfo{LineRate: 25 * units.Gbps, BaseRTT: 1})); got.AI != 5*units.Mbps || got.HAI != 50*units.Mbps {
		t.Errorf("DCQCN at 25G: AI, HAI = %v, %v, want 5Mbps, 50Mbps (absolute, as the firmware's)", got.AI, got.HAI)
	}
	m := must(TimelyConfig{}.WithDefaults(path100G))
	wm := TimelyConfig{
		EWMA: 0.875, TLow: usd(50), THigh: usd(500), Beta: 0.8, Delta: 100 * units.Mbps,
		HAIThreshold: 5, HAIFactor: 5, MinRTT: usd(10), MinRate: 100 * units.Mbps,
		InitRate: 100 * units.Gbps, Window: units.MaxBytes,
	}
	if m != wm {
		t.Errorf("TIMELY defaults = %+v, want %+v", m, wm)
	}
	s := must(SwiftConfig{}.WithDefaults(path100G))
	ws := SwiftConfig{
		AI: 1, Beta: 0.8, MaxMDF: 0.5, BaseTarget: usd(50), HopScale: usd(1), FSRange: usd(250),
		FSMinCwnd: 0.1, FSMaxCwnd: 100, MinWindow: 40, MaxWindow: units.MiB, InitWindow: 125000,
		RetxResetThreshold: 5,
	}
	if s != ws {
		t.Errorf("Swift defaults = %+v, want %+v", s, ws)
	}
	if got := must((SwiftConfig{}).WithDefaults(PathInfo{LineRate: units.Gbps, BaseRTT: usd(40)})).BaseTarget; got != usd(80) {
		t.Errorf("Swift BaseTarget on a 40 µs path = %v, want 80µs (2 × BaseRTT)", got)
	}
	h := must(HPCCConfig{}.WithDefaults(path100G))
	wh := HPCCConfig{Eta: 0.95, MaxStage: 5, T: usd(10), WAI: 50, AI: 40 * units.Mbps, MinWindow: 4096, MinRate: 100 * units.Mbps, MaxWindow: 125000}
	if h != wh {
		t.Errorf("HPCC defaults = %+v, want %+v", h, wh)
	}
	f := must(FixedConfig{}.WithDefaults(path100G))
	if wf := (FixedConfig{Window: 125000, Rate: 100 * units.Gbps}); f != wf {
		t.Errorf("Fixed defaults = %+v, want %+v", f, wf)
	}
}

// TestFixed: constant window and rate whatever happens.
func TestFixed(t *testing.T) {
	x, err := NewFixed(FixedConfig{Window: 64 * units.KiB, Rate: 40 * units.Gbps}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	x.OnSend(Sent{Now: us(1), Bytes: units.MiB})
	x.OnAck(Ack{Now: us(2), Acked: units.MiB, RTT: time.Second})
	x.OnCNP(CNP{Now: us(3), Count: 100})
	x.OnLoss(Loss{Now: us(4), Lost: units.MiB})
	x.OnTimeout(us(5))
	x.OnTimer(us(6))
	if x.Window() != 64*units.KiB || x.Rate() != 40*units.Gbps || x.Deadline() != 0 {
		t.Errorf("Fixed: Window, Rate, Deadline = %v, %v, %v, want 64KiB, 40Gbps, 0", x.Window(), x.Rate(), x.Deadline())
	}
}
