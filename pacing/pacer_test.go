package pacing

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

const (
	KiB  = units.KiB
	MiB  = units.MiB
	Gbps = units.Gbps
)

// Literal instants, as in x/time/rate's tests: t0 is 1 ms after the epoch
// and the rest are offsets from it.
const t0 = vtime.Time(time.Millisecond)

func at(ns int64) vtime.Time { return t0 + vtime.Time(ns) }

// op is one step of a literal-time table: a query checked against want, or
// an input.
type op struct {
	at   vtime.Time
	kind string // "budget", "next", "sent", "rate"
	n    units.Bytes
	r    units.BitRate
	want int64 // budget: bytes; next: absolute time
}

func budget(t vtime.Time, want units.Bytes) op { return op{at: t, kind: "budget", want: int64(want)} }
func next(t vtime.Time, n units.Bytes, want vtime.Time) op {
	return op{at: t, kind: "next", n: n, want: int64(want)}
}
func sent(t vtime.Time, n units.Bytes) op      { return op{at: t, kind: "sent", n: n} }
func setRate(t vtime.Time, r units.BitRate) op { return op{at: t, kind: "rate", r: r} }

// limiter is what Pacer and Port have in common.
type limiter interface {
	SetRate(now vtime.Time, r units.BitRate)
	Budget(now vtime.Time) units.Bytes
	OnSent(now vtime.Time, n units.Bytes)
	NextSend(now vtime.Time, n units.Bytes) vtime.Time
}

func run(t *testing.T, l limiter, ops []op) {
	t.Helper()
	for i, o := range ops {
		switch o.kind {
		case "budget":
			if got := l.Budget(o.at); int64(got) != o.want {
				t.Errorf("step %d: Budget(%v) = %d, want %d", i, o.at-t0, int64(got), o.want)
			}
		case "next":
			if got := l.NextSend(o.at, o.n); int64(got) != o.want {
				t.Errorf("step %d: NextSend(%v, %d) = t0%+d, want t0%+d", i, o.at-t0, int64(o.n), int64(got-t0), o.want-int64(t0))
			}
		case "sent":
			l.OnSent(o.at, o.n)
		case "rate":
			l.SetRate(o.at, o.r)
		default:
			t.Fatalf("step %d: bad op %q", i, o.kind)
		}
	}
}

func mustNew(t testing.TB, cfg Config) *Pacer {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	return p
}

// cfg100 is a 100 Gb/s path with a 256 KiB bucket and 64 KiB segments.
var cfg100 = Config{Rate: 100 * Gbps, Burst: 256 * KiB, Segment: 64 * KiB}

// At 100 Gb/s a nanosecond carries 12.5 bytes and 64 KiB takes 5242.88 ns,
// which NextSend rounds up to 5243 ns.
func TestPacerSteps(t *testing.T) {
	run(t, mustNew(t, cfg100), []op{
		budget(t0, 256*KiB), // starts full
		sent(t0, 256*KiB),
		budget(t0, 0),
		next(t0, 64*KiB, at(5243)),
		budget(at(5242), 65525), // 5242 ns * 12.5 B/ns
		budget(at(5243), 65537), // 65537.5, rounded down
		next(at(5243), 64*KiB, at(5243)),
		sent(at(5243), 64*KiB), // 1.5 bytes left
		budget(at(5243), 1),
		next(at(5243), 64*KiB, at(10486)), // (65536-1.5)/12.5 = 5242.76 -> 5243 ns
		budget(at(10485), 65526),
		budget(at(10486), 65539),
		sent(at(10486), 64*KiB), // 3 bytes left
		next(at(10486), 3, at(10486)),
		next(at(10486), 4, at(10487)), // one more byte: 0.08 ns -> 1 ns
		next(at(10486), 0, at(10486)),
		next(at(10486), -5, at(10486)),
		next(at(10486), 1*MiB, at(10486+20972)), // clamped to Burst: (262144-3)/12.5 = 20971.28
		budget(at(10486+20972), 256*KiB),
	})
}

