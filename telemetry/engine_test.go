package telemetry_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/multipath/enginetest"
	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/telemetry"
	"github.com/mptx-dev/mptx/telemetry/analyze"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// engineRun is one transfer through the real engine (mptx.Sender over the
// in-memory backend, virtual time) with a telemetry Recorder attached.
type engineRun struct {
	stats   []multipath.PathStats // the engine's own per-path counters
	doneAt  vtime.Time
	err     error
	pathCfg []mem.PathConfig
}

// runEngine ships size bytes in chunks of chunkSize over paths, recording
// into rec, and returns the engine's counters.
func runEngine(t testing.TB, rec multipath.Recorder, paths []mem.PathConfig, size, chunkSize units.Bytes, cc string) engineRun {
	t.Helper()
	send := make([]byte, size)
	for i := range send {
		send[i] = byte(i * 7)
	}
	net, err := mem.New(mem.Config{Paths: paths, SendRegion: send, RecvRegion: make([]byte, size)})
	if err != nil {
		t.Fatal(err)
	}
	res := engineRun{pathCfg: paths}
	done := false
	snd, err := mptx.NewSender(net.Conn(), mptx.SenderConfig{
		Engine: multipath.Config{CC: cc, ChunkSize: chunkSize, Recorder: rec},
		OnDone: func(_ multipath.TransferID, now vtime.Time, err error) { done, res.doneAt, res.err = true, now, err },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := snd.Submit(net.Now(), multipath.TransferSpec{ID: 42, Size: size}); err != nil {
		t.Fatal(err)
	}
	next := snd.Step(net.Now())
	for i := 0; !done; i++ {
		at := vtime.Earliest(net.Next(), next)
		if at == 0 || i > 10_000_000 {
			t.Fatalf("engine stuck at %v", net.Now())
		}
		net.AdvanceTo(at)
		next = snd.Step(net.Now())
	}
	for i := range paths {
		res.stats = append(res.stats, snd.Engine().Stats(i))
	}
	return res
}

func memPathAttrs(n int) []telemetry.PathAttr {
	p := make([]telemetry.PathAttr, n)
	for i := range p {
		p[i] = telemetry.PathAttr{Device: fmt.Sprintf("mem%d", i), QPN: uint32(0x10 + i)}
	}
	return p
}

// TestEngineSpansMatchCounters runs the real engine with the recorder and
// checks the analysis of its spans against the engine's own counters,
// including a path that dies mid-transfer.
func TestEngineSpansMatchCounters(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []mem.PathConfig
	}{
		{"rates", []mem.PathConfig{{Rate: 40 * units.Gbps, NIC: 0, CNPEvery: 4 * units.MiB}, {Rate: 20 * units.Gbps, NIC: 1}, {Rate: 10 * units.Gbps, NIC: 2}}},
		{"path-dies", []mem.PathConfig{{Rate: 10 * units.Gbps, NIC: 0}, {Rate: 10 * units.Gbps, NIC: 1, FailAt: vtime.Epoch.Add(5 * time.Millisecond)}, {Rate: 10 * units.Gbps, NIC: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := tracetest.NewSpanRecorder()
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr), sdktrace.WithSyncer(exp))
			rec, err := telemetry.NewRecorder(telemetry.Config{TracerProvider: tp, Wall: telemetry.FixedEpoch(time.Unix(1e9, 0)),
				CC: "dcqcn", Backend: "mem", Paths: memPathAttrs(len(tc.paths))})
			if err != nil {
				t.Fatal(err)
			}
			run := runEngine(t, rec, tc.paths, 48*units.MiB, units.MiB, "dcqcn")
			rec.Close(run.doneAt)
			if run.err != nil {
				t.Fatalf("transfer failed: %v", run.err)
			}
			if d := rec.DroppedEvents(); d != 0 {
				t.Fatalf("%d events dropped", d)
			}
			td, err := analyze.Parse(exportJSON(t, exp.GetSpans().Snapshots()), tc.name)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := analyze.Analyze(td, analyze.Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkAgainstEngine(t, rep, run)
		})
	}
}

// checkAgainstEngine compares the analysed report with the engine's
// counters: chunks and requeues per path always; bytes per path exactly
// when nothing was requeued (the engine also counts late completions of
// superseded attempts, which the spans record as requeued).
func checkAgainstEngine(t *testing.T, rep *analyze.Report, run engineRun) {
	t.Helper()
	if len(rep.Transfers) != 1 {
		t.Fatalf("transfers = %d, want 1", len(rep.Transfers))
	}
	tr := rep.Transfers[0]
	if tr.Outcome != "done" || tr.ID != 42 {
		t.Errorf("transfer %d outcome %q, want 42 done", tr.ID, tr.Outcome)
	}
	per := map[int]*analyze.PathStats{}
	for _, p := range tr.PerPath {
		per[p.Path] = p
	}
	var total units.Bytes
	requeues := 0
	for i, st := range run.stats {
		p := per[i]
		if p == nil {
			p = &analyze.PathStats{}
		}
		total += p.Bytes
		requeues += st.Requeues
		if p.Chunks != st.Chunks {
			t.Errorf("path %d: analysed chunks %d, engine counted %d", i, p.Chunks, st.Chunks)
		}
		if p.Requeues != st.Requeues {
			t.Errorf("path %d: analysed requeues %d, engine counted %d", i, p.Requeues, st.Requeues)
		}
		if st.Requeues == 0 && p.Bytes != st.Bytes {
			t.Errorf("path %d: analysed bytes %d, engine counted %d", i, p.Bytes, st.Bytes)
		}
		t.Logf("path %d: analysed %v in %d chunks (%.1f%%), engine %v in %d chunks, %d requeues", i, p.Bytes, p.Chunks, 100*p.Share, st.Bytes, st.Chunks, st.Requeues)
	}
	if total != tr.Bytes {
		t.Errorf("analysed bytes over all paths %d, want the tensor's %d", total, tr.Bytes)
	}
	if tr.Requeues != requeues {
		t.Errorf("analysed requeues %d, engine %d", tr.Requeues, requeues)
	}
}

// exportJSON turns SDK span snapshots into OTLP JSON lines through the
// file exporter, as a collector would store them.
func exportJSON(t testing.TB, spans []sdktrace.ReadOnlySpan) []byte {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "spans-*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	exp, err := telemetry.NewFileSpanExporter(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newTight returns the engine benchmark's driver (multipath/enginetest,
// one event per Round, as multipath's BenchmarkEngineChunk): 8 paths at
// 400 Gb/s, two per NIC, 5 µs RTT, one endless transfer in 4 MiB chunks.
func newTight(tb testing.TB, cfg multipath.Config) *enginetest.Net {
	tb.Helper()
	rate := 400 * units.Gbps
	rates := make([]units.BitRate, 8)
	for i := range rates {
		rates[i] = rate
		cfg.Paths = append(cfg.Paths, multipath.PathConfig{LineRate: rate, BaseRTT: 5 * time.Microsecond, NIC: i / 2})
	}
	d := enginetest.New(tb, cfg, rates, 5*time.Microsecond)
	d.Submit(1, 1<<40, 4*units.MiB)
	d.Act()
	return d
}

// BenchmarkEngineTracing is the engine benchmark (8 paths at 400 Gbps,
// 4 MiB chunks, DCQCN) with telemetry off (nil Recorder), with the
// Recorder's metrics only, and with tracing on (metrics on, spans through a
// batch processor to a discarding exporter): "tracing" builds the provider
// as Setup does (processors behind NewSpanProcessor: the Recorder builds
// chunk spans itself), "tracing-sdk" is a plain SDK provider (every span
// through the SDK). ns/chunk is the figure to compare; dropped/chunk shows
// whether the span builder kept up.
func BenchmarkEngineTracing(b *testing.B) {
	for _, mode := range []string{"off", "metrics", "tracing", "tracing-sdk"} {
		b.Run(mode, func(b *testing.B) {
			cfg := multipath.Config{CC: "dcqcn"}
			var rec *telemetry.Recorder
			var tp *sdktrace.TracerProvider
			if mode != "off" {
				tcfg := telemetry.Config{Wall: telemetry.FixedEpoch(time.Unix(1e9, 0)), Paths: memPathAttrs(8), CC: "dcqcn",
					MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()),
						sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))} // as Setup configures it
				switch mode {
				case "tracing": // as Setup builds it
					tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(
						telemetry.NewSpanProcessor(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()))))
					tcfg.TracerProvider = tp
				case "tracing-sdk":
					tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
					tcfg.TracerProvider = tp
				}
				var err error
				if rec, err = telemetry.NewRecorder(tcfg); err != nil {
					b.Fatal(err)
				}
				cfg.Recorder = rec
			}
			d := newTight(b, cfg)
			for i := 0; i < 1000; i++ {
				d.Round()
			}
			if rec != nil {
				rec.Flush()
			}
			b.ReportAllocs()
			b.ResetTimer()
			c0 := d.Chunks
			start := time.Now()
			for i := 0; i < b.N; i++ {
				d.Round()
			}
			el := time.Since(start)
			b.StopTimer()
			n := d.Chunks - c0
			if n > 0 {
				b.ReportMetric(float64(el.Nanoseconds())/float64(n), "ns/chunk")
			}
			if rec != nil {
				rec.Close(d.Now)
				if n > 0 {
					b.ReportMetric(float64(rec.DroppedEvents())/float64(n), "dropped/chunk")
				}
			}
			if tp != nil {
				_ = tp.Shutdown(context.Background())
			}
		})
	}
}

