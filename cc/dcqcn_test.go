package cc

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// dcqcnStep is one row of a literal-time DCQCN table: an event at an
// instant and the state expected after it. Rates are in Gb/s.
type dcqcnStep struct {
	at     vtime.Time
	ev     string // "cnp", "send", "timer", "ack"
	n      int64  // CNP count or bytes sent
	rc, rt float64
	alpha  float64
	dl     vtime.Time // want Deadline
}

func runDCQCN(t *testing.T, d *DCQCN, steps []dcqcnStep) {
	t.Helper()
	for i, s := range steps {
		switch s.ev {
		case "cnp":
			d.OnCNP(CNP{Now: s.at, Count: int(s.n)})
		case "send":
			d.OnSend(Sent{Now: s.at, Bytes: units.Bytes(s.n)})
		case "timer":
			d.OnTimer(s.at)
		case "ack":
			d.OnAck(Ack{Now: s.at, Acked: 4096, RTT: 10 * time.Microsecond})
		default:
			t.Fatalf("step %d: unknown event %q", i, s.ev)
		}
		if got := d.rc / gbps; !near(got, s.rc) {
			t.Errorf("step %d (%s at %v): Rate() = %.9f Gb/s, want %.9f", i, s.ev, s.at, got, s.rc)
		}
		if got := d.rt / gbps; !near(got, s.rt) {
			t.Errorf("step %d (%s at %v): Rt = %.9f Gb/s, want %.9f", i, s.ev, s.at, got, s.rt)
		}
		if got := d.Alpha(); !near(got, s.alpha) {
			t.Errorf("step %d (%s at %v): Alpha() = %.12g, want %.12g", i, s.ev, s.at, got, s.alpha)
		}
		if got := d.Deadline(); got != s.dl {
			t.Errorf("step %d (%s at %v): Deadline() = %v, want %v", i, s.ev, s.at, got, s.dl)
		}
	}
}

