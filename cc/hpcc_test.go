package cc

import (
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// hop100 is an INT stamp of a 100 Gb/s egress port.
func hop100(ts vtime.Time, tx, qlen units.Bytes) INTHop {
	return INTHop{QLen: qlen, TxBytes: tx, TS: ts, Rate: 100 * units.Gbps}
}

// intAck is an ACK carrying the given hop stamps.
func intAck(now vtime.Time, acked, inflight units.Bytes, hops ...INTHop) Ack {
	a := Ack{Now: now, Acked: acked, RTT: usd(10), InFlight: inflight, NHops: len(hops)}
	copy(a.Hops[:], hops)
	return a
}

// On path100G (100 Gb/s, T = 10 µs) B·T is 125000 bytes: W_init.
const wInit = 125000.0

// TestHPCCTable checks Li et al. Algorithm 1 with hand-computed values:
// per-hop u = qlen/(B·T) + txRate/B from consecutive stamps, the EWMA
// U = (1 − τ/T)U + (τ/T)u, and W = Wc/(U/η) + W_AI (U ≥ η or incStage ≥
// maxStage) else Wc + W_AI, with Wc updated only once per RTT (acked bytes
// past the send mark of the previous update).
func TestHPCCTable(t *testing.T) {
	h, err := NewHPCC(HPCCConfig{Eta: 0.95, MaxStage: 2, WAI: 1000, MinWindow: 1000}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Window(); got != units.Bytes(wInit) {
		t.Fatalf("initial Window() = %v, want W_init %v", got, wInit)
	}
	const (
		w2 = wInit/(1.1/0.95) + 1000 // U = 1.1 ≥ η: multiplicative, Wc ← w2
		w3 = w2 + 1000               // fast reaction, U = 0.8 < η: Wc + W_AI, Wc stays w2
		w4 = w2 + 1000               // update, U = 0.5: additive, Wc ← w4, stage 1
		w5 = w4 + 1000               // update: additive, stage 2
		w6 = wInit                   // stage 2 ≥ maxStage: Wc/(0.5/0.95) + 1000 > W_init: capped
	)
	steps := []struct {
		ack      Ack
		w, wc, u float64
		stage    int
		note     string
	}{
		// First telemetry: record the stamps (qlen 12500 B), hold; send mark = 4096 + 0.
		{intAck(us(100), 4096, 0, hop100(us(100), 0, 12500)), wInit, wInit, 1, 0, "first INT: hold"},
		// 10 µs later, 125000 B more sent (100 Gb/s → 1.0), queue 12500 B both times (0.1):
		// u = 1.1, τ = T so U = 1.1. Acked 8192 > 4096: update. Mark = 8192 + 8192.
		{intAck(us(110), 4096, 8192, hop100(us(110), 125000, 12500)), w2, w2, 1.1, 0, "update, U ≥ η"},
		// 5 µs, 31250 B (50 Gb/s → 0.5), queue min(0, 12500) = 0: u = 0.5; U = ½·1.1 + ½·0.5.
		// Acked 12288 ≤ 16384: fast reaction only.
		{intAck(us(115), 4096, 8192, hop100(us(115), 156250, 0)), w3, w2, 0.8, 0, "fast reaction"},
		// 10 µs at 50 Gb/s: u = 0.5, U = 0.5. Acked 20480 > 16384: update. Mark = 28672.
		{intAck(us(125), 8192, 8192, hop100(us(125), 218750, 0)), w4, w4, 0.5, 1, "update, additive"},
		// Acked 32768 > 28672: update. Mark = 40960.
		{intAck(us(135), 12288, 8192, hop100(us(135), 281250, 0)), w5, w5, 0.5, 2, "update, additive"},
		// Acked 45056 > 40960, incStage = maxStage: multiplicative (an increase here), capped.
		{intAck(us(145), 12288, 8192, hop100(us(145), 343750, 0)), w6, w6, 0.5, 0, "update, maxStage reached"},
		// No telemetry: hold.
		{Ack{Now: us(150), Acked: 4096, RTT: usd(10)}, w6, w6, 0.5, 0, "no INT: hold"},
	}
	for i, s := range steps {
		h.OnAck(s.ack)
		if !near(h.w, s.w) {
			t.Errorf("step %d (%s): W = %.6f, want %.6f", i, s.note, h.w, s.w)
		}
		if !near(h.wc, s.wc) {
			t.Errorf("step %d (%s): Wc = %.6f, want %.6f", i, s.note, h.wc, s.wc)
		}
		if !near(h.U(), s.u) {
			t.Errorf("step %d (%s): U = %.12f, want %.12f", i, s.note, h.U(), s.u)
		}
		if h.incStage != s.stage {
			t.Errorf("step %d (%s): incStage = %d, want %d", i, s.note, h.incStage, s.stage)
		}
		if got, want := h.Window(), bytesOf(s.w); got != want {
			t.Errorf("step %d (%s): Window() = %v, want %v", i, s.note, got, want)
		}
		// Rate = W/T = W · 8 / 10 µs.
		if got, want := h.Rate(), rateOf(s.w*8/10e-6); got < want-1 || got > want+1 {
			t.Errorf("step %d (%s): Rate() = %v, want W/T = %v", i, s.note, got, want)
		}
	}
}

// TestHPCCWindowFromUtilisation builds INT stamps that give a known U over
// one full T and checks the window: W_init/(U/η) + W_AI when U ≥ η, else
// W_init + W_AI, capped at W_init.
func TestHPCCWindowFromUtilisation(t *testing.T) {
	tests := []struct {
		name    string
		tx      units.Bytes // bytes sent in T
		q1, q2  units.Bytes // queue in the two stamps: u uses the smaller
		u, want float64
	}{
		{"idle", 0, 0, 0, 0, wInit},                                          // W_init + W_AI, capped
		{"half", 62500, 0, 0, 0.5, wInit},                                    // below η: additive, capped
		{"eta", 118750, 0, 0, 0.95, wInit},                                   // U = η: W_init/1 + W_AI, capped
		{"full", 125000, 0, 0, 1, wInit*0.95 + 1000},                         // txRate = B
		{"full+queue", 125000, 25000, 25000, 1.2, wInit*0.95/1.2 + 1000},     // qlen/(B·T) = 0.2
		{"double", 250000, 0, 0, 2, wInit*0.95/2 + 1000},                     // 200 Gb/s into a 100 Gb/s port
		{"queue only", 0, 375000, 375000, 3, wInit*0.95/3 + 1000},            // 3 BDPs queued, link idle
		{"queue building", 125000, 0, 50000, 1, wInit*0.95 + 1000},           // min(0, 50000) = 0
		{"queue draining", 125000, 50000, 25000, 1.2, wInit*0.95/1.2 + 1000}, // min(50000, 25000)
	}
	for _, tt := range tests {
		h, err := NewHPCC(HPCCConfig{WAI: 1000}, path100G)
		if err != nil {
			t.Fatal(err)
		}
		h.OnAck(intAck(us(100), 4096, 0, hop100(us(100), 1<<30, tt.q1)))
		h.OnAck(intAck(us(110), 4096, 0, hop100(us(110), 1<<30+tt.tx, tt.q2)))
		if !near(h.U(), tt.u) {
			t.Errorf("%s: U = %v, want %v", tt.name, h.U(), tt.u)
		}
		if !near(h.w, tt.want) {
			t.Errorf("%s: W = %v, want %v", tt.name, h.w, tt.want)
		}
	}
}

// TestHPCCMaxHop: with several hops the most utilised one drives U, with
// its own τ.
func TestHPCCMaxHop(t *testing.T) {
	h, err := NewHPCC(HPCCConfig{WAI: 1000}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	h.OnAck(intAck(us(100), 4096, 0, hop100(us(100), 0, 0), hop100(us(101), 0, 0)))
	// Hop 0: 10 µs at 60 Gb/s → 0.6. Hop 1: 5 µs at 120 Gb/s → 1.2, τ = 5 µs.
	h.OnAck(intAck(us(110), 4096, 0, hop100(us(110), 75000, 0), hop100(us(106), 75000, 0)))
	wantU := 0.5*1 + 0.5*1.2 // U starts at 1
	if !near(h.U(), wantU) {
		t.Errorf("U = %v, want %v (hop 1, τ = T/2)", h.U(), wantU)
	}
	if want := wInit*0.95/wantU + 1000; !near(h.w, want) {
		t.Errorf("W = %v, want %v", h.w, want)
	}
}

// TestHPCCTauClamp: a gap longer than T counts as T (τ = min(τ, T)), so
// U becomes the new sample.
func TestHPCCTauClamp(t *testing.T) {
	h, err := NewHPCC(HPCCConfig{WAI: 1000}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	h.OnAck(intAck(us(100), 4096, 0, hop100(us(100), 0, 0)))
	h.OnAck(intAck(us(130), 4096, 0, hop100(us(130), 375000, 0))) // 30 µs at 100 Gb/s: u = 1
	if !near(h.U(), 1) {
		t.Errorf("U = %v, want 1 (τ clamped to T)", h.U())
	}
	h.OnAck(intAck(us(160), 4096, 0, hop100(us(160), 375000+187500, 0))) // 50 Gb/s: u = 0.5
	if !near(h.U(), 0.5) {
		t.Errorf("U = %v, want 0.5 (τ clamped to T)", h.U())
	}
}

// TestHPCCSendMark: when the driver reports sends, the once-per-RTT mark
// is the cumulative sent bytes.
func TestHPCCSendMark(t *testing.T) {
	h, err := NewHPCC(HPCCConfig{WAI: 1000, MaxStage: 1}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	h.OnSend(Sent{Now: us(1), Bytes: 100000})
	h.OnAck(intAck(us(100), 50000, 0, hop100(us(100), 0, 0))) // mark = 100000 sent
	h.OnAck(intAck(us(110), 40000, 0, hop100(us(110), 62500, 0)))
	if h.updates != 0 {
		t.Errorf("acked 90000 ≤ sent mark 100000: %d updates, want 0 (fast reaction)", h.updates)
	}
	h.OnAck(intAck(us(120), 20000, 0, hop100(us(120), 125000, 0)))
	if h.updates != 1 {
		t.Errorf("acked 110000 > mark 100000: %d updates, want 1", h.updates)
	}
}

// TestHPCCHolds: no telemetry, stale stamps, a new route and lossy events
// leave the window alone.
func TestHPCCHolds(t *testing.T) {
	h, err := NewHPCC(HPCCConfig{}, path100G)
	if err != nil {
		t.Fatal(err)
	}
	w := h.Window()
	h.OnAck(Ack{Now: us(1), Acked: 4096, RTT: usd(10)})
	h.OnLoss(Loss{Now: us(2), Lost: 4096})
	h.OnTimeout(us(3))
	h.OnCNP(CNP{Now: us(4), Count: 10})
	h.OnAck(intAck(us(100), 4096, 0, hop100(us(100), 0, 0)))
	h.OnAck(intAck(us(110), 4096, 0, hop100(us(100), 1e6, 1e6)))                        // same timestamp: unusable
	h.OnAck(intAck(us(120), 4096, 0, hop100(us(120), 0, 1e6), hop100(us(120), 0, 1e6))) // new route: re-seed
	if got := h.Window(); got != w {
		t.Errorf("Window() = %v, want unchanged %v", got, w)
	}
	if got := h.Deadline(); got != 0 {
		t.Errorf("Deadline() = %v, want 0", got)
	}
}

// TestHPCCWindowFloor: the default floor is one MTU, however small
// MinRate × T is (100 Mb/s × 10 µs = 125 B); a rate floor above one MTU
// wins; AI and MinRate are the rate forms of WAI and MinWindow (HPCC ns-3
// RATE_AI, MIN_RATE), and giving both forms is an error.
func TestHPCCWindowFloor(t *testing.T) {
	for _, tc := range []struct {
		p           Params
		minWin, wai units.Bytes
		wantErr     string
	}{
		{Params{}, 4096, 50, ""},
		{Params{"min_rate": "10Gbps"}, 12500, 50, ""},
		{Params{"min_rate": "1Mbps", "ai": "800Mbps"}, 4096, 1000, ""},
		{Params{"min_window": "100"}, 100, 50, ""},
		{Params{"min_window": "100", "min_rate": "1Gbps"}, 0, 0, "MinWindow"},
		{Params{"wai": "100", "ai": "1Gbps"}, 0, 0, "WAI"},
	} {
		a, err := New("hpcc", tc.p, path100G)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New(hpcc, %v) = %v, want an error naming %s", tc.p, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("New(hpcc, %v) = %v", tc.p, err)
		}
		c := a.(*HPCC).Config()
		if c.MinWindow != tc.minWin || c.WAI != tc.wai {
			t.Errorf("New(hpcc, %v): MinWindow %v, WAI %v; want %v, %v", tc.p, c.MinWindow, c.WAI, tc.minWin, tc.wai)
		}
	}
	// A path whose BDP is below one MTU keeps MinWindow ≤ MaxWindow.
	small := PathInfo{LineRate: units.Gbps, BaseRTT: time.Microsecond, MTU: 4096}
	h, err := NewHPCC(HPCCConfig{}, small)
	if err != nil {
		t.Fatal(err)
	}
	if c := h.Config(); c.MinWindow != c.MaxWindow || c.MaxWindow != 125 {
		t.Errorf("1 Gb/s × 1 µs path: MinWindow %v, MaxWindow %v; want both 125B", c.MinWindow, c.MaxWindow)
	}
}
