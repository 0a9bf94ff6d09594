package multipath

import (
	"testing"
	"time"

	"mptx/units"
	"mptx/vtime"
)

// tight is the cheapest possible driver: it completes every posted work
// request one round later, so a benchmark measures the engine alone.
type tight struct {
	e      *Engine
	now    vtime.Time
	tick   time.Duration
	acts   []Action
	out    []uint64
	next   []uint64
	comp   Completion
	chunks int
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
	d := &tight{e: e, now: vtime.Epoch, acts: make([]Action, 256), out: make([]uint64, 0, 4096), next: make([]uint64, 0, 4096)}
	// Advance time per round by what the aggregate rate moves in one
	// segment, so pacing lets roughly a segment per path through.
	d.tick = rate.TxTime(e.Segment()) * 21 / 20
	if _, _, err := e.Submit(d.now, TransferSpec{ID: 1, Size: 1 << 40, ChunkSize: 4 * units.MiB}); err != nil {
		tb.Fatal(err)
	}
	return d
}

func (d *tight) round() {
	d.now = d.now.Add(d.tick)
	for _, id := range d.out {
		d.comp.WorkID, d.comp.OK = id, true
		d.e.OnCompletion(d.now, &d.comp)
	}
	d.out, d.next = d.next[:0], d.out
	if dl := d.e.Deadline(); dl != 0 && dl <= d.now {
		d.e.OnTimer(d.now)
	}
	for {
		n := d.e.Actions(d.now, d.acts)
		for i := range d.acts[:n] {
			a := &d.acts[i]
			if a.Kind == ActPost {
				d.out = append(d.out, a.WorkID)
				if a.HasImm {
					d.chunks++
				}
			}
		}
		if n < len(d.acts) {
			break
		}
	}
}

func TestNoAllocsPerChunk(t *testing.T) {
	for _, cc := range []string{"dcqcn", "swift", "fixed"} {
		d := newTight(t, 8, 400*units.Gbps, Config{CC: cc})
		for i := 0; i < 2000; i++ {
			d.round()
		}
		c0 := d.chunks
		if a := testing.AllocsPerRun(2000, d.round); a != 0 {
			t.Errorf("%s: %.2f allocations per round in steady state, want 0", cc, a)
		}
		if d.chunks == c0 {
			t.Errorf("%s: no chunk completed during the measurement", cc)
		}
	}
}

// BenchmarkEngineChunk measures the engine's cost per 4 MiB chunk at 8
// paths: every post, completion, CC update and pacing decision of the
// chunk's segments. ns/chunk is the figure to compare with the 500 ns
// target; allocs/op must be 0.
func BenchmarkEngineChunk(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"dcqcn/seg=default", Config{CC: "dcqcn"}},
		{"dcqcn/seg=4MiB", Config{CC: "dcqcn", Segment: 4 * units.MiB, Pacing: PacingConfig{Burst: 4 * units.MiB, PFCXoff: 8 * units.MiB}}},
		{"swift/seg=default", Config{CC: "swift"}},
		{"fixed/nopacing/seg=4MiB", Config{CC: "fixed", Segment: 4 * units.MiB, Pacing: PacingConfig{Disabled: true}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := newTight(b, 8, 400*units.Gbps, bc.cfg)
			for i := 0; i < 1000; i++ {
				d.round()
			}
			b.ReportAllocs()
			b.ResetTimer()
			c0 := d.chunks
			start := time.Now()
			for i := 0; i < b.N; i++ {
				d.round()
			}
			el := time.Since(start)
			if n := d.chunks - c0; n > 0 {
				b.ReportMetric(float64(el.Nanoseconds())/float64(n), "ns/chunk")
				b.ReportMetric(float64(n)/float64(b.N), "chunks/op")
			}
		})
	}
}