// TestPacerLateTimer: a timer that fires late finds a full bucket, and a
// full bucket is all it may send; the rate is not made up afterwards
// (quic-go's pacer test of the same name).
func TestPacerLateTimer(t *testing.T) {
	run(t, mustNew(t, cfg100), []op{
		sent(t0, 256*KiB),
		next(t0, 64*KiB, at(5243)),
		budget(at(1_000_000), 256*KiB), // 1 ms late: capped at Burst
		sent(at(1_000_000), 256*KiB),
		budget(at(1_000_000), 0),
		next(at(1_000_000), 64*KiB, at(1_005_243)),
	})
}

// TestPacerJumpBackwards: an earlier instant is read as the latest one
// seen, so a backward jump neither re-credits nor debits.
func TestPacerJumpBackwards(t *testing.T) {
	run(t, mustNew(t, cfg100), []op{
		sent(t0, 256*KiB),
		budget(at(10000), 125000),
		budget(at(5000), 125000), // not 62500
		sent(at(5000), 100000),   // counted at t0+10000
		budget(at(10000), 25000), // rate.Limiter would re-credit 62500 here
		budget(at(0), 25000),
		next(at(5000), 64*KiB, at(13243)), // (65536-25000)/12.5 = 3242.88 from t0+10000
		budget(at(13242), 65525),
		budget(at(13243), 65537),
	})
}

// TestPacerDebt: sending more than the budget empties the bucket and owes
// the rest; nothing accrues until it is repaid.
func TestPacerDebt(t *testing.T) {
	run(t, mustNew(t, cfg100), []op{
		sent(t0, 1*MiB), // 256 KiB in the bucket, 768 KiB owed
		budget(t0, 0),
		next(t0, 64*KiB, at(62915+5243)), // 786432/12.5 = 62914.56 -> 62915, then 5243
		budget(at(62914), 0),
		budget(at(62915), 0), // repaid, empty
		budget(at(62915+5242), 65525),
		budget(at(62915+5243), 65537),
		// Overshoot: 65537 whole bytes taken (the half byte is dropped)
		// and 34463 owed: 2757.04 -> 2758 ns, then 1 byte in 0.08 -> 1 ns.
		sent(at(62915+5243), 100000),
		next(at(62915+5243), 1, at(62915+5243+2758+1)),
		budget(at(62915+5243+2758), 0),
		budget(at(62915+5243+2759), 12),
	})
	// Overshoot while already in debt adds to the debt.
	run(t, mustNew(t, cfg100), []op{
		sent(t0, 256*KiB+125000), // 125000 owed: 10000 ns
		sent(at(5000), 125000),   // 187500 owed at t0+5000: 15000 ns more
		budget(at(19999), 0),
		next(at(19999), 125, at(20010)),
		budget(at(20010), 125),
	})
}

// TestPacerSetRate: accrual before a change is at the old rate; a debt
// keeps what the old rate repaid.
func TestPacerSetRate(t *testing.T) {
	run(t, mustNew(t, cfg100), []op{
		sent(t0, 256*KiB),
		setRate(at(1000), 50*Gbps), // 12500 accrued at 100 Gb/s
		budget(at(2000), 18750),    // + 6250 at 50 Gb/s
		next(at(2000), 64*KiB, at(2000+7486)),
	})
	run(t, mustNew(t, cfg100), []op{
		sent(t0, 1*MiB),             // 786432 owed
		setRate(at(31457), 50*Gbps), // 393212 repaid; 393220 owed at 6.25 B/ns
		next(at(31457), 64*KiB, at(31457+62916+10486)),
		budget(at(31457+62916), 0),
		budget(at(31457+62916+10486), 65537),
	})
}

