package cc

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// robustCases are the algorithms the overflow tests drive: every
// registered one with defaults, plus configurations at the edges.
func robustCases(t testing.TB) []func() Algorithm {
	t.Helper()
	var cs []func() Algorithm
	for _, name := range Names() {
		name := name
		cs = append(cs, func() Algorithm { return mustAlg(t, name, path100G) })
	}
	cs = append(cs,
		func() Algorithm { // every CNP cuts; nanosecond timers; 1-byte counter; tiny g
			d, err := NewDCQCN(DCQCNConfig{G: 1e-9, RateDecreaseInterval: -1, AlphaTimer: 1, RateIncreaseTimer: 1, ByteCounter: 1, InitAlpha: -1}, path100G)
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		func() Algorithm {
			d, err := NewDCQCN(DCQCNConfig{G: 0.999, HAI: -1, F: 1000, MinRate: 100 * units.Gbps, Window: 4096}, path100G)
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		func() Algorithm {
			m, err := NewTimely(TimelyConfig{EWMA: 1, TLow: -1, THigh: 1, Beta: 1, MinRTT: 1, HAIThreshold: 1, HAIFactor: 1000}, path100G)
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
		func() Algorithm {
			s, err := NewSwift(SwiftConfig{AI: 1000, Beta: 1, MaxMDF: 0.999999, FSRange: -1, HopScale: -1, MinWindow: 1, InitWindow: 1, RetxResetThreshold: 1}, path100G)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		func() Algorithm {
			h, err := NewHPCC(HPCCConfig{MaxStage: -1, Eta: 1e-9, T: 1, WAI: 1, MinWindow: 1}, path100G)
			if err != nil {
				t.Fatal(err)
			}
			return h
		},
		func() Algorithm { // a 1 bit/s, 1 ns, 1-byte-MTU path
			return mustAlg(t, "swift", PathInfo{LineRate: 1, BaseRTT: 1, MTU: 1})
		},
		func() Algorithm { // an exabit, 10 s path
			return mustAlg(t, "dcqcn", PathInfo{LineRate: 1e18, BaseRTT: 10 * time.Second, MTU: 1 << 20, Hops: 64})
		},
	)
	return cs
}

// opGen produces events with hostile values.
type opGen struct {
	r   *rand.Rand
	now vtime.Time
}

func (g *opGen) time() vtime.Time {
	switch g.r.IntN(12) {
	case 0:
		return 0
	case 1:
		return vtime.Never
	case 2:
		return vtime.Time(-g.r.Int64()) // before the epoch
	case 3:
		return g.now - vtime.Time(g.r.Int64N(int64(time.Millisecond))) // backwards
	case 4:
		g.now = vtime.Time(g.r.Int64()) // a jump anywhere
		return g.now
	case 5:
		return g.now // same instant
	}
	if g.now < vtime.Never-vtime.Time(time.Second) {
		g.now += vtime.Time(g.r.Int64N(int64(100 * time.Microsecond)))
	}
	return g.now
}

func (g *opGen) bytes() units.Bytes {
	switch g.r.IntN(8) {
	case 0:
		return 0
	case 1:
		return -units.Bytes(g.r.Int64())
	case 2:
		return units.MaxBytes
	case 3:
		return units.Bytes(g.r.Int64())
	}
	return units.Bytes(g.r.Int64N(1 << 20))
}

func (g *opGen) dur() time.Duration {
	switch g.r.IntN(8) {
	case 0:
		return 0
	case 1:
		return -time.Duration(g.r.Int64())
	case 2:
		return time.Duration(math.MaxInt64)
	case 3:
		return 1
	}
	return time.Duration(g.r.Int64N(int64(time.Millisecond)))
}

func (g *opGen) ack() Ack {
	a := Ack{Now: g.time(), Acked: g.bytes(), RTT: g.dur(), InFlight: g.bytes(), ECNMarked: g.bytes()}
	switch g.r.IntN(6) {
	case 0:
		a.NHops = -1
	case 1:
		a.NHops = MaxHops + 1 + g.r.IntN(100)
	default:
		a.NHops = g.r.IntN(MaxHops + 1)
	}
	for i := range a.Hops {
		a.Hops[i] = INTHop{QLen: g.bytes(), TxBytes: g.bytes(), TS: g.time(), Rate: units.BitRate(g.bytes())}
	}
	return a
}

// step applies one random event.
func (g *opGen) step(a Algorithm) {
	switch g.r.IntN(7) {
	case 0:
		a.OnSend(Sent{Now: g.time(), Bytes: g.bytes(), InFlight: g.bytes()})
	case 1, 2:
		a.OnAck(g.ack())
	case 3:
		c := CNP{Now: g.time(), Count: g.r.IntN(4)}
		switch g.r.IntN(4) {
		case 0:
			c.Count = -g.r.Int()
		case 1:
			c.Count = math.MaxInt
		}
		a.OnCNP(c)
	case 4:
		a.OnLoss(Loss{Now: g.time(), Lost: g.bytes()})
	case 5:
		a.OnTimeout(g.time())
	default:
		if d := a.Deadline(); d != 0 && g.r.IntN(2) == 0 {
			a.OnTimer(d)
		} else {
			a.OnTimer(g.time())
		}
	}
}

// checkInvariants fails if a reports a non-positive window or rate, NaN
// state, or a deadline that is already due (all due timers ran).
func checkInvariants(t testing.TB, a Algorithm, latest vtime.Time, what string) {
	t.Helper()
	if w := a.Window(); w < 1 {
		t.Fatalf("%s: %s Window() = %d, want >= 1", what, a.Name(), w)
	}
	if r := a.Rate(); r < 1 {
		t.Fatalf("%s: %s Rate() = %d, want >= 1", what, a.Name(), r)
	}
	if d := a.Deadline(); d != 0 && d <= latest && d != vtime.Never {
		t.Fatalf("%s: %s Deadline() = %v, not after the latest event %v", what, a.Name(), d, latest)
	}
	if s, ok := a.(Stater); ok {
		for k, v := range s.State() {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%s: %s State()[%q] = %v", what, a.Name(), k, v)
			}
		}
	}
	if d, ok := a.(*DCQCN); ok {
		if !(d.rc >= d.minRate && d.rc <= d.rt && d.rt <= d.line) || d.alpha < 0 || d.alpha > 1 {
			t.Fatalf("%s: dcqcn Rc %v, Rt %v, α %v outside MinRate ≤ Rc ≤ Rt ≤ line, 0 ≤ α ≤ 1", what, d.rc, d.rt, d.alpha)
		}
		if dl := d.Deadline(); dl != 0 && dl <= d.now && dl != vtime.Never {
			t.Fatalf("%s: dcqcn Deadline() = %v, not after its latest event %v", what, dl, d.now)
		}
	}
}

// TestNoOverflows throws huge, zero, negative and backwards values at every
// algorithm (quic-go TestPacerNoOverflows): nothing may panic, loop
// forever, or report a non-positive window or rate.
func TestNoOverflows(t *testing.T) {
	seed := testSeed(t)
	n := 3000
	if testing.Short() {
		n = 300
	}
	for ci, mk := range robustCases(t) {
		a := mk()
		g := &opGen{r: rand.New(rand.NewPCG(seed, uint64(ci))), now: us(1)}
		for range n {
			g.step(a)
			checkInvariants(t, a, 0, "random events")
		}
	}
}

// TestDeadlineAfterEvents: after an event at now, no pending deadline is
// at or before now (every event runs the timers due).
func TestDeadlineAfterEvents(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 7))
	d, err := NewDCQCN(DCQCNConfig{AlphaTimer: usd(3), RateIncreaseTimer: usd(5), RateDecreaseInterval: usd(4), ByteCounter: 64 * units.KiB}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	now := us(1)
	for range 50000 {
		now += vtime.Time(r.Int64N(int64(20 * time.Microsecond)))
		switch r.IntN(4) {
		case 0:
			d.OnCNP(CNP{Now: now, Count: 1 + r.IntN(3)})
		case 1:
			d.OnSend(Sent{Now: now, Bytes: units.Bytes(r.IntN(256 << 10))})
		case 2:
			d.OnAck(Ack{Now: now})
		default:
			d.OnTimer(now)
		}
		checkInvariants(t, d, now, "event")
	}
}

// TestDefaultsValidOnAnyPath: the defaults validate on every valid path,
// from 1 bit/s and 1 ns to an exabit and 10 s.
func TestDefaultsValidOnAnyPath(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 3))
	paths := []PathInfo{
		{LineRate: 1, BaseRTT: 1},
		{LineRate: 1, BaseRTT: maxBaseRTT, MTU: 1, Hops: 64},
		{LineRate: 1e18, BaseRTT: 1, MTU: 1 << 20},
		{LineRate: 1e18, BaseRTT: maxBaseRTT},
		{LineRate: units.Unlimited - 1, BaseRTT: maxBaseRTT},
	}
	for range 200 {
		paths = append(paths, PathInfo{
			LineRate: units.BitRate(1 + r.Int64N(1e15)),
			BaseRTT:  time.Duration(1 + r.Int64N(int64(maxBaseRTT))),
			MTU:      units.Bytes(r.Int64N(1<<20 + 1)),
			Hops:     r.IntN(65),
		})
	}
	for _, p := range paths {
		for _, name := range Names() {
			a, err := New(name, nil, p)
			if err != nil {
				t.Errorf("New(%q, nil, %+v) = %v", name, p, err)
				continue
			}
			checkInvariants(t, a, 0, "fresh")
		}
	}
}

