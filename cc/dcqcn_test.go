package cc

import (
	"math"
	"math/rand/v2"
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

// TestDCQCNTable walks the reaction point through decrease, the
// rate-decrease interval, alpha decay, fast recovery, additive and hyper
// increase (timer and byte counter), a late timer and recovery to line
// rate. Every expected value is computed by hand from Zhu et al. §3.1:
// Eq. 1 (Rt=Rc, Rc=Rc(1−α/2), α=(1−g)α+g), Eq. 2 (α=(1−g)α), fast
// recovery Rc=(Rt+Rc)/2, additive Rt+=AI, hyper Rt+=i·HAI.
func TestDCQCNTable(t *testing.T) {
	d, err := NewDCQCN(DCQCNConfig{
		G: 0.5, InitAlpha: 1,
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
		// First CNP: cut with α = 1, α stays 1; alpha timer t60, increase t65.
		{at: us(10), ev: "cnp", n: 1, rc: 50, rt: 100, alpha: 1, dl: us(60)},
		// Within the 50 µs decrease interval: α only; the decrease is deferred to t60.
		{at: us(20), ev: "cnp", n: 1, rc: 50, rt: 100, alpha: 1, dl: us(60)},
		// Deferred decrease at t60: Rt=50, Rc=25; increase timer restarts (t115); alpha timer t70.
		{at: us(60), ev: "timer", rc: 25, rt: 50, alpha: 1, dl: us(70)},
		// No CNP for 50 µs since t20: α = (1−g)α.
		{at: us(70), ev: "timer", rc: 25, rt: 50, alpha: 0.5, dl: us(115)},
		// Timer T=1 ≤ F: fast recovery.
		{at: us(115), ev: "timer", rc: 37.5, rt: 50, alpha: 0.5, dl: us(120)},
		{at: us(120), ev: "timer", rc: 37.5, rt: 50, alpha: 0.25, dl: us(170)},
		// Both timers due: α decays, T=2 fast recovery.
		{at: us(170), ev: "timer", rc: 43.75, rt: 50, alpha: 0.125, dl: us(220)},
		// Late call: the alpha tick at t220 runs, then T=3 > F with BC=0: additive.
		{at: us(225), ev: "timer", rc: 47.375, rt: 51, alpha: 0.0625, dl: us(270)},
		// 3 MB = three byte-counter cycles: BC=1,2 additive; BC=3 with T=3: hyper, i=1.
		{at: us(230), ev: "send", n: 3_000_000, rc: 57.171875, rt: 63, alpha: 0.0625, dl: us(270)},
		// Alpha at t270; timer T=4, BC=3: hyper, i = min(4,3) − F = 1.
		{at: us(280), ev: "timer", rc: 65.0859375, rt: 73, alpha: 0.03125, dl: us(320)},
		// A CNP 240 µs after the last decrease cuts at once and resets the stages.
		{at: us(300), ev: "cnp", n: 1, rc: c0, rt: rt300, alpha: 0.5*0.03125 + 0.5, dl: us(350)},
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
		d, err := NewDCQCN(DCQCNConfig{InitAlpha: a0, RateDecreaseInterval: -1}, path100G)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tt.k {
			d.OnCNP(CNP{Now: us(int64(100 + i)), Count: 1})
		}
		// ... and one event carrying Count = k must agree.
		e, _ := NewDCQCN(DCQCNConfig{InitAlpha: a0, RateDecreaseInterval: -1}, path100G)
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

// TestDCQCNDecreaseInterval: with the default 50 µs interval, a burst of
// CNPs gives one cut now and one deferred cut at the interval's end; α
// counts every CNP.
func TestDCQCNDecreaseInterval(t *testing.T) {
	d, err := NewDCQCN(DCQCNConfig{InitAlpha: -1, G: 0.5, AlphaTimer: -1}, path100G) // α0 = 0
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
		G: 0.5, InitAlpha: 1, AlphaTimer: -1, RateDecreaseInterval: -1,
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
// event, because each event first runs the timers due. g = 1/2 keeps α
// exact in binary, so the comparison is exact.
func TestDCQCNTimerCallsDoNotMatter(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 1))
	cfg := DCQCNConfig{G: 0.5, ByteCounter: 256 * units.KiB, RateIncreaseTimer: usd(20), AlphaTimer: usd(15), MinRate: units.Gbps}
	a, _ := NewDCQCN(cfg, path100G)
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
		if a.rc != b.rc || a.rt != b.rt || a.alpha != b.alpha || a.tStage != b.tStage ||
			a.bStage != b.bStage || a.bytes != b.bytes || a.Deadline() != b.Deadline() {
			t.Fatalf("event %d at %v: timer-driven %+v != event-driven %+v", i, now, a.State(), b.State())
		}
	}
}