// TestPacerRateZero: rate 0 stops the refill; what is in the bucket stays
// sendable and anything more is never.
func TestPacerRateZero(t *testing.T) {
	sec := int64(time.Second)
	run(t, mustNew(t, cfg100), []op{
		sent(t0, 200000), // 62144 left
		setRate(t0, 0),
		budget(at(sec), 62144),
		next(at(sec), 64*KiB, vtime.Never),
		next(at(sec), 62144, at(sec)),
		sent(at(sec), 100000), // 37856 owed, never repaid at rate 0
		budget(at(2*sec), 0),
		next(at(2*sec), 1, vtime.Never),
		setRate(at(2*sec), 100*Gbps),
		next(at(2*sec), 64*KiB, at(2*sec+3029+5243)), // 37856/12.5 = 3028.48
	})
}

// TestPacerUnlimited: Rate 0 in Config is unpaced; an unpaced pacer
// returns to a finite rate with a full bucket (but nothing refills at the
// same instant).
func TestPacerUnlimited(t *testing.T) {
	p := mustNew(t, Config{Burst: 256 * KiB, Segment: 64 * KiB})
	if p.Rate() != units.Unlimited {
		t.Fatalf("Rate() = %v, want unlimited", p.Rate())
	}
	run(t, p, []op{
		budget(t0, units.MaxBytes),
		next(t0, 1<<40, t0),
		sent(t0, 1<<40), // ignored
		setRate(t0, 100*Gbps),
		budget(t0, 256*KiB),
		sent(t0, 300*KiB), // 44 KiB owed
		setRate(t0, units.Unlimited),
		budget(t0, units.MaxBytes),
		setRate(t0, 100*Gbps), // same instant: still empty, debt forgiven
		budget(t0, 0),
		next(t0, 125, at(10)),
		setRate(at(1), units.Unlimited),
		setRate(at(2), 100*Gbps),
		budget(at(2), 256*KiB),
	})
}

func TestPacerAccessors(t *testing.T) {
	p := mustNew(t, Config{})
	if p.Rate() != units.Unlimited || p.Burst() != 512*KiB || p.Segment() != 128*KiB || p.PFCXoff() != 1*MiB {
		t.Errorf("New(Config{}): Rate %v, Burst %v, Segment %v, PFCXoff %v; want unlimited, 512KiB, 128KiB, 1MiB",
			p.Rate(), p.Burst(), p.Segment(), p.PFCXoff())
	}
	p.SetRate(t0, 25*Gbps)
	if p.Rate() != 25*Gbps {
		t.Errorf("Rate() after SetRate(25Gbps) = %v", p.Rate())
	}
}

func TestZeroPacer(t *testing.T) {
	var p Pacer
	if p.Budget(t0) != units.MaxBytes || p.NextSend(t0, MiB) != t0 || p.Rate() != units.Unlimited || p.Burst() != 0 {
		t.Error("zero Pacer is not unpaced")
	}
	p.OnSent(t0, MiB)
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "pacing: BUG:") {
			t.Errorf("SetRate on a zero Pacer recovered %v, want a pacing: BUG: panic", r)
		}
	}()
	p.SetRate(t0, Gbps)
}

func TestSetRateNegativePanics(t *testing.T) {
	p := mustNew(t, cfg100)
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "pacing: BUG: Pacer.SetRate(-1 bit/s)") {
			t.Errorf("SetRate(-1) recovered %v, want a pacing: BUG: panic", r)
		}
	}()
	p.SetRate(t0, -1)
}

