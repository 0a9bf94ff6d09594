package cc

import (
	"math"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// swiftPath: 100 Gb/s, 10 µs base RTT, 4 KiB MTU, two switch hops.
var swiftPath = PathInfo{LineRate: 100 * units.Gbps, BaseRTT: usd(10), MTU: 4096, Hops: 2}

// newTestSwift returns a Swift with target 24 µs + 2 hops × 1 µs = 26 µs,
// no flow scaling, ai 1, β 0.8, max_mdf 0.5 and a 10-MTU initial window.
func newTestSwift(t *testing.T, mod func(*SwiftConfig)) *Swift {
	t.Helper()
	c := SwiftConfig{
		AI: 1, Beta: 0.8, MaxMDF: 0.5,
		BaseTarget: usd(24), HopScale: usd(1), FSRange: -1,
		MinWindow: 41, MaxWindow: units.MiB, InitWindow: 10 * 4096,
	}
	if mod != nil {
		mod(&c)
	}
	s, err := NewSwift(c, swiftPath)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSwiftTable checks Kumar et al. Algorithm 1 with hand-computed
// windows (in MTUs): additive increase ai/cwnd per acked MTU below the
// target; multiplicative decrease 1 − β(delay − target)/delay above it,
// bounded by 1 − max_mdf and applied at most once per RTT.
func TestSwiftTable(t *testing.T) {
	s := newTestSwift(t, nil)
	if got, want := s.Target(), usd(26); got != want {
		t.Fatalf("Target() = %v, want %v (base 24µs + 2 hops × 1µs)", got, want)
	}
	const (
		c1 = 10 + 1.0/10                 // AI, 1 MTU acked
		c2 = c1 + 4/c1                   // AI, 4 MTUs acked
		c3 = c2 * (1 - 0.8*(36-26)/36.0) // MD: delay 36 µs > 26
		c6 = c3 * (1 - 0.8*(36-26)/36.0) // MD again, one RTT (36 µs) later
		c8 = c6 * 0.5                    // 1 − 0.8·234/260 = 0.28 < 1 − max_mdf: bounded
		c9 = c8 + 1/c8                   // AI again
	)
	steps := []struct {
		at    vtime.Time
		rtt   float64 // µs
		acked units.Bytes
		cwnd  float64 // MTUs
		note  string
	}{
		{us(100), 20, 4096, c1, "below target: += ai/cwnd"},
		{us(110), 20, 4 * 4096, c2, "4 MTUs acked"},
		{us(120), 36, 4096, c3, "above target: decrease"},
		{us(130), 36, 4096, c3, "10 µs after the decrease < rtt: held"},
		{us(155), 36, 4096, c3, "35 µs < rtt 36 µs: held"},
		{us(156), 36, 4096, c6, "one rtt later: decrease again"},
		{us(200), 260, 4096, c6, "44 µs < rtt 260 µs: held"},
		{us(500), 260, 4096, c8, "decrease bounded by max_mdf"},
		{us(510), 20, 4096, c9, "below target again"},
	}
	for i, st := range steps {
		s.OnAck(Ack{Now: st.at, Acked: st.acked, RTT: usd(st.rtt)})
		if !near(s.CWND(), st.cwnd) {
			t.Errorf("step %d (%s): cwnd = %.12f MTU, want %.12f", i, st.note, s.CWND(), st.cwnd)
		}
		if got, want := s.Window(), units.Bytes(st.cwnd*4096); got < want-1 || got > want+1 {
			t.Errorf("step %d (%s): Window() = %d, want %d", i, st.note, got, want)
		}
		if got := s.Rate(); got != units.Unlimited {
			t.Errorf("step %d (%s): Rate() = %v, want unlimited (cwnd ≥ 1 MTU)", i, st.note, got)
		}
	}
}

// TestSwiftPacing: below one MTU Swift paces at cwnd·MTU/rtt, the window
// stays one MTU, and the cwnd < 1 increase is ai per acked MTU.
func TestSwiftPacing(t *testing.T) {
	s := newTestSwift(t, func(c *SwiftConfig) { c.InitWindow = 2048 })
	// cwnd 0.5 MTU, rtt = BaseRTT 10 µs: 2048 B × 8 / 10 µs = 1.6384 Gb/s.
	if got, want := s.Rate(), units.BitRate(1_638_400_000); got != want {
		t.Errorf("cwnd 0.5: Rate() = %v, want %v", got, want)
	}
	if got, want := s.Window(), units.Bytes(4096); got != want {
		t.Errorf("cwnd 0.5: Window() = %v, want one MTU %v", got, want)
	}
	s.OnAck(Ack{Now: us(100), Acked: 2048, RTT: usd(30)}) // above target 26: ×(1 − 0.8·4/30)
	want := 0.5 * (1 - 0.8*4/30.0)
	if !near(s.CWND(), want) {
		t.Fatalf("cwnd = %v, want %v", s.CWND(), want)
	}
	if got, want := s.Rate(), rateOf(want*4096*8/30e-6); got != want {
		t.Errorf("Rate() = %v, want cwnd·MTU/rtt = %v", got, want)
	}
	s.OnAck(Ack{Now: us(200), Acked: 4096, RTT: usd(20)}) // cwnd < 1: += ai · 1
	if got, want := s.CWND(), want+1; !near(got, want) {
		t.Errorf("cwnd < 1 increase: cwnd = %v, want %v", got, want)
	}
	if got := s.Rate(); got != units.Unlimited {
		t.Errorf("cwnd ≥ 1: Rate() = %v, want unlimited", got)
	}
}

// TestSwiftRetransmits: timeouts shrink by 1 − max_mdf at most once per
// RTT and reset to the minimum after RetxResetThreshold in a row; a loss
// (fast recovery) shrinks once per RTT and resets the count; an ack resets
// the count.
func TestSwiftRetransmits(t *testing.T) {
	s := newTestSwift(t, func(c *SwiftConfig) { c.RetxResetThreshold = 3 })
	// rtt = BaseRTT = 10 µs until the first sample.
	s.OnTimeout(us(100))
	if got, want := s.CWND(), 5.0; !near(got, want) {
		t.Errorf("timeout 1: cwnd = %v, want %v", got, want)
	}
	s.OnTimeout(us(105)) // within an RTT: no decrease
	if got, want := s.CWND(), 5.0; !near(got, want) {
		t.Errorf("timeout 2 within an RTT: cwnd = %v, want %v", got, want)
	}
	s.OnAck(Ack{Now: us(106), Acked: 4096}) // no RTT sample, but resets the count
	s.OnTimeout(us(120))
	if got, want := s.CWND(), 2.5; !near(got, want) {
		t.Errorf("timeout after ack: cwnd = %v, want %v", got, want)
	}
	s.OnTimeout(us(121))
	s.OnTimeout(us(122)) // third in a row: reset to MinWindow
	if got, want := s.CWND(), 41.0/4096; !near(got, want) {
		t.Errorf("timeout 3 in a row: cwnd = %v, want MinWindow %v", got, want)
	}
	s2 := newTestSwift(t, nil)
	s2.OnLoss(Loss{Now: us(100), Lost: 4096})
	s2.OnLoss(Loss{Now: us(105), Lost: 4096})
	if got, want := s2.CWND(), 5.0; !near(got, want) {
		t.Errorf("two losses within an RTT: cwnd = %v, want %v", got, want)
	}
	s2.OnLoss(Loss{Now: us(110), Lost: 4096})
	if got, want := s2.CWND(), 2.5; !near(got, want) {
		t.Errorf("loss one RTT later: cwnd = %v, want %v", got, want)
	}
}

// TestSwiftTarget checks the target formula: base + hops·h + flow scaling
// α/√cwnd + β clamped to [0, fs_range], α = fs_range/(1/√fs_min −
// 1/√fs_max), β = −α/√fs_max (paper §3.3).
func TestSwiftTarget(t *testing.T) {
	const (
		base, h, rng = 24e3, 1e3, 120e3 // ns
		fsMin, fsMax = 0.1, 100.0
	)
	alpha := rng / (1/math.Sqrt(fsMin) - 1/math.Sqrt(fsMax))
	beta := -alpha / math.Sqrt(fsMax)
	for _, cwnd := range []float64{0.01, 0.1, 0.5, 1, 4, 25, 100, 200} {
		s := newTestSwift(t, func(c *SwiftConfig) {
			c.FSRange, c.FSMinCwnd, c.FSMaxCwnd = 120*time.Microsecond, fsMin, fsMax
			c.MinWindow = 40
			c.InitWindow = units.Bytes(cwnd * 4096)
		})
		fs := max(0, min(alpha/math.Sqrt(s.CWND())+beta, rng))
		want := time.Duration(base + 2*h + fs)
		if got := s.Target(); got < want-1 || got > want+1 {
			t.Errorf("cwnd %v MTU: Target() = %v, want %v", cwnd, got, want)
		}
		switch {
		case cwnd <= fsMin && s.Target() != usd(24+2+120):
			t.Errorf("cwnd %v ≤ fs_min: Target() = %v, want the full range %v", cwnd, s.Target(), usd(146))
		case cwnd >= fsMax && s.Target() != usd(26):
			t.Errorf("cwnd %v ≥ fs_max: Target() = %v, want no flow scaling %v", cwnd, s.Target(), usd(26))
		}
	}
	// Flow scaling: a smaller window tolerates more delay.
	small := newTestSwift(t, func(c *SwiftConfig) { c.FSRange = 0; c.InitWindow = 4096 })
	large := newTestSwift(t, func(c *SwiftConfig) { c.FSRange = 0; c.InitWindow = 64 * 4096 })
	if small.Target() <= large.Target() {
		t.Errorf("flow scaling: Target(1 MTU) = %v, want > Target(64 MTU) = %v", small.Target(), large.Target())
	}
}

// TestSwiftBounds: cwnd stays within [MinWindow, MaxWindow].
func TestSwiftBounds(t *testing.T) {
	s := newTestSwift(t, nil)
	for i := range 1000 {
		s.OnAck(Ack{Now: us(int64(i)), Acked: units.MiB, RTT: usd(11)})
	}
	if got, want := s.Window(), units.MiB; got != want {
		t.Errorf("after many increases: Window() = %v, want MaxWindow %v", got, want)
	}
	for i := range 1000 {
		s.OnAck(Ack{Now: us(int64(2000 + 1000*i)), Acked: 4096, RTT: usd(900)})
	}
	if got, want := s.CWND(), 41.0/4096; !near(got, want) {
		t.Errorf("after many decreases: cwnd = %v, want MinWindow %v", got, want)
	}
}
