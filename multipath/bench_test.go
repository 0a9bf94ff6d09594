package multipath

import (
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// tight is the cheapest faithful driver: each path is a FIFO server at its
// line rate plus a fixed RTT, held in allocation-free rings, and every round
// handles exactly one completion (the earliest) or one timer, then the
// actions they allow. Benchmarks built on it measure the engine alone.
type tight struct {
	e      *Engine
	now    vtime.Time
	rtt    time.Duration
	rate   units.BitRate
	acts   []Action
	busy   []vtime.Time
	ring   [][]out
	head   []int
	n      []int
	comp   Completion
	chunks int
}

type out struct {
	id uint64
	at vtime.Time
}

func newTight(tb testing.TB, paths int, rate units.BitRate, cfg Config) *tight {
	tb.Helper()
	for i := 0; i < paths; i++ {
		cfg.Paths = append(cfg.Paths, PathConfig{LineRate: rate, BaseRTT: 5 * time.Microsecond, NIC: i})
	}
	e, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	d := &tight{e: e, now: vtime.Epoch, rtt: 5 * time.Microsecond, rate: rate, acts: make([]Action, 256),
		busy: make([]vtime.Time, paths), ring: make([][]out, paths), head: make([]int, paths), n: make([]int, paths)}
	for i := range d.ring {
		d.ring[i] = make([]out, 1024)
	}
	if _, _, err := e.Submit(d.now, TransferSpec{ID: 1, Size: 1 << 44, ChunkSize: 4 * units.MiB}); err != nil {
		tb.Fatal(err)
	}
	d.act()
	return d
}

func (d *tight) act() {
	for {
		n := d.e.Actions(d.now, d.acts)
		for i := range d.acts[:n] {
			a := &d.acts[i]
			if a.Kind != ActPost && a.Kind != ActProbe {
				continue
			}
			if a.HasImm && a.Kind == ActPost {
				d.chunks++
			}
			p := a.Path
			start := max(d.now, d.busy[p])
			d.busy[p] = start.Add(d.rate.TxTime(a.Len))
			r := d.ring[p]
			r[(d.head[p]+d.n[p])%len(r)] = out{id: a.WorkID, at: d.busy[p].Add(d.rtt)}
			d.n[p]++
		}
		if n < len(d.acts) {
			return
		}
	}
}

// round advances to the next completion or timer and handles it.
func (d *tight) round() {
	best := -1
	for p := range d.ring {
		if d.n[p] > 0 && (best < 0 || d.ring[p][d.head[p]].at < d.ring[best][d.head[best]].at) {
			best = p
		}
	}
	dl := d.e.Deadline()
	if best >= 0 && (dl == 0 || d.ring[best][d.head[best]].at <= dl) {
		o := d.ring[best][d.head[best]]
		d.head[best] = (d.head[best] + 1) % len(d.ring[best])
		d.n[best]--
		d.now = max(d.now, o.at)
		d.comp.WorkID, d.comp.OK = o.id, true
		d.e.OnCompletion(d.now, &d.comp)
	} else if dl != 0 {
		d.now = max(d.now, dl)
		d.e.OnTimer(d.now)
	}
	d.act()
}

func TestNoAllocsPerChunk(t *testing.T) {
	for _, cfg := range []Config{{CC: "dcqcn"}, {CC: "swift"}, {CC: "timely"}, {CC: "fixed"}, {CC: "dcqcn", Pacing: PacingConfig{Hardware: true}}} {
		d := newTight(t, 8, 400*units.Gbps, cfg)
		for i := 0; i < 5000; i++ {
			d.round()
		}
		c0 := d.chunks
		if a := testing.AllocsPerRun(5000, d.round); a != 0 {
			t.Errorf("%s (hardware pacing %v): %.3f allocations per round in steady state, want 0", cfg.CC, cfg.Pacing.Hardware, a)
		}
		if d.chunks == c0 {
			t.Errorf("%s: no chunk completed during the measurement", cfg.CC)
		}
	}
}

// BenchmarkEngineChunk measures the engine's cost per 4 MiB chunk at 8
// paths of 400 Gb/s: every post, completion, CC update, pacing decision and
// timer of the chunk. ns/chunk is the figure to compare with the 500 ns
// target, seg/chunk the work requests per chunk; allocs/op must be 0.
func BenchmarkEngineChunk(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"dcqcn/sw-pacing/seg=128KiB", Config{CC: "dcqcn"}},
		{"dcqcn/sw-pacing/seg=1MiB", Config{CC: "dcqcn", Segment: units.MiB, Pacing: PacingConfig{Burst: 2 * units.MiB, PFCXoff: 8 * units.MiB}}},
		{"dcqcn/hw-pacing/seg=chunk", Config{CC: "dcqcn", Pacing: PacingConfig{Hardware: true}}},
		{"swift/sw-pacing/seg=128KiB", Config{CC: "swift"}},
		{"hpcc/hw-pacing/seg=chunk", Config{CC: "hpcc", Pacing: PacingConfig{Hardware: true}}},
		{"fixed/no-pacing/seg=chunk", Config{CC: "fixed", Segment: 4 * units.MiB, Pacing: PacingConfig{Disabled: true}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := newTight(b, 8, 400*units.Gbps, bc.cfg)
			for i := 0; i < 2000; i++ {
				d.round()
			}
			b.ReportAllocs()
			c0 := d.chunks
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				d.round()
			}
			el := time.Since(start)
			b.StopTimer()
			if n := d.chunks - c0; n > 0 {
				b.ReportMetric(float64(el.Nanoseconds())/float64(n), "ns/chunk")
				b.ReportMetric(float64(b.N)/float64(n), "rounds/chunk")
			}
		})
	}
}