func TestConfigDefaults(t *testing.T) {
	for _, tt := range []struct {
		cfg              Config
		burst, seg, xoff units.Bytes
	}{
		{Config{}, 512 * KiB, 128 * KiB, 1 * MiB},
		{Config{PFCXoff: 200 * KiB}, 100 * KiB, 100 * KiB, 200 * KiB}, // Segment capped at XOFF/2
		{Config{PFCXoff: 8 * KiB}, 4 * KiB, 4 * KiB, 8 * KiB},         // the smallest XOFF
		{Config{PFCXoff: 4 * MiB}, 512 * KiB, 128 * KiB, 4 * MiB},     // 4 segments < XOFF/2
		{Config{PFCXoff: units.MaxBytes}, 512 * KiB, 128 * KiB, units.MaxBytes},
		{Config{Segment: 64 * KiB}, 256 * KiB, 64 * KiB, 1 * MiB},
		{Config{Segment: 768 * KiB}, 768 * KiB, 768 * KiB, 1 * MiB}, // at least one segment
		{Config{Burst: 64 * KiB}, 64 * KiB, 64 * KiB, 1 * MiB},      // Segment capped at Burst
		{Config{Burst: 1*MiB - 1}, 1*MiB - 1, 128 * KiB, 1 * MiB},
		{Config{Burst: 300 * KiB, Segment: 300 * KiB}, 300 * KiB, 300 * KiB, 1 * MiB},
		{Config{Segment: MaxBurst, PFCXoff: units.MaxBytes}, MaxBurst, MaxBurst, units.MaxBytes},
		{Config{Burst: MaxBurst, PFCXoff: units.MaxBytes}, MaxBurst, 128 * KiB, units.MaxBytes},
		// The default segment keeps its 10.49 µs at line rates above
		// 100 Gb/s; the default bucket stays min(XOFF/2, 4 segments).
		{Config{LineRate: 100 * Gbps}, 512 * KiB, 128 * KiB, 1 * MiB},
		{Config{LineRate: 200 * Gbps}, 512 * KiB, 256 * KiB, 1 * MiB},
		{Config{LineRate: 400 * Gbps}, 512 * KiB, 512 * KiB, 1 * MiB},
		{Config{LineRate: 800 * Gbps}, 512 * KiB, 512 * KiB, 1 * MiB}, // capped at XOFF/2
		{Config{LineRate: 400 * Gbps, PFCXoff: 8 * MiB}, 2 * MiB, 512 * KiB, 8 * MiB},
		{Config{LineRate: 400 * Gbps, Burst: 256 * KiB}, 256 * KiB, 256 * KiB, 1 * MiB},
		{Config{LineRate: 400 * Gbps, Segment: 64 * KiB}, 256 * KiB, 64 * KiB, 1 * MiB},
		{Config{LineRate: 150 * Gbps}, 512 * KiB, 192 * KiB, 1 * MiB},
		{Config{LineRate: units.Unlimited}, 512 * KiB, 128 * KiB, 1 * MiB},
		{Config{LineRate: 1 << 62, PFCXoff: units.MaxBytes}, MaxBurst, MaxBurst, units.MaxBytes},
	} {
		p, err := New(tt.cfg)
		if err != nil {
			t.Errorf("New(%+v) = %v", tt.cfg, err)
			continue
		}
		if p.Burst() != tt.burst || p.Segment() != tt.seg || p.PFCXoff() != tt.xoff {
			t.Errorf("New(%+v): Burst, Segment, PFCXoff = %v, %v, %v; want %v, %v, %v",
				tt.cfg, p.Burst(), p.Segment(), p.PFCXoff(), tt.burst, tt.seg, tt.xoff)
		}
	}
}

// TestBurstDefaultBelowXoff: whatever XOFF and Segment, the default burst
// is below XOFF and holds at least one segment.
func TestBurstDefaultBelowXoff(t *testing.T) {
	for xoff := 2 * MinSegment; xoff <= 64*MiB; xoff = xoff*3/2 + 1 {
		for _, seg := range []units.Bytes{0, MinSegment, 64 * KiB, 128 * KiB, 256 * KiB, 1 * MiB, xoff - 1} {
			for _, line := range []units.BitRate{0, 100 * Gbps, 400 * Gbps, 1600 * Gbps} {
				burstDefaultBelowXoff(t, xoff, seg, line)
			}
		}
	}
}