// TestDCQCNTable walks the paper's reaction point (per-CNP α, Rt ← Rc on
// every cut, QCN stages, immediate cuts) through decrease, the
// rate-decrease interval, alpha decay, fast recovery, additive and hyper
// increase (timer and byte counter), a late timer and recovery to line
// rate. Every expected value is computed by hand from Zhu et al. §3.1:
// Eq. 1 (Rt=Rc, Rc=Rc(1−α/2), α=(1−g)α+g), Eq. 2 (α=(1−g)α), fast
// recovery Rc=(Rt+Rc)/2, additive Rt+=AI, hyper Rt+=i·HAI.
func TestDCQCNTable(t *testing.T) {
	d, err := NewDCQCN(DCQCNConfig{
		G: 0.5, InitAlpha: 1, AlphaUpdate: DCQCNAlphaPerCNP, Clamp: DCQCNClampAlways,
		AlphaTimer: usd(50), RateDecreaseInterval: usd(50), RateIncreaseTimer: usd(55),
		ByteCounter: units.MB, F: 2,
		AI: units.Gbps, HAI: 10 * units.Gbps, MinRate: units.Gbps,
	}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Deadline(); got != 0 {
		t.Fatalf("fresh DCQCN: Deadline() = %v, want 0 (no timers at line rate)", got)
	}
	// The second CNP burst at t300 and the catch-up at t500, by hand.
	const (
		rt300 = 65.0859375
		c0    = rt300 * (1 - 0.03125/2) // Eq. 1 with α = 1/32
		c1    = (rt300 + c0) / 2        // fast recovery, T = 1
		c2    = (rt300 + c1) / 2        // fast recovery, T = 2
		rt520 = rt300 + 1               // additive, T = 3 > F
		c3    = (rt520 + c2) / 2
	)
	runDCQCN(t, d, []dcqcnStep{
		// First CNP: cut with α = 1, α stays 1; increase timer t65 (the
		// alpha timer, t60, is never a deadline: it only changes α).
		{at: us(10), ev: "cnp", n: 1, rc: 50, rt: 100, alpha: 1, dl: us(65)},
		// Within the 50 µs decrease interval: α only; the decrease is deferred to t60.
		{at: us(20), ev: "cnp", n: 1, rc: 50, rt: 100, alpha: 1, dl: us(60)},
		// Deferred decrease at t60: Rt=50, Rc=25; increase timer restarts (t115).
		{at: us(60), ev: "timer", rc: 25, rt: 50, alpha: 1, dl: us(115)},
		// No CNP for 50 µs since t20: α = (1−g)α at t70.
		{at: us(70), ev: "timer", rc: 25, rt: 50, alpha: 0.5, dl: us(115)},
		// Timer T=1 ≤ F: fast recovery.
		{at: us(115), ev: "timer", rc: 37.5, rt: 50, alpha: 0.5, dl: us(170)},
		{at: us(120), ev: "timer", rc: 37.5, rt: 50, alpha: 0.25, dl: us(170)},
		// Both timers due: α decays, T=2 fast recovery.
		{at: us(170), ev: "timer", rc: 43.75, rt: 50, alpha: 0.125, dl: us(225)},
		// At t225 the alpha tick of t220 runs, then T=3 > F with BC=0: additive.
		{at: us(225), ev: "timer", rc: 47.375, rt: 51, alpha: 0.0625, dl: us(280)},
		// 3 MB = three byte-counter cycles: BC=1,2 additive; BC=3 with T=3: hyper, i=1.
		{at: us(230), ev: "send", n: 3_000_000, rc: 57.171875, rt: 63, alpha: 0.0625, dl: us(280)},
		// Alpha at t270; timer T=4, BC=3: hyper, i = min(4,3) − F = 1.
		{at: us(280), ev: "timer", rc: 65.0859375, rt: 73, alpha: 0.03125, dl: us(335)},
		// A CNP 240 µs after the last decrease cuts at once and resets the stages.
		{at: us(300), ev: "cnp", n: 1, rc: c0, rt: rt300, alpha: 0.5*0.03125 + 0.5, dl: us(355)},
		// Late timer at t500: alpha ticks t350..t500 (4), increase ticks t355, t410, t465.
		{at: us(500), ev: "timer", rc: c3, rt: rt520, alpha: (0.5*0.03125 + 0.5) / 16, dl: us(520)},
	})

	// A terabyte of sends recovers the line rate (hyper increase saturates
	// at the line rate); the increase timer stops and nothing is pending.
	d.OnSend(Sent{Now: us(510), Bytes: units.TiB})
	if got, want := d.Rate(), 100*units.Gbps; got != want {
		t.Errorf("after recovery: Rate() = %v, want %v", got, want)
	}
	if got, want := d.TargetRate(), 100*units.Gbps; got != want {
		t.Errorf("after recovery: TargetRate() = %v, want %v", got, want)
	}
	if got := d.Deadline(); got != 0 {
		t.Errorf("after recovery: Deadline() = %v, want 0", got)
	}
	// α kept decaying every 50 µs since t500 (next tick t550), caught up
	// exactly at the next event: ticks t550..t10000 are 190.
	d.OnAck(Ack{Now: us(10000)})
	if got, want := d.Alpha(), (0.5*0.03125+0.5)/16*math.Pow(0.5, 190); !near(got, want) {
		t.Errorf("lazy alpha decay: Alpha() = %g, want %g", got, want)
	}
}

// TestDCQCNCNPsPaper checks Rc, Rt and α after k back-to-back CNPs with no
// decrease interval against Eq. 1 iterated by hand, with the dcqcn_paper
// gain g = 1/256 and α0 = 1/2.
func TestDCQCNCNPsPaper(t *testing.T) {
	const g = 1.0 / 256
	// Hand iteration of Eq. 1 from Rc = 100, α = 1/2 (Gb/s).
	const (
		a0 = 0.5
		r1 = 100 * (1 - a0/2) // 75
		a1 = (1-g)*a0 + g
		r2 = r1 * (1 - a1/2)
		a2 = (1-g)*a1 + g
		r3 = r2 * (1 - a2/2)
		a3 = (1-g)*a2 + g
	)
	paperCfg := DCQCNConfig{G: g, InitAlpha: a0, RateDecreaseInterval: -1, AlphaTimer: usd(50), AlphaUpdate: DCQCNAlphaPerCNP, Clamp: DCQCNClampAlways}
	tests := []struct {
		k         int
		rc, rt, a float64
	}{
		{1, r1, 100, a1},
		{2, r2, r1, a2},
		{3, r3, r2, a3},
	}
	for _, tt := range tests {
		// k events one microsecond apart ...
		d, err := NewDCQCN(paperCfg, path100G)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tt.k {
			d.OnCNP(CNP{Now: us(int64(100 + i)), Count: 1})
		}
		// ... and one event carrying Count = k must agree.
		e, _ := NewDCQCN(paperCfg, path100G)
		e.OnCNP(CNP{Now: us(100), Count: tt.k})
		for _, x := range []*DCQCN{d, e} {
			if got := x.rc / gbps; !near(got, tt.rc) {
				t.Errorf("k=%d: Rate() = %.12f Gb/s, want %.12f", tt.k, got, tt.rc)
			}
			if got := x.rt / gbps; !near(got, tt.rt) {
				t.Errorf("k=%d: Rt = %.12f Gb/s, want %.12f", tt.k, got, tt.rt)
			}
			if got := x.Alpha(); !near(got, tt.a) {
				t.Errorf("k=%d: Alpha() = %.15f, want %.15f", tt.k, got, tt.a)
			}
		}
	}
}

// TestDCQCNDecreaseInterval: with a 50 µs interval, a burst of
// CNPs gives one cut now and one deferred cut at the interval's end; α
// counts every CNP.
func TestDCQCNDecreaseInterval(t *testing.T) {
	d, err := NewDCQCN(DCQCNConfig{InitAlpha: -1, G: 0.5, AlphaTimer: -1, AlphaUpdate: DCQCNAlphaPerCNP,
		RateDecreaseInterval: usd(50), Clamp: DCQCNClampAlways}, path100G) // α0 = 0
	if err != nil {
		t.Fatal(err)
	}
	d.OnCNP(CNP{Now: us(100), Count: 3})
	// Cut with α = 0 (no change), then α = 1 − (1−0.5)^3 = 0.875.
	if got, want := float64(d.Rate())/gbps, 100.0; got != want {
		t.Errorf("after burst: Rate() = %v Gb/s, want %v", got, want)
	}
	if got, want := d.Alpha(), 0.875; !near(got, want) {
		t.Errorf("after burst: Alpha() = %v, want %v", got, want)
	}
	if got, want := d.Deadline(), us(150); got != want {
		t.Errorf("after burst: Deadline() = %v, want %v (deferred decrease)", got, want)
	}
	d.OnTimer(us(149))
	if got, want := float64(d.Rate())/gbps, 100.0; got != want {
		t.Errorf("early OnTimer: Rate() = %v Gb/s, want %v (no-op)", got, want)
	}
	d.OnTimer(us(150))
	if got, want := float64(d.Rate())/gbps, 100*(1-0.875/2); !near(got, want) {
		t.Errorf("deferred decrease: Rate() = %v Gb/s, want %v", got, want)
	}
	if got := d.rt / gbps; got != 100 {
		t.Errorf("deferred decrease: Rt = %v Gb/s, want 100", got)
	}
}

// TestDCQCNStages checks the stage boundaries with the timer alone (byte
// counter off): exactly F fast-recovery iterations, then additive
// increase forever (hyper increase needs both counters).
func TestDCQCNStages(t *testing.T) {
	d, err := NewDCQCN(DCQCNConfig{
		G: 0.5, InitAlpha: 1, AlphaTimer: -1, RateDecreaseInterval: -1,
		RateIncreaseTimer: usd(55), ByteCounter: -1, F: 3,
		AI: units.Gbps, HAI: 10 * units.Gbps, MinRate: units.Gbps,
	}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	d.OnCNP(CNP{Now: us(0)}) // Rc 50, Rt 100
	rc, rt := 50.0, 100.0
	for k := 1; k <= 8; k++ {
		d.OnTimer(us(int64(55 * k)))
		if k > 3 { // additive; rt capped at line rate
			rt = min(rt+1, 100)
		}
		rc = (rt + rc) / 2
		if got := d.rc / gbps; !near(got, rc) {
			t.Errorf("timer tick %d: Rate() = %.9f Gb/s, want %.9f", k, got, rc)
		}
		if got := d.rt / gbps; got != rt {
			t.Errorf("timer tick %d: Rt = %v Gb/s, want %v", k, got, rt)
		}
	}
}

// TestDCQCNHyperSteps checks i in Rt += i·HAI: i = min(T, BC) − F once
// both counters are past F.
func TestDCQCNHyperSteps(t *testing.T) {
	const sec = vtime.Time(time.Second)
	d, err := NewDCQCN(DCQCNConfig{
		G: 0.5, InitAlpha: 1, AlphaTimer: -1, RateDecreaseInterval: -1, Clamp: DCQCNClampAlways,
		RateIncreaseTimer: time.Second, ByteCounter: units.MB, F: 1,
		AI: units.Gbps, HAI: 2 * units.Gbps, MinRate: units.Gbps,
	}, PathInfo{LineRate: 400 * units.Gbps, BaseRTT: 10 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	t0 := us(2)
	d.OnCNP(CNP{Now: us(1)}) // Rt 400, Rc 200
	d.OnCNP(CNP{Now: t0})    // Rt 200, Rc 100; timer restarts at t0
	d.OnTimer(t0 + sec)      // T=1 ≤ F: fast recovery, Rc 150
	d.OnTimer(t0 + 2*sec)    // T=2 > F, BC=0: additive, Rt 201, Rc 175.5
	steps := []struct {
		ev     string
		rt, rc float64
	}{
		{"bytes", 202, (202 + 175.5) / 2},                                 // BC=1: min(2,1) ≤ F: additive
		{"bytes", 204, (204 + (202+175.5)/2) / 2},                         // BC=2: i = min(2,2) − 1 = 1
		{"bytes", 206, (206 + (204+(202+175.5)/2)/2) / 2},                 // BC=3: i = min(2,3) − 1 = 1
		{"timer", 210, (210 + (206+(204+(202+175.5)/2)/2)/2) / 2},         // T=3: i = min(3,3) − 1 = 2
		{"bytes", 214, (214 + (210+(206+(204+(202+175.5)/2)/2)/2)/2) / 2}, // BC=4: i = min(3,4) − 1 = 2
	}
	for k, s := range steps {
		if s.ev == "bytes" {
			d.OnSend(Sent{Now: t0 + 2*sec, Bytes: units.MB})
		} else {
			d.OnTimer(t0 + 3*sec)
		}
		if got := d.rt / gbps; !near(got, s.rt) {
			t.Errorf("step %d (%s): Rt = %v Gb/s, want %v", k, s.ev, got, s.rt)
		}
		if got := d.rc / gbps; !near(got, s.rc) {
			t.Errorf("step %d (%s): Rate() = %v Gb/s, want %v", k, s.ev, got, s.rc)
		}
	}
}

// TestDCQCNFloorAndCap: the rate never falls below MinRate nor rises above
// the line rate.
func TestDCQCNFloorAndCap(t *testing.T) {
	d, err := NewDCQCN(DCQCNConfig{RateDecreaseInterval: -1, MinRate: 5 * units.Gbps}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	d.OnCNP(CNP{Now: us(1), Count: 1000})
	if got, want := d.Rate(), 5*units.Gbps; got != want {
		t.Errorf("after 1000 CNPs: Rate() = %v, want the floor %v", got, want)
	}
	d.OnSend(Sent{Now: us(2), Bytes: units.MaxBytes})
	d.OnTimer(vtime.Never)
	if got, want := d.Rate(), 100*units.Gbps; got != want {
		t.Errorf("after huge sends and a very late timer: Rate() = %v, want the line rate %v", got, want)
	}
	if got := d.Deadline(); got != 0 {
		t.Errorf("recovered: Deadline() = %v, want 0", got)
	}
}

// TestDCQCNTimerCallsDoNotMatter: a driver that calls OnTimer at every
// deadline and one that never calls it reach the same state after every
// event, because each event first runs the timers due, for every variant.
// g = 1/2 keeps α exact in binary, so the comparison is exact.
func TestDCQCNTimerCallsDoNotMatter(t *testing.T) {
	base := DCQCNConfig{G: 0.5, ByteCounter: 256 * units.KiB, RateIncreaseTimer: usd(20), AlphaTimer: usd(15), MinRate: units.Gbps}
	variants := map[string]func(*DCQCNConfig){
		"connectx": func(*DCQCNConfig) {},
		"paper": func(c *DCQCNConfig) {
			c.AlphaUpdate, c.Clamp, c.RateDecreaseInterval = DCQCNAlphaPerCNP, DCQCNClampAlways, usd(50)
		},
		"ns3": func(c *DCQCNConfig) {
			c.Decrease, c.Increase, c.ByteCounter, c.RateDecreaseInterval = DCQCNDecreasePeriodic, DCQCNIncreaseTimer, -1, usd(4)
		},
		"no-interval": func(c *DCQCNConfig) { c.RateDecreaseInterval = -1 },
	}
	for name, set := range variants {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(testSeed(t), 1))
			cfg := base
			set(&cfg)
			a, err := NewDCQCN(cfg, path100G)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := NewDCQCN(cfg, path100G)
			now := us(1)
			for i := range 20000 {
				now += vtime.Time(r.IntN(int(12 * time.Microsecond)))
				for dl := a.Deadline(); dl != 0 && dl <= now; dl = a.Deadline() {
					a.OnTimer(dl)
				}
				if r.IntN(16) == 0 {
					c := CNP{Now: now, Count: 1 + r.IntN(3)}
					a.OnCNP(c)
					b.OnCNP(c)
				} else {
					s := Sent{Now: now, Bytes: units.Bytes(r.IntN(64 << 10))}
					a.OnSend(s)
					b.OnSend(s)
				}
				if a.rc != b.rc || a.rt != b.rt || a.alpha != b.alpha || a.tStage != b.tStage || a.timerInc != b.timerInc ||
					a.bStage != b.bStage || a.bytes != b.bytes || a.Deadline() != b.Deadline() {
					t.Fatalf("event %d at %v: timer-driven %+v != event-driven %+v", i, now, a.State(), b.State())
				}
			}
		})
	}
}

// TestDCQCNProfileNS3 walks HPCC ns-3's RdmaHw reaction point (profile
// "ns3", through the registry) with round overrides: g = 1/2, F = 1, α
// updated every 10 µs, increases every 100 µs, AI 1 Gb/s, HAI 10 Gb/s.
// Derived by hand from rdma-hw.cc: cnp_received_mlx sets the CNP flags and,
// on the first CNP, starts the alpha and decrease clocks without cutting;
// CheckRateDecreaseMlx cuts every 4 µs if a CNP arrived, setting Rt ← Rc
// only once the increase timer has run (rpTimeStage != 0);
// UpdateAlphaMlx does α ← (1−g)α + g if a CNP arrived in the period, else
// α ← (1−g)α; RateIncEventMlx is fast recovery for stages 0..F−1, one
// additive increase at stage F, then hyper increase by a constant HAI.
func TestDCQCNProfileNS3(t *testing.T) {
	a, err := New("dcqcn", Params{
		"profile": "ns3", "g": "0.5", "f": "1", "alpha_timer": "10us",
		"rate_increase_timer": "100us", "ai": "1Gbps", "hai": "10Gbps",
	}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	d := a.(*DCQCN)
	if c := d.Config(); c.Decrease != DCQCNDecreasePeriodic || c.Increase != DCQCNIncreaseTimer ||
		c.AlphaUpdate != DCQCNAlphaPeriodic || c.Clamp != DCQCNClampAfterTimer || c.ByteCounter != -1 ||
		c.RateDecreaseInterval != usd(4) || c.MinRate != 100*units.Mbps || c.InitAlpha != 1 {
		t.Fatalf("profile ns3 with overrides: config %+v", c)
	}
	// By hand (Gb/s, µs):
	//   t312: α ticked at t310 with no CNP in [300, 310): 2^-19 · 1/2 = 2^-20;
	//         the cut clamps (the timer ran at t208 and t308): Rt = 81.25.
	//   t412: the t320 tick counts the CNP of t310; nine quiet ticks follow.
	const (
		a310 = 1.0 / (1 << 20)
		rc12 = 81.25 * (1 - a310/2)
		a410 = (0.5*a310 + 0.5) / (1 << 9)
		rc41 = (81.25 + rc12) / 2 // T=1: fast recovery
		rc51 = (82.25 + rc41) / 2 // T=2 = F+1: additive, Rt 82.25
		rc61 = (92.25 + rc51) / 2 // T=3: hyper, Rt + 10
		rc71 = (100 + rc61) / 2   // T=4: hyper again by a constant 10, capped at the line
	)
	runDCQCN(t, d, []dcqcnStep{
		// The first CNP starts the clocks and does not cut: decrease check at t104.
		{at: us(100), ev: "cnp", n: 1, rc: 100, rt: 100, alpha: 1, dl: us(104)},
		// Another CNP before the check: one cut still.
		{at: us(102), ev: "cnp", n: 1, rc: 100, rt: 100, alpha: 1, dl: us(104)},
		// The check cuts with α = 1; no increase has run, so Rt stays 100.
		{at: us(104), ev: "timer", rc: 50, rt: 100, alpha: 1, dl: us(204)},
		// A CNP after the check waits for the next one (t108) ...
		{at: us(106), ev: "cnp", n: 1, rc: 50, rt: 100, alpha: 1, dl: us(108)},
		// ... which cuts again and still keeps Rt: the burst heads back to 100.
		{at: us(108), ev: "timer", rc: 25, rt: 100, alpha: 1, dl: us(208)},
		// α at t110 counts the CNPs of [100, 110): (1−g)·1 + g = 1.
		{at: us(110), ev: "timer", rc: 25, rt: 100, alpha: 1, dl: us(208)},
		// t120: no CNP in [110, 120).
		{at: us(120), ev: "timer", rc: 25, rt: 100, alpha: 0.5, dl: us(208)},
		// t208: eight quiet α ticks (t130..t200), then T=1: fast recovery.
		{at: us(208), ev: "timer", rc: 62.5, rt: 100, alpha: 1.0 / (1 << 9), dl: us(308)},
		// t308: ten more ticks; T=2 = F+1: additive, Rt capped at 100.
		{at: us(308), ev: "timer", rc: 81.25, rt: 100, alpha: 1.0 / (1 << 19), dl: us(408)},
		// A CNP at t310 (after the t310 α tick): next check t312.
		{at: us(310), ev: "cnp", n: 1, rc: 81.25, rt: 100, alpha: a310, dl: us(312)},
		// The cut clamps now that the timer has run since the last cut.
		{at: us(312), ev: "timer", rc: rc12, rt: 81.25, alpha: a310, dl: us(412)},
		{at: us(412), ev: "timer", rc: rc41, rt: 81.25, alpha: a410, dl: us(512)},
		{at: us(512), ev: "timer", rc: rc51, rt: 82.25, alpha: a410 / (1 << 10), dl: us(612)},
		{at: us(612), ev: "timer", rc: rc61, rt: 92.25, alpha: a410 / (1 << 20), dl: us(712)},
		{at: us(712), ev: "timer", rc: rc71, rt: 100, alpha: a410 / (1 << 30), dl: us(812)},
	})
}

// TestDCQCNProfileConnectX walks the defaults (ConnectX firmware) by hand:
// α updated every 1 µs with g = 5/1024 from α0 = 1023/1024, cuts on the
// CNP at most every 4 µs, Rt ← Rc only after a timer increase, QCN stages
// with F = 1, a 300 µs timer and a 32767·64-byte counter, AI 5 Mb/s, HAI
// 50 Mb/s.
func TestDCQCNProfileConnectX(t *testing.T) {
	d, err := NewDCQCN(DCQCNConfig{}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	const (
		g  = 5.0 / 1024
		k  = 1019.0 / 1024 // 1 − g
		a0 = 1023.0 / 1024
		bc = 32767 * 64
	)
	// α: the CNP at t12 arrives after the t12 tick, so the t13 tick counts it.
	a14 := k * (k*(k*(k*a0)) + g)
	rc1 := 100 * (1 - a0/2)  // t10: immediate cut, Rt stays 100
	rc2 := rc1 * (1 - a14/2) // t14: the deferred cut, Rt still 100 (no timer yet)
	rc3 := (100 + rc2) / 2   // t314: T=1 ≤ F: fast recovery
	a320 := a14 * math.Pow(k, 306)
	rc4 := rc3 * (1 - a320/2) // t320: cut, and Rt ← Rc: the timer ran since t14
	rc5 := (rc3 + rc4) / 2    // BC=1: fast recovery
	rt6 := rc3 + 0.005        // BC=2 > F, T=0: additive
	rc6 := (rt6 + rc5) / 2
	rt7 := rt6 + 0.005 // t620: T=1, BC=2: additive
	rc7 := (rt7 + rc6) / 2
	rt8 := rt7 + 0.050 // t920: T=2, BC=2: hyper, i = min(2, 2) − F = 1
	rc8 := (rt8 + rc7) / 2
	a321 := k*a320 + g // t321 counts the CNP of t320
	runDCQCN(t, d, []dcqcnStep{
		{at: us(10), ev: "cnp", n: 1, rc: rc1, rt: 100, alpha: a0, dl: us(310)},
		{at: us(12), ev: "cnp", n: 1, rc: rc1, rt: 100, alpha: k * k * a0, dl: us(14)},
		{at: us(14), ev: "timer", rc: rc2, rt: 100, alpha: a14, dl: us(314)},
		{at: us(314), ev: "timer", rc: rc3, rt: 100, alpha: a14 * math.Pow(k, 300), dl: us(614)},
		{at: us(320), ev: "cnp", n: 1, rc: rc4, rt: rc3, alpha: a320, dl: us(620)},
		{at: us(321), ev: "send", n: bc, rc: rc5, rt: rc3, alpha: a321, dl: us(620)},
		{at: us(321), ev: "send", n: bc, rc: rc6, rt: rt6, alpha: a321, dl: us(620)},
		{at: us(620), ev: "timer", rc: rc7, rt: rt7, alpha: a321 * math.Pow(k, 299), dl: us(920)},
		{at: us(920), ev: "timer", rc: rc8, rt: rt8, alpha: a321 * math.Pow(k, 599), dl: us(1220)},
	})
}

// TestDCQCNClampVariants: the same CNPs and timer under both clamps. With
// Rt ← Rc on every cut (the paper) a burst of cuts drags the target down;
// clamping only after a timer increase (ConnectX, ns-3) keeps the
// pre-congestion target through the burst. g = 1/2, α0 = 1 and α per CNP
// (so α stays 1), no decrease interval, a 10 µs timer, F = 1.
func TestDCQCNClampVariants(t *testing.T) {
	cfg := DCQCNConfig{
		G: 0.5, InitAlpha: 1, AlphaUpdate: DCQCNAlphaPerCNP, AlphaTimer: -1, RateDecreaseInterval: -1,
		RateIncreaseTimer: usd(10), ByteCounter: -1, F: 1, AI: units.Gbps, HAI: 10 * units.Gbps, MinRate: units.Gbps,
	}
	for _, tc := range []struct {
		clamp DCQCNClamp
		steps []dcqcnStep
	}{
		{DCQCNClampAlways, []dcqcnStep{
			{at: us(1), ev: "cnp", n: 1, rc: 50, rt: 100, alpha: 1, dl: us(11)},
			{at: us(2), ev: "cnp", n: 1, rc: 25, rt: 50, alpha: 1, dl: us(12)},
			{at: us(12), ev: "timer", rc: 37.5, rt: 50, alpha: 1, dl: us(22)},
			{at: us(13), ev: "cnp", n: 1, rc: 18.75, rt: 37.5, alpha: 1, dl: us(23)},
			{at: us(14), ev: "cnp", n: 1, rc: 9.375, rt: 18.75, alpha: 1, dl: us(24)},
		}},
		{DCQCNClampAfterTimer, []dcqcnStep{
			{at: us(1), ev: "cnp", n: 1, rc: 50, rt: 100, alpha: 1, dl: us(11)},
			{at: us(2), ev: "cnp", n: 1, rc: 25, rt: 100, alpha: 1, dl: us(12)},
			{at: us(12), ev: "timer", rc: 62.5, rt: 100, alpha: 1, dl: us(22)},
			{at: us(13), ev: "cnp", n: 1, rc: 31.25, rt: 62.5, alpha: 1, dl: us(23)},
			{at: us(14), ev: "cnp", n: 1, rc: 15.625, rt: 62.5, alpha: 1, dl: us(24)},
		}},
	} {
		t.Run(tc.clamp.String(), func(t *testing.T) {
			c := cfg
			c.Clamp = tc.clamp
			d, err := NewDCQCN(c, path100G)
			if err != nil {
				t.Fatal(err)
			}
			runDCQCN(t, d, tc.steps)
		})
	}
}

// TestDCQCNIncreaseVariants: a 2 MB flow after one cut, with the paper's
// 10 MB byte counter (QCN stages) and with timer-only stages (ns-3). QCN
// never reaches hyper increase, which needs BC > F too: 2 MB is not one
// byte-counter event, so every timer event past F adds only AI. The timer
// stages add AI once at T = F+1, then HAI per event.
func TestDCQCNIncreaseVariants(t *testing.T) {
	cfg := DCQCNConfig{
		G: 0.5, InitAlpha: 1, AlphaUpdate: DCQCNAlphaPerCNP, AlphaTimer: -1, RateDecreaseInterval: -1,
		RateIncreaseTimer: usd(10), F: 1, AI: units.Gbps, HAI: 10 * units.Gbps, MinRate: units.Gbps,
	}
	// After the cut at t1: Rc 50, Rt 100. To see the target move, start the
	// table from a second cut after a timer event, which clamps Rt ← Rc.
	for _, tc := range []struct {
		inc   DCQCNIncrease
		bc    units.Bytes
		steps []dcqcnStep
	}{
		{DCQCNIncreaseQCN, 10 * units.MB, []dcqcnStep{
			{at: us(1), ev: "cnp", n: 1, rc: 50, rt: 100, alpha: 1, dl: us(11)},
			{at: us(11), ev: "timer", rc: 75, rt: 100, alpha: 1, dl: us(21)},
			{at: us(12), ev: "cnp", n: 1, rc: 37.5, rt: 75, alpha: 1, dl: us(22)},
			{at: us(13), ev: "send", n: 2_000_000, rc: 37.5, rt: 75, alpha: 1, dl: us(22)},
			{at: us(22), ev: "timer", rc: 56.25, rt: 75, alpha: 1, dl: us(32)},     // T=1: FR
			{at: us(32), ev: "timer", rc: 66.125, rt: 76, alpha: 1, dl: us(42)},    // T=2, BC=0: AI
			{at: us(42), ev: "timer", rc: 71.5625, rt: 77, alpha: 1, dl: us(52)},   // T=3: AI
			{at: us(52), ev: "timer", rc: 74.78125, rt: 78, alpha: 1, dl: us(62)},  // T=4: AI
			{at: us(62), ev: "timer", rc: 76.890625, rt: 79, alpha: 1, dl: us(72)}, // T=5: AI
		}},
		{DCQCNIncreaseTimer, -1, []dcqcnStep{
			{at: us(1), ev: "cnp", n: 1, rc: 50, rt: 100, alpha: 1, dl: us(11)},
			{at: us(11), ev: "timer", rc: 75, rt: 100, alpha: 1, dl: us(21)},
			{at: us(12), ev: "cnp", n: 1, rc: 37.5, rt: 75, alpha: 1, dl: us(22)},
			{at: us(13), ev: "send", n: 2_000_000, rc: 37.5, rt: 75, alpha: 1, dl: us(22)},
			{at: us(22), ev: "timer", rc: 56.25, rt: 75, alpha: 1, dl: us(32)},      // T=1: FR
			{at: us(32), ev: "timer", rc: 66.125, rt: 76, alpha: 1, dl: us(42)},     // T=2 = F+1: AI
			{at: us(42), ev: "timer", rc: 76.0625, rt: 86, alpha: 1, dl: us(52)},    // T=3: HAI
			{at: us(52), ev: "timer", rc: 86.03125, rt: 96, alpha: 1, dl: us(62)},   // T=4: HAI
			{at: us(62), ev: "timer", rc: 93.015625, rt: 100, alpha: 1, dl: us(72)}, // T=5: HAI, capped
		}},
	} {
		t.Run(tc.inc.String(), func(t *testing.T) {
			c := cfg
			c.Increase, c.ByteCounter = tc.inc, tc.bc
			d, err := NewDCQCN(c, path100G)
			if err != nil {
				t.Fatal(err)
			}
			runDCQCN(t, d, tc.steps)
		})
	}
}

// TestDCQCNDecreaseVariants: CNPs at t100, t105, t106 and t107 with a
// 4 µs interval; α stays 1 (periodic updates every second never tick), so
// every cut halves Rc. Immediate: cuts on the CNP at t100, on the CNP at
// t105 (5 µs later), and once at t109 for the CNPs of t106 and t107.
// Periodic (checks every 4 µs from the first CNP: t104, t108, ...): cuts
// at t104, then once at t108 for the three later CNPs.
func TestDCQCNDecreaseVariants(t *testing.T) {
	cfg := DCQCNConfig{
		G: 0.5, InitAlpha: 1, AlphaTimer: time.Second, RateDecreaseInterval: usd(4),
		RateIncreaseTimer: usd(1000), ByteCounter: -1, Increase: DCQCNIncreaseTimer, MinRate: units.Gbps,
	}
	for _, tc := range []struct {
		dec   DCQCNDecrease
		steps []dcqcnStep
	}{
		{DCQCNDecreaseImmediate, []dcqcnStep{
			{at: us(100), ev: "cnp", n: 1, rc: 50, rt: 100, alpha: 1, dl: us(1100)},
			{at: us(104), ev: "timer", rc: 50, rt: 100, alpha: 1, dl: us(1100)},
			{at: us(105), ev: "cnp", n: 1, rc: 25, rt: 100, alpha: 1, dl: us(1105)},
			{at: us(106), ev: "cnp", n: 1, rc: 25, rt: 100, alpha: 1, dl: us(109)},
			{at: us(107), ev: "cnp", n: 1, rc: 25, rt: 100, alpha: 1, dl: us(109)},
			{at: us(109), ev: "timer", rc: 12.5, rt: 100, alpha: 1, dl: us(1109)},
		}},
		{DCQCNDecreasePeriodic, []dcqcnStep{
			{at: us(100), ev: "cnp", n: 1, rc: 100, rt: 100, alpha: 1, dl: us(104)},
			{at: us(104), ev: "timer", rc: 50, rt: 100, alpha: 1, dl: us(1104)},
			{at: us(105), ev: "cnp", n: 1, rc: 50, rt: 100, alpha: 1, dl: us(108)},
			{at: us(106), ev: "cnp", n: 1, rc: 50, rt: 100, alpha: 1, dl: us(108)},
			{at: us(107), ev: "cnp", n: 1, rc: 50, rt: 100, alpha: 1, dl: us(108)},
			{at: us(108), ev: "timer", rc: 25, rt: 100, alpha: 1, dl: us(1108)},
			{at: us(109), ev: "timer", rc: 25, rt: 100, alpha: 1, dl: us(1108)},
		}},
	} {
		t.Run(tc.dec.String(), func(t *testing.T) {
			c := cfg
			c.Decrease = tc.dec
			d, err := NewDCQCN(c, path100G)
			if err != nil {
				t.Fatal(err)
			}
			runDCQCN(t, d, tc.steps)
		})
	}
}

// TestDCQCNProfiles: every named profile is valid on a range of paths, the
// registry's "profile" parameter gives the same configuration, other
// parameters override it, and bad names are errors naming the choices.
func TestDCQCNProfiles(t *testing.T) {
	for _, line := range []units.BitRate{units.Gbps, 25 * units.Gbps, 100 * units.Gbps, 800 * units.Gbps} {
		path := PathInfo{LineRate: line, BaseRTT: 10 * time.Microsecond}
		for _, name := range DCQCNProfiles() {
			c, err := DCQCNProfile(name, path)
			if err != nil {
				t.Fatalf("DCQCNProfile(%q, %v) = %v", name, line, err)
			}
			if err := c.Validate(path); err != nil {
				t.Errorf("profile %q at %v: %v", name, line, err)
			}
			a, err := New("dcqcn", Params{"profile": name}, path)
			if err != nil {
				t.Fatalf("New(dcqcn, profile %s) = %v", name, err)
			}
			if got, want := a.(*DCQCN).Config(), must(c.WithDefaults(path)); got != want {
				t.Errorf("profile %q via the registry: %+v, want %+v", name, got, want)
			}
		}
	}
	a, err := New("dcqcn", Params{"profile": "ns3", "clamp_target": "always", "rate_decrease_interval": "50us"}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	if c := a.(*DCQCN).Config(); c.Clamp != DCQCNClampAlways || c.RateDecreaseInterval != usd(50) || c.G != 1.0/16 {
		t.Errorf("ns3 with overrides: %+v", c)
	}
	for _, tc := range []struct {
		p    Params
		want []string
	}{
		{Params{"profile": "mellanox"}, []string{`unknown profile "mellanox"`, "connectx, ns3, paper"}},
		{Params{"clamp_target": "sometimes"}, []string{"parameter clamp_target", `"sometimes"`, "after_timer, always"}},
		{Params{"profile": "ns3", "byte_counter": "1MB"}, []string{"ByteCounter", "Increase = timer"}},
		{Params{"decrease": "periodic", "rate_decrease_interval": "0"}, []string{"RateDecreaseInterval", "periodic"}},
		{Params{"colour": "red"}, []string{`unknown parameter "colour"`, "profile", "increase"}},
	} {
		_, err := New("dcqcn", tc.p, path100G)
		if err == nil {
			t.Errorf("New(dcqcn, %v) succeeded, want an error", tc.p)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("New(dcqcn, %v) = %q, want it to mention %q", tc.p, err, w)
			}
		}
	}
	if err := (DCQCNConfig{Clamp: 9}).Validate(path100G); err == nil || !strings.Contains(err.Error(), "parameter clamp_target") {
		t.Errorf("Clamp 9: Validate = %v, want an error naming clamp_target", err)
	}
}

// TestDCQCNBulkOracle checks the closed form that runs long stretches of
// constant-step increases against the same events applied one by one.
func TestDCQCNBulkOracle(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  DCQCNConfig
		n    int64 // events: enough for thousands of steps, not enough to reach the line rate
	}{
		{"timer, additive", DCQCNConfig{Clamp: DCQCNClampAlways, RateDecreaseInterval: -1, ByteCounter: -1, RateIncreaseTimer: usd(1), AI: 7 * units.Mbps}, 2000},
		{"timer, hyper", DCQCNConfig{Clamp: DCQCNClampAlways, RateDecreaseInterval: -1, Increase: DCQCNIncreaseTimer, ByteCounter: -1, RateIncreaseTimer: usd(1), HAI: 30 * units.Mbps}, 1000},
		{"bytes, hyper", DCQCNConfig{Clamp: DCQCNClampAlways, RateDecreaseInterval: -1, RateIncreaseTimer: usd(1e6), ByteCounter: 4096, HAI: 3 * units.Mbps}, 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewDCQCN(tc.cfg, path100G)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := NewDCQCN(tc.cfg, path100G)
			for _, d := range []*DCQCN{a, b} { // three cuts: Rt 25, Rc 12.5 Gb/s
				d.OnCNP(CNP{Now: us(10), Count: 3})
			}
			if tc.cfg.ByteCounter > 0 {
				// three timer events first, so that hyper increase has i = 2
				a.OnTimer(us(10) + 3*us(1e6))
				b.OnTimer(us(10) + 3*us(1e6))
				n := tc.n
				a.OnSend(Sent{Now: us(3e6 + 20), Bytes: units.Bytes(n) * 4096})
				for range n {
					b.OnSend(Sent{Now: us(3e6 + 20), Bytes: 4096})
				}
			} else {
				n := tc.n
				a.OnTimer(us(10 + n))
				for i := int64(1); i <= n; i++ {
					b.OnTimer(us(10 + i))
				}
			}
			if !near(a.rc, b.rc) || !near(a.rt, b.rt) || a.tStage != b.tStage || a.bStage != b.bStage {
				t.Errorf("closed form Rc %.3f Rt %.3f T %d BC %d; one by one Rc %.3f Rt %.3f T %d BC %d",
					a.rc, a.rt, a.tStage, a.bStage, b.rc, b.rt, b.tStage, b.bStage)
			}
			if a.rc >= a.line {
				t.Errorf("%s: Rc reached the line rate; the oracle should stop short of it", tc.name)
			}
		})
	}
}