// FuzzEvents drives every algorithm with an event stream decoded from the
// fuzzer's bytes. Run with: go test -run ^$ -fuzz FuzzEvents ./cc/
func FuzzEvents(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3})
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 8 {
			return
		}
		seed := binary.LittleEndian.Uint64(data)
		for ci, mk := range robustCases(t) {
			a := mk()
			g := &opGen{r: rand.New(rand.NewPCG(seed, uint64(ci))), now: us(1)}
			for _, b := range data[8:] {
				for range int(b%8) + 1 {
					g.step(a)
				}
				checkInvariants(t, a, 0, "fuzz")
			}
		}
	})
}

// TestNoAllocs: no event or query allocates (netip TestNoAllocs).
func TestNoAllocs(t *testing.T) {
	for _, name := range Names() {
		a := mustAlg(t, name, path100G)
		var (
			now = us(1)
			tx  units.Bytes
			i   int
		)
		next := func() vtime.Time { now += vtime.Time(3 * time.Microsecond); i++; return now }
		ack := func() Ack {
			tx += 40000
			n := next()
			return intAck(n, 4096, 65536, hop100(n, tx, units.Bytes(i%7)*1000), hop100(n-1000, tx/2, 0))
		}
		calls := []struct {
			what string
			fn   func()
		}{
			{"OnSend", func() { a.OnSend(Sent{Now: next(), Bytes: 64 << 10, InFlight: 1 << 20}) }},
			{"OnAck", func() { ak := ack(); ak.RTT += time.Duration(i%5) * time.Microsecond; a.OnAck(ak) }},
			{"OnCNP", func() { a.OnCNP(CNP{Now: next(), Count: 1 + i%3}) }},
			{"OnLoss", func() { a.OnLoss(Loss{Now: next(), Lost: 4096}) }},
			{"OnTimeout", func() { a.OnTimeout(next()) }},
			{"OnTimer", func() { a.OnTimer(max(a.Deadline(), next())) }},
			{"Deadline", func() { sinkTime = a.Deadline() }},
			{"Window", func() { sinkBytes = a.Window() }},
			{"Rate", func() { sinkRate = a.Rate() }},
		}
		for _, c := range calls {
			if n := testing.AllocsPerRun(200, c.fn); n != 0 {
				t.Errorf("%s.%s allocates %v times per call, want 0", name, c.what, n)
			}
		}
	}
}

// Sinks keep benchmark and allocation-test results alive so the compiler
// cannot delete the work.
var (
	sinkRate  units.BitRate
	sinkBytes units.Bytes
	sinkTime  vtime.Time
)