func burstDefaultBelowXoff(t *testing.T, xoff, seg units.Bytes, line units.BitRate) {
	t.Helper()
	p, err := New(Config{Rate: 100 * Gbps, PFCXoff: xoff, Segment: seg, LineRate: line})
	if seg >= xoff || (seg != 0 && seg < MinSegment) {
		if err == nil {
			t.Errorf("New(PFCXoff %v, Segment %v) succeeded, want an error", xoff, seg)
		}
		return
	}
	if err != nil {
		t.Errorf("New(PFCXoff %v, Segment %v, LineRate %v) = %v", xoff, seg, line, err)
		return
	}
	if p.Burst() >= xoff || p.Burst() < p.Segment() || p.Segment() < MinSegment {
		t.Errorf("New(PFCXoff %v, Segment %v, LineRate %v): Burst %v, Segment %v; want Segment <= Burst < XOFF", xoff, seg, line, p.Burst(), p.Segment())
	}
	// A default segment scaled up for a fast line never deepens the
	// default bucket past min(XOFF/2, DefaultBurstSegments segments).
	if seg == 0 && p.Burst() > max(min(xoff/2, DefaultBurstSegments*autoSegment(line)), MinSegment) {
		t.Errorf("New(PFCXoff %v, LineRate %v): default Burst %v is deeper than min(XOFF/2, %d segments)", xoff, line, p.Burst(), DefaultBurstSegments)
	}
	portLine := line
	if portLine == 0 {
		portLine = 100 * Gbps
	}
	q, err := NewPort(PortConfig{LineRate: portLine, PFCXoff: xoff, Segment: seg})
	if err != nil || q.Burst() != p.Burst() {
		t.Errorf("NewPort(PFCXoff %v, Segment %v, LineRate %v) = Burst %v, %v; want the Pacer's %v", xoff, seg, portLine, q.Burst(), err, p.Burst())
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Rate: -1}, "pacing: Config.Rate -1bps is out of range (valid: > 0, or 0 for unlimited)"},
		{Config{PFCXoff: -1}, "pacing: Config.PFCXoff -1B is out of range (valid: >= 8KiB, or 0 for the default 1MiB)"},
		{Config{PFCXoff: 8*KiB - 1}, "pacing: Config.PFCXoff 8191B is out of range (valid: >= 8KiB, or 0 for the default 1MiB)"},
		{Config{Burst: 1 * MiB}, "pacing: Config.Burst 1MiB is out of range (valid: 4KiB up to but not including PFCXoff 1MiB, or 0 for the default): a bucket as deep as XOFF lets pacing alone fill a switch queue to PAUSE"},
		{Config{Burst: 2 * MiB, PFCXoff: 1 * MiB}, "pacing: Config.Burst 2MiB is out of range (valid: 4KiB up to but not including PFCXoff 1MiB, or 0 for the default): a bucket as deep as XOFF lets pacing alone fill a switch queue to PAUSE"},
		{Config{Burst: 4095}, "pacing: Config.Burst 4095B is out of range (valid: 4KiB up to but not including PFCXoff 1MiB, or 0 for the default): a bucket as deep as XOFF lets pacing alone fill a switch queue to PAUSE"},
		{Config{Burst: -4}, "pacing: Config.Burst -4B is out of range..."},
		{Config{Segment: 1000}, "pacing: Config.Segment 1000B is out of range (valid: 4KiB..Burst, or 0 for the default 128KiB)"},
		{Config{Segment: -1}, "pacing: Config.Segment -1B is out of range (valid: 4KiB..Burst, or 0 for the default 128KiB)"},
		{Config{Burst: 256 * KiB, Segment: 512 * KiB}, "pacing: Config.Segment 512KiB exceeds Burst 256KiB (valid: 4KiB..Burst, or 0 for the default 128KiB)"},
		{Config{Burst: 2 * units.GiB, PFCXoff: units.MaxBytes}, "pacing: Config.Burst 2GiB is out of range (valid: 4KiB..1GiB, below PFCXoff, or 0 for the default)"},
		{Config{Segment: 2 * units.GiB, PFCXoff: units.MaxBytes}, "pacing: Config.Segment 2GiB is out of range (valid: 4KiB..1GiB, at most Burst and below PFCXoff, or 0 for the default 128KiB)"},
		{Config{Segment: 1 * MiB}, "pacing: Config.Segment 1MiB is not below PFCXoff 1MiB (valid: 4KiB up to but not including PFCXoff, or 0 for the default 128KiB)"},
		{Config{LineRate: -1}, "pacing: Config.LineRate -1bps is out of range (valid: > 0, or 0 for at most 100Gbps)"},
	} {
		_, err := New(tt.cfg)
		if err == nil {
			t.Errorf("New(%+v) succeeded, want %q", tt.cfg, tt.want)
			continue
		}
		if prefix, ok := strings.CutSuffix(tt.want, "..."); ok {
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("New(%+v) = %q, want prefix %q", tt.cfg, err, prefix)
			}
		} else if err.Error() != tt.want {
			t.Errorf("New(%+v) = %q, want %q", tt.cfg, err, tt.want)
		}
	}
}

