package pacing

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

func mustPort(t testing.TB, cfg PortConfig) *Port {
	t.Helper()
	p, err := NewPort(cfg)
	if err != nil {
		t.Fatalf("NewPort(%+v) = %v", cfg, err)
	}
	return p
}

func TestPortDefaults(t *testing.T) {
	p := mustPort(t, PortConfig{LineRate: 100 * Gbps})
	if p.Rate() != 100*Gbps || p.LineRate() != 100*Gbps || p.Burst() != 512*KiB {
		t.Errorf("NewPort(100Gbps): Rate %v, LineRate %v, Burst %v; want 100Gbps, 100Gbps, 512KiB", p.Rate(), p.LineRate(), p.Burst())
	}
	p = mustPort(t, PortConfig{LineRate: 100 * Gbps, Cap: 40 * Gbps, Burst: 128 * KiB, PFCXoff: 256 * KiB})
	if p.Rate() != 40*Gbps || p.Burst() != 128*KiB {
		t.Errorf("NewPort(cap 40Gbps, burst 128KiB): Rate %v, Burst %v", p.Rate(), p.Burst())
	}
}

func TestPortErrors(t *testing.T) {
	for _, tt := range []struct {
		cfg  PortConfig
		want string
	}{
		{PortConfig{}, "pacing: PortConfig.LineRate 0bps is out of range (valid: > 0, e.g. 100Gbps)"},
		{PortConfig{LineRate: -5}, "pacing: PortConfig.LineRate -5bps is out of range (valid: > 0, e.g. 100Gbps)"},
		{PortConfig{LineRate: 100 * Gbps, Cap: 200 * Gbps}, "pacing: PortConfig.Cap 200Gbps is out of range (valid: 1bps..LineRate 100Gbps, or 0 for LineRate)"},
		{PortConfig{LineRate: 100 * Gbps, Cap: -1}, "pacing: PortConfig.Cap -1bps is out of range (valid: 1bps..LineRate 100Gbps, or 0 for LineRate)"},
		{PortConfig{LineRate: 100 * Gbps, Burst: 2 * MiB}, "pacing: PortConfig.Burst 2MiB is out of range (valid: 4KiB up to but not including PFCXoff 1MiB, or 0 for the default): a bucket as deep as XOFF lets pacing alone fill a switch queue to PAUSE"},
		{PortConfig{LineRate: 100 * Gbps, PFCXoff: 1}, "pacing: PortConfig.PFCXoff 1B is out of range (valid: >= 8KiB, or 0 for the default 1MiB)"},
	} {
		_, err := NewPort(tt.cfg)
		if err == nil || err.Error() != tt.want {
			t.Errorf("NewPort(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

func TestPortSteps(t *testing.T) {
	p := mustPort(t, PortConfig{LineRate: 100 * Gbps, Burst: 256 * KiB, Segment: 64 * KiB})
	run(t, p, []op{
		budget(t0, 256*KiB),
		sent(t0, 256*KiB),
		next(t0, 64*KiB, at(5243)),
		setRate(at(5243), units.Unlimited), // clamped to line rate
		budget(at(5243), 65537),
		setRate(at(5243), 200*Gbps), // clamped too
		budget(at(10486), 65537+65537+1),
		setRate(at(10486), 50*Gbps),
		sent(at(10486), 1*MiB), // 131075 taken, 917501 owed at 6.25 B/ns: 146800.16 -> 146801 ns
		budget(at(10486+146800), 0),
		budget(at(10486+146801), 0),
		budget(at(10486+146802), 6),
	})
	if p.Rate() != 50*Gbps {
		t.Errorf("Rate() = %v, want 50Gbps", p.Rate())
	}
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "pacing: BUG: Port.SetRate") {
			t.Errorf("Port.SetRate(-1) recovered %v, want a pacing: BUG: panic", r)
		}
	}()
	p.SetRate(t0, -1)
}

func TestZeroPort(t *testing.T) {
	var p Port
	if p.Budget(t0) != units.MaxBytes || p.NextSend(t0, MiB) != t0 || p.Rate() != units.Unlimited {
		t.Error("zero Port is not unpaced")
	}
	p.OnSent(t0, MiB)
}

// TestPortAggregate runs two 75 Gb/s paths through a 100 Gb/s port the way
// the package doc says the engine does, and checks that the port caps the
// sum while each path stays under its own rate.
func TestPortAggregate(t *testing.T) {
	const seg = 64 * KiB
	port := mustPort(t, PortConfig{LineRate: 100 * Gbps, Segment: seg})
	paths := []*Pacer{
		mustNew(t, Config{Rate: 75 * Gbps, Segment: seg}),
		mustNew(t, Config{Rate: 75 * Gbps, Segment: seg}),
	}
	sentBy := make([]units.Bytes, len(paths))
	now := t0
	end := t0 + vtime.Time(10*time.Millisecond)
	for now < end {
		// Post on every path that both buckets allow; otherwise wait
		// for the earliest instant one of them does.
		wake := vtime.Never
		for i, p := range paths {
			at := max(p.NextSend(now, seg), port.NextSend(now, seg))
			if at <= now {
				p.OnSent(now, seg)
				port.OnSent(now, seg)
				sentBy[i] += seg
				at = max(p.NextSend(now, seg), port.NextSend(now, seg))
			}
			wake = min(wake, at)
		}
		now = max(wake, now)
	}
	elapsed := now.Sub(t0)
	total := sentBy[0] + sentBy[1]
	if limit := port.Burst() + (100 * Gbps).BytesIn(elapsed) + seg; total > limit {
		t.Errorf("sent %v in %v through a 100 Gb/s port, more than Burst + rate*T = %v", total, elapsed, limit)
	}
	if floor := (100 * Gbps).BytesIn(elapsed) - 2*seg; total < floor {
		t.Errorf("sent %v in %v, want the port saturated (>= %v)", total, elapsed, floor)
	}
	for i, b := range sentBy {
		if limit := paths[i].Burst() + (75 * Gbps).BytesIn(elapsed) + seg; b > limit {
			t.Errorf("path %d sent %v, more than its own bound %v", i, b, limit)
		}
	}
}

func TestPortNoAllocs(t *testing.T) {
	p := mustPort(t, PortConfig{LineRate: 100 * Gbps})
	now := t0
	if a := testing.AllocsPerRun(1000, func() {
		now = p.NextSend(now, 64*KiB)
		p.OnSent(now, 64*KiB)
		_ = p.Budget(now)
		p.SetRate(now, 90*Gbps+units.BitRate(now%3)*Gbps)
		if now%5 == 0 {
			p.OnSent(now, 2*MiB)
		}
	}); a != 0 {
		t.Errorf("Port methods allocate %v times per round, want 0", a)
	}
}