// TestEngineNoAllocsWithTracing checks that with tracing and metrics on,
// the engine's own goroutine still allocates nothing: the real engine
// driven as in BenchmarkEngineTracing, the Recorder's builder held inside
// its first event (its Wall blocks) so that whatever it would allocate
// cannot be counted, and every engine event therefore a ring copy.
func TestEngineNoAllocsWithTracing(t *testing.T) {
	hold := make(chan struct{})
	var once bool
	wall := func(v vtime.Time) time.Time {
		if !once {
			once = true
			<-hold
		}
		return time.Unix(1e9, 0).Add(time.Duration(v))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(
		telemetry.NewSpanProcessor(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()))))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	rec, err := telemetry.NewRecorder(telemetry.Config{Wall: wall, Paths: memPathAttrs(8), CC: "dcqcn", TracerProvider: tp, Buffer: 1 << 20,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))})
	if err != nil {
		t.Fatal(err)
	}
	d := newTight(t, multipath.Config{CC: "dcqcn", Recorder: rec})
	for range 100 {
		d.Round()
	}
	c0 := d.Chunks
	if allocs := testing.AllocsPerRun(2000, d.Round); allocs != 0 {
		t.Errorf("engine round with tracing on: %v allocations, want 0", allocs)
	}
	if d.Chunks == c0 {
		t.Fatal("no chunk completed during the measurement")
	}
	close(hold)
	rec.Close(d.Now)
	if n := rec.DroppedEvents(); n != 0 {
		t.Errorf("%d events dropped: the ring was meant to hold them all", n)
	}
}