// testRand returns a seeded generator; TEST_SEED overrides the seed, which
// is logged so that a failure can be replayed.
func testRand(tb testing.TB) *rand.Rand {
	tb.Helper()
	seed := uint64(1)
	if s := os.Getenv("TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			tb.Fatalf("TEST_SEED=%q: %v", s, err)
		}
		seed = v
	}
	tb.Logf("TEST_SEED=%d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// TestPacerConformance drives a pacer as a compliant sender (it sends n
// only when Budget holds n, at NextSend or later) and checks the token
// bucket bound over every window of sends: bytes sent in [ti, tj] <= Burst
// + Rate*(tj-ti), up to the documented 1/1024 byte per send.
func TestPacerConformance(t *testing.T) {
	rng := testRand(t)
	for _, r := range []units.BitRate{400 * Gbps, 100 * Gbps, 25 * Gbps, 1 * Gbps, 10 * units.Mbps, 1234567} {
		p := mustNew(t, Config{Rate: r, Burst: 256 * KiB, Segment: 16 * KiB})
		type send struct {
			at vtime.Time
			n  units.Bytes
		}
		var log []send
		now := t0
		for range 1500 {
			n := 1 + units.Bytes(rng.Int64N(int64(p.Burst())))
			if rng.IntN(2) == 0 {
				n = p.Segment()
			}
			at := p.NextSend(now, n)
			if at < now {
				t.Fatalf("rate %v: NextSend(%v, %v) = %v, before now", r, now, n, at)
			}
			if rng.IntN(4) == 0 { // a late timer
				at += vtime.Time(rng.Int64N(int64(r.TxTime(p.Burst())) + 1))
			}
			if b := p.Budget(at); b < n {
				t.Fatalf("rate %v: Budget(NextSend(%v, %v) = %v) = %v, want >= n", r, now, n, at, b)
			}
			p.OnSent(at, n)
			log = append(log, send{at, n})
			now = at
		}
		bytesPerNs := float64(r) / 8e9
		for i := range log {
			var sum float64
			for j := i; j < len(log); j++ {
				sum += float64(log[j].n)
				bound := float64(p.Burst()) + bytesPerNs*float64(log[j].at-log[i].at) + float64(j-i+1)/1024 + 1e-6
				if sum > bound {
					t.Fatalf("rate %v: sends %d..%d carry %.0f bytes in %v, more than Burst + Rate*T = %.3f",
						r, i, j, sum, log[j].at.Sub(log[i].at), bound)
				}
			}
		}
	}
}

// TestPacerGreedyRate: a sender that sends a segment at every NextSend
// achieves the rate, losing at most a nanosecond of rounding per segment.
func TestPacerGreedyRate(t *testing.T) {
	for _, r := range []units.BitRate{400 * Gbps, 100 * Gbps, 25 * Gbps, 3 * Gbps} {
		p := mustNew(t, Config{Rate: r, Burst: 256 * KiB, Segment: 64 * KiB})
		now, total := t0, units.Bytes(0)
		const k = 10000
		for range k {
			now = p.NextSend(now, 64*KiB)
			p.OnSent(now, 64*KiB)
			total += 64 * KiB
		}
		ideal := r.TxTime(total - p.Burst())
		if got := now.Sub(t0); got < ideal-time.Nanosecond || got > ideal+k*time.Nanosecond {
			t.Errorf("rate %v: %d segments took %v, want %v (+ at most %d ns of rounding)", r, k, got, ideal, k)
		}
	}
}

// TestNextSendExact checks, on replicas driven through the same random
// history, that NextSend(now, n) is the earliest nanosecond at which
// Budget holds n.
func TestNextSendExact(t *testing.T) {
	rng := testRand(t)
	for trial := range 300 {
		r := units.BitRate(1 + rng.Int64N(int64(800*Gbps)))
		if trial%3 == 0 {
			r = []units.BitRate{100 * Gbps, 25 * Gbps, 7, 1}[trial%4]
		}
		cfg := Config{Rate: r, Burst: 256 * KiB, Segment: 64 * KiB}
		var hist []op
		now := t0
		for range rng.IntN(6) {
			now += vtime.Time(rng.Int64N(20000))
			hist = append(hist, sent(now, units.Bytes(rng.Int64N(int64(400*KiB)))))
		}
		replay := func() *Pacer {
			p := mustNew(t, cfg)
			run(t, p, hist)
			return p
		}
		n := 1 + units.Bytes(rng.Int64N(int64(256*KiB)))
		got := replay().NextSend(now, n)
		if got == vtime.Never {
			continue
		}
		if b := replay().Budget(got); b < n {
			t.Fatalf("rate %v, history %v: Budget(NextSend(%v, %v) = %v) = %v, want >= n", r, hist, now, n, got, b)
		}
		if got > now {
			if b := replay().Budget(got - 1); b >= n {
				t.Fatalf("rate %v, history %v: NextSend(%v, %v) = %v, but Budget a nanosecond earlier is already %v", r, hist, now, n, got, b)
			}
		}
	}
}

// checkInvariants exercises every method at now and checks the results'
// ranges; it is shared by the overflow test and fuzz target.
func checkInvariants(t *testing.T, p *Pacer, now vtime.Time, n units.Bytes, r units.BitRate) {
	t.Helper()
	p.SetRate(now, r)
	b := p.Budget(now)
	if p.Rate() == units.Unlimited {
		if b != units.MaxBytes {
			t.Fatalf("unpaced Budget(%d) = %d, want MaxBytes", now, b)
		}
	} else if b < 0 || b > p.Burst() {
		t.Fatalf("rate %v: Budget(%d) = %d, outside [0, %d]", r, now, b, p.Burst())
	}
	next := p.NextSend(now, n)
	if next == 0 || (next < now && now >= vtime.Epoch) {
		t.Fatalf("rate %v: NextSend(%d, %d) = %d", r, now, n, next)
	}
	p.OnSent(now, n)
	if b := p.Budget(now); b < 0 {
		t.Fatalf("Budget after OnSent(%d) = %d", n, b)
	}
}

// TestPacerNoOverflows throws huge and random times, rates and sizes at a
// pacer (quic-go's TestPacerNoOverflows).
func TestPacerNoOverflows(t *testing.T) {
	rng := testRand(t)
	p := mustNew(t, cfg100)
	extremes := []int64{1, 2, 1 << 62, 1<<63 - 2, 1<<63 - 1}
	for i := range 20000 {
		now := vtime.Time(rng.Int64())
		if i%5 == 0 {
			now = vtime.Time(extremes[rng.IntN(len(extremes))])
		}
		r := units.BitRate(rng.Int64())
		switch i % 4 {
		case 0:
			r = units.Unlimited
		case 1:
			r = units.BitRate(rng.Int64N(1000))
		}
		n := units.Bytes(rng.Int64())
		if i%3 == 0 {
			n = units.Bytes(rng.Int64N(int64(MiB)))
		}
		checkInvariants(t, p, now, n, r)
	}
}

func FuzzPacerNoOverflows(f *testing.F) {
	f.Add(int64(t0), int64(100*Gbps), int64(64*KiB), int64(1000), int64(1*MiB))
	f.Add(int64(1<<63-1), int64(units.Unlimited), int64(1<<62), int64(-5), int64(0))
	f.Add(int64(1), int64(1), int64(1), int64(1<<63-1), int64(1<<63-1))
	f.Add(int64(-100), int64(0), int64(-1), int64(7), int64(12345))
	f.Fuzz(func(t *testing.T, now, r, n, dt, n2 int64) {
		p := mustNew(t, cfg100)
		checkInvariants(t, p, vtime.Time(now), units.Bytes(n), units.BitRate(max(r, 0)))
		later := vtime.Time(now) + vtime.Time(dt) // may wrap: a backward jump
		checkInvariants(t, p, later, units.Bytes(n2), units.BitRate(max(r/3, 0)))
	})
}

func TestPacerNoAllocs(t *testing.T) {
	p := mustNew(t, cfg100)
	now := t0
	var sinkB units.Bytes
	var sinkT vtime.Time
	for name, f := range map[string]func(){
		"Budget": func() { now += 1000; sinkB = p.Budget(now) },
		"OnSent": func() { now += 1000; p.OnSent(now, 16*KiB) },
		"overshoot": func() {
			now += 1000
			p.OnSent(now, 1*MiB) // drain and debt
		},
		"NextSend": func() { now += 1000; sinkT = p.NextSend(now, 64*KiB) },
		"SetRate":  func() { now += 1000; p.SetRate(now, units.BitRate(now%7+1)*10*Gbps) },
		"SetRate unlimited": func() {
			now += 1000
			p.SetRate(now, units.Unlimited)
			p.SetRate(now+1, 100*Gbps)
		},
		"loop": func() {
			now = p.NextSend(now, 64*KiB)
			p.OnSent(now, 64*KiB)
		},
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s allocates %v times per call, want 0", name, a)
		}
	}
	_, _ = sinkB, sinkT
}

