package cc

import (
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
)

// timelyStep is one RTT sample and the state expected after it. Rates are
// in Gb/s, rtt_diff in µs.
type timelyStep struct {
	rtt      float64 // µs
	rate     float64
	rttDiff  float64
	streak   int
	comment  string
	skipDiff bool // first sample: only seeds prev_rtt
}

func runTimely(t *testing.T, tm *Timely, steps []timelyStep) {
	t.Helper()
	for i, s := range steps {
		tm.OnAck(Ack{Now: us(int64(100 * (i + 1))), Acked: 64 << 10, RTT: usd(s.rtt)})
		if got := tm.rate / gbps; !near(got, s.rate) {
			t.Errorf("step %d (rtt %vµs, %s): Rate() = %.12f Gb/s, want %.12f", i, s.rtt, s.comment, got, s.rate)
		}
		if got := tm.rttDiff / 1e3; !s.skipDiff && !near(got, s.rttDiff) {
			t.Errorf("step %d (rtt %vµs, %s): rtt_diff = %v µs, want %v", i, s.rtt, s.comment, got, s.rttDiff)
		}
		if tm.negStreak != s.streak {
			t.Errorf("step %d (rtt %vµs, %s): negative-gradient streak = %d, want %d", i, s.rtt, s.comment, tm.negStreak, s.streak)
		}
	}
}

// TestTimelyRegions walks Algorithm 1 of Mittal et al. through its three
// regions with hand-computed values: below T_low (+δ), above T_high
// (×(1 − β(1 − T_high/rtt))), and the gradient region for both signs.
// α = 1/2, β = 0.8, δ = 10 Mb/s, minRTT = 20 µs, T_low 50 µs, T_high 500 µs.
func TestTimelyRegions(t *testing.T) {
	tm, err := NewTimely(TimelyConfig{
		EWMA: 0.5, TLow: usd(50), THigh: usd(500), Beta: 0.8, Delta: 10 * units.Mbps,
		MinRTT: usd(20), InitRate: 5 * units.Gbps, MinRate: 100 * units.Mbps,
	}, PathInfo{LineRate: 10 * units.Gbps, BaseRTT: usd(20)})
	if err != nil {
		t.Fatal(err)
	}
	const (
		r2 = 5 + 0.01                     // below T_low: + δ
		r3 = r2 * (1 - 0.8*(1-500.0/600)) // above T_high
		r4 = r3 + 0.01                    // gradient −2.9375 < 0: + δ (streak 1)
		r5 = r4 * (1 - 0.8*20.625/20)     // gradient 1.03125: × (1 − β·g)
		r6 = r5 * (1 - 0.8*10.3125/20)    // gradient 0.515625
	)
	runTimely(t, tm, []timelyStep{
		{rtt: 30, rate: 5, skipDiff: true, comment: "first sample seeds prev_rtt"},
		{rtt: 40, rate: r2, rttDiff: 0.5 * 10, comment: "rtt < T_low"},
		{rtt: 600, rate: r3, rttDiff: 0.5*5 + 0.5*560, comment: "rtt > T_high"},
		{rtt: 200, rate: r4, rttDiff: 0.5*282.5 + 0.5*-400, streak: 1, comment: "negative gradient"},
		{rtt: 300, rate: r5, rttDiff: 0.5*-58.75 + 0.5*100, comment: "positive gradient"},
		{rtt: 300, rate: r6, rttDiff: 0.5 * 20.625, comment: "positive gradient, flat RTT"},
	})
}

// TestTimelyHAI: after HAIThreshold (5) consecutive negative gradients the
// step becomes N·δ (N = 5), until a non-negative gradient. EWMA α = 1
// makes the gradient (rtt − prev)/minRTT.
func TestTimelyHAI(t *testing.T) {
	tm, err := NewTimely(TimelyConfig{
		EWMA: 1, TLow: usd(50), THigh: usd(500), Beta: 0.8, Delta: 10 * units.Mbps,
		MinRTT: usd(20), InitRate: 5 * units.Gbps,
	}, PathInfo{LineRate: 10 * units.Gbps, BaseRTT: usd(20)})
	if err != nil {
		t.Fatal(err)
	}
	runTimely(t, tm, []timelyStep{
		{rtt: 400, rate: 5, skipDiff: true},
		{rtt: 390, rate: 5.01, rttDiff: -10, streak: 1},
		{rtt: 380, rate: 5.02, rttDiff: -10, streak: 2},
		{rtt: 370, rate: 5.03, rttDiff: -10, streak: 3},
		{rtt: 360, rate: 5.04, rttDiff: -10, streak: 4},
		{rtt: 350, rate: 5.09, rttDiff: -10, streak: 5, comment: "fifth negative gradient: HAI"},
		{rtt: 340, rate: 5.14, rttDiff: -10, streak: 6, comment: "still HAI"},
		{rtt: 360, rate: 5.14 * (1 - 0.8*1), rttDiff: 20, streak: 0, comment: "gradient +1 ends HAI"},
		{rtt: 350, rate: 5.14*0.2 + 0.01, rttDiff: -10, streak: 1, comment: "back to +δ"},
	})
}

// TestTimelyBounds: the rate stays within [MinRate, LineRate]; acks
// without an RTT sample change nothing.
func TestTimelyBounds(t *testing.T) {
	tm, err := NewTimely(TimelyConfig{MinRate: units.Gbps}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tm.Rate(), 100*units.Gbps; got != want {
		t.Errorf("initial Rate() = %v, want the line rate %v", got, want)
	}
	tm.OnAck(Ack{Now: us(1), RTT: usd(10)})
	for i := range 20 {
		tm.OnAck(Ack{Now: us(int64(2 + i)), RTT: time.Second}) // far above T_high
	}
	if got, want := tm.Rate(), units.Gbps; got != want {
		t.Errorf("after 20 huge RTTs: Rate() = %v, want MinRate %v", got, want)
	}
	before := tm.Rate()
	tm.OnAck(Ack{Now: us(100), Acked: 4096}) // no sample
	if got := tm.Rate(); got != before {
		t.Errorf("ack without RTT: Rate() = %v, want unchanged %v", got, before)
	}
	for i := range 100000 {
		tm.OnAck(Ack{Now: us(int64(200 + i)), RTT: usd(5)}) // below T_low
	}
	if got, want := tm.Rate(), 100*units.Gbps; got != want {
		t.Errorf("after many low RTTs: Rate() = %v, want the line rate %v", got, want)
	}
	if got := tm.Window(); got != units.MaxBytes {
		t.Errorf("Window() = %v, want units.MaxBytes (rate-based)", got)
	}
}