// BenchmarkEngineTracingInterleaved measures what BenchmarkEngineTracing
// does, on a machine whose speed drifts by more than the effect: one
// engine per mode (off, metrics, tracing as Setup builds it) in one
// process, driven in turns of slice rounds (about 50 ms) in rotating order,
// each turn timed on its own, so that drift hits every mode alike. A
// Recorder's turn ends with Flush inside the timed region: work its
// builder still had queued is charged to it (an overestimate, as that work
// would otherwise overlap the engine). Reported: ns/chunk per mode over
// the whole run, and the cost of metrics and of tracing in percent of the
// engine's ns/chunk with telemetry off: the median over rotations of each
// rotation's ratio, which a hiccup of the host in one turn does not move.
func BenchmarkEngineTracingInterleaved(b *testing.B) {
	const slice = 30000 // rounds per turn (about 50 ms)
	type mode struct {
		name   string
		d      *enginetest.Net
		rec    *telemetry.Recorder
		tp     *sdktrace.TracerProvider
		ns     int64
		chunks int
		turn   float64 // ns/chunk of the latest turn
	}
	modes := []*mode{{name: "off"}, {name: "metrics"}, {name: "tracing"}}
	for _, m := range modes {
		cfg := multipath.Config{CC: "dcqcn"}
		if m.name != "off" {
			tcfg := telemetry.Config{Wall: telemetry.FixedEpoch(time.Unix(1e9, 0)), Paths: memPathAttrs(8), CC: "dcqcn",
				MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()),
					sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))}
			if m.name == "tracing" {
				m.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(
					telemetry.NewSpanProcessor(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()))))
				tcfg.TracerProvider = m.tp
			}
			var err error
			if m.rec, err = telemetry.NewRecorder(tcfg); err != nil {
				b.Fatal(err)
			}
			cfg.Recorder = m.rec
		}
		m.d = newTight(b, cfg)
		for range 1000 {
			m.d.Round()
		}
		if m.rec != nil {
			m.rec.Flush()
		}
	}
	var ratios [2][]float64 // per rotation: metrics/off, tracing/off
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for k := range modes {
			m := modes[(i+k)%len(modes)]
			c0 := m.d.Chunks
			start := time.Now()
			for range slice {
				m.d.Round()
			}
			if m.rec != nil {
				m.rec.Flush()
			}
			el := time.Since(start).Nanoseconds()
			m.ns += el
			m.chunks += m.d.Chunks - c0
			m.turn = float64(el) / float64(max(m.d.Chunks-c0, 1))
		}
		ratios[0] = append(ratios[0], modes[1].turn/modes[0].turn)
		ratios[1] = append(ratios[1], modes[2].turn/modes[0].turn)
	}
	b.StopTimer()
	per := map[string]float64{}
	for _, m := range modes {
		if m.chunks == 0 {
			b.Fatalf("%s: no chunk completed", m.name)
		}
		per[m.name] = float64(m.ns) / float64(m.chunks)
		b.ReportMetric(per[m.name], m.name+"-ns/chunk")
		if m.rec != nil {
			m.rec.Close(m.d.Now)
			if n := m.rec.DroppedEvents(); n != 0 {
				b.Errorf("%s: %d events dropped", m.name, n)
			}
		}
		if m.tp != nil {
			_ = m.tp.Shutdown(context.Background())
		}
	}
	median := func(v []float64) float64 {
		slices.Sort(v)
		return (v[(len(v)-1)/2] + v[len(v)/2]) / 2
	}
	b.ReportMetric(100*(median(ratios[0])-1), "metrics-%")
	b.ReportMetric(100*(median(ratios[1])-1), "tracing-%")
}