// TestRefillMatchesNextSend checks Refill against NextSend: after a Budget
// reading b, a send of s > b bytes (s <= Burst) can go at now + Refill(s-b)
// and not earlier than NextSend says. Budget truncates the bucket's
// fractional byte, so Refill may be late by less than one byte's refill
// time (plus the nanosecond of rounding up): 0.02 ns at 400 Gb/s, 2.7 µs
// at 3 Mb/s.
func TestRefillMatchesNextSend(t *testing.T) {
	for _, r := range []units.BitRate{units.Gbps, 25 * units.Gbps, 400 * units.Gbps, 3 * units.Mbps} {
		p, err := New(Config{Rate: r, Burst: 256 * units.KiB, PFCXoff: units.MiB})
		if err != nil {
			t.Fatal(err)
		}
		now := vtime.Epoch.Add(time.Millisecond)
		p.OnSent(now, 256*units.KiB) // empty the bucket
		for _, d := range []time.Duration{0, 137 * time.Nanosecond, 3 * time.Microsecond} {
			at := now.Add(d)
			b := p.Budget(at)
			for _, s := range []units.Bytes{b + 1, b + 4096, b + 100*units.KiB} {
				got, want := at.Add(p.Refill(s-b)), p.NextSend(at, s)
				if diff := got.Sub(want); diff < 0 || diff > r.TxTime(1)+time.Nanosecond {
					t.Errorf("rate %v, budget %v at +%v: now+Refill(%v) = %v, NextSend = %v", r, b, d, s-b, got, want)
				}
			}
		}
	}
	var zero Pacer
	if d := zero.Refill(units.MiB); d != 0 {
		t.Errorf("unpaced Refill = %v, want 0", d)
	}
}
