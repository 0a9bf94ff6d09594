package pacing

import (
	"testing"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Sinks keep the compiler from deleting the benchmarked work.
var (
	sinkBytes units.Bytes
	sinkTime  vtime.Time
)

func benchPacer(b *testing.B) *Pacer {
	p, err := New(Config{Rate: 100 * Gbps, Segment: 64 * KiB})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func BenchmarkPacerBudget(b *testing.B) {
	p := benchPacer(b)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now += 100
		sinkBytes = p.Budget(now)
	}
}

func BenchmarkPacerOnSent(b *testing.B) {
	p := benchPacer(b)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now += 700 // a 4 KiB segment every 700 ns: 46.8 Gb/s, under the rate
		p.OnSent(now, 4*KiB)
	}
}

func BenchmarkPacerNextSend(b *testing.B) {
	p := benchPacer(b)
	p.OnSent(t0, p.Burst()) // empty, and time stands still: every call computes a deadline
	b.ReportAllocs()
	for b.Loop() {
		sinkTime = p.NextSend(t0, 64*KiB)
	}
}

func BenchmarkPacerSetRate(b *testing.B) {
	p := benchPacer(b)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now += 1000
		p.SetRate(now, 50*Gbps+units.BitRate(now%1024)*Gbps/16)
	}
}

// BenchmarkPacerSegmentLoop is the engine's per-segment work on one path:
// ask when a segment fits, then account for it.
func BenchmarkPacerSegmentLoop(b *testing.B) {
	p := benchPacer(b)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = p.NextSend(now, 64*KiB)
		p.OnSent(now, 64*KiB)
	}
}

// BenchmarkPathAndPortLoop adds the port's aggregate bucket.
func BenchmarkPathAndPortLoop(b *testing.B) {
	p := benchPacer(b)
	port, err := NewPort(PortConfig{LineRate: 100 * Gbps, Segment: 64 * KiB})
	if err != nil {
		b.Fatal(err)
	}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = max(p.NextSend(now, 64*KiB), port.NextSend(now, 64*KiB))
		p.OnSent(now, 64*KiB)
		port.OnSent(now, 64*KiB)
	}
}
