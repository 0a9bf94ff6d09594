package telemetry

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/telemetry/internal/synth"
	"github.com/mptx-dev/mptx/telemetry/schema"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// threePaths is a transfer over three paths: path 1 is a quarter as fast,
// path 2 goes down mid-transfer and CNPs arrive on path 0.
func threePaths() synth.Spec {
	return synth.Spec{
		Transfer: 7, Bytes: 4*units.MiB + 123, ChunkSize: 256 * units.KiB, Start: vtime.Time(time.Millisecond),
		Paths: []synth.Path{
			{Rate: 100 * units.Gbps, RTT: 10 * time.Microsecond, CNPEvery: 3, CNPs: 2},
			{Rate: 25 * units.Gbps, RTT: 10 * time.Microsecond},
			{Rate: 100 * units.Gbps, RTT: 10 * time.Microsecond, DownAt: vtime.Time(time.Millisecond + 60*time.Microsecond)},
		},
	}
}

func pathAttrs(n int) []PathAttr {
	p := make([]PathAttr, n)
	for i := range p {
		p[i] = PathAttr{Device: "mlx5_" + string(rune('0'+i)), QPN: uint32(0x100 + i), NIC: "eth" + string(rune('0'+i))}
	}
	return p
}

type testRig struct {
	rec    *Recorder
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
}

// newRig returns a Recorder tracing into a span recorder. With direct, the
// span recorder sits behind NewSpanProcessor, as Setup arranges its
// exporters, and the Recorder builds chunk spans itself; otherwise every
// span goes through the SDK.
func newRig(t testing.TB, paths int, sampler sdktrace.Sampler, direct bool) *testRig {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	var sp sdktrace.SpanProcessor = sr
	if direct {
		sp = NewSpanProcessor(sr)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithSampler(sampler))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec, err := NewRecorder(Config{
		TracerProvider: tp, MeterProvider: mp, Wall: FixedEpoch(epoch),
		CC: "dcqcn", Backend: "mem", Peer: "10.0.0.2", Paths: pathAttrs(paths),
	})
	if err != nil {
		t.Fatalf("NewRecorder: %v", err)
	}
	t.Cleanup(func() { rec.Close(0) })
	return &testRig{rec: rec, spans: sr, reader: reader, tp: tp}
}

// run feeds spec to the rig's recorder and waits for the worker.
func (rig *testRig) run(spec synth.Spec) synth.Result {
	res := synth.Run(spec, rig.rec)
	rig.rec.Flush()
	return res
}

func attrMap(kvs []attribute.KeyValue) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// bothPaths runs f for the SDK path and for chunk spans built by the
// Recorder (NewSpanProcessor): every assertion holds for both.
func bothPaths(t *testing.T, f func(t *testing.T, direct bool)) {
	t.Run("sdk", func(t *testing.T) { f(t, false) })
	t.Run("direct", func(t *testing.T) { f(t, true) })
}

func TestRecorderSpans(t *testing.T) { bothPaths(t, testRecorderSpans) }

func testRecorderSpans(t *testing.T, direct bool) {
	rig := newRig(t, 3, sdktrace.AlwaysSample(), direct)
	spec := threePaths()
	res := rig.run(spec)
	if res.Requeues == 0 {
		t.Fatalf("scenario has no requeue; the test needs one")
	}
	ended := rig.spans.Ended()
	var transfer sdktrace.ReadOnlySpan
	var chunks []sdktrace.ReadOnlySpan
	for _, s := range ended {
		switch s.Name() {
		case schema.SpanTransfer:
			transfer = s
		case schema.SpanChunk:
			chunks = append(chunks, s)
		default:
			t.Errorf("unexpected span %q", s.Name())
		}
	}
	if transfer == nil {
		t.Fatal("no mptx.transfer span")
	}
	nChunks := 17
	if got, want := len(chunks), nChunks+res.Requeues; got != want {
		t.Errorf("chunk spans = %d, want %d (chunks + requeues)", got, want)
	}
	ta := attrMap(transfer.Attributes())
	for k, want := range map[string]attribute.Value{
		schema.AttrTransferID:         attribute.Int64Value(7),
		schema.AttrTransferBytes:      attribute.Int64Value(int64(spec.Bytes)),
		schema.AttrTransferChunks:     attribute.Int64Value(int64(nChunks)),
		schema.AttrChunkSize:          attribute.Int64Value(int64(spec.ChunkSize)),
		schema.AttrPaths:              attribute.IntValue(3),
		schema.AttrCC:                 attribute.StringValue("dcqcn"),
		schema.AttrBackend:            attribute.StringValue("mem"),
		schema.AttrNetworkPeerAddress: attribute.StringValue("10.0.0.2"),
		schema.AttrTransferOutcome:    attribute.StringValue(schema.TransferDone),
	} {
		if got := ta[k]; got != want {
			t.Errorf("transfer attribute %s = %v, want %v", k, got.Emit(), want.Emit())
		}
	}
	if got, want := transfer.StartTime(), epoch.Add(time.Millisecond); !got.Equal(want) {
		t.Errorf("transfer start = %v, want %v", got, want)
	}
	if got, want := transfer.EndTime(), epoch.Add(time.Duration(res.End)); !got.Equal(want) {
		t.Errorf("transfer end = %v, want %v", got, want)
	}
	events := map[string]int{}
	for _, e := range transfer.Events() {
		events[e.Name]++
	}
	if events[schema.EventPathDown] != 1 || events[schema.EventRequeue] != res.Requeues || events[schema.EventCNPBurst] == 0 {
		t.Errorf("transfer events = %v, want 1 path down, %d requeues, >0 CNP bursts", events, res.Requeues)
	}
	acked := make([]units.Bytes, 3)
	requeued := 0
	for _, c := range chunks {
		if c.Parent().SpanID() != transfer.SpanContext().SpanID() || c.SpanContext().TraceID() != transfer.SpanContext().TraceID() {
			t.Errorf("chunk span parent = %v, want the transfer span", c.Parent().SpanID())
		}
		a := attrMap(c.Attributes())
		path := int(a[schema.AttrPath].AsInt64())
		if got, want := a[schema.AttrDevice].AsString(), "mlx5_"+string(rune('0'+path)); got != want {
			t.Errorf("chunk device = %q, want %q", got, want)
		}
		if got, want := a[schema.AttrQPN].AsInt64(), int64(0x100+path); got != want {
			t.Errorf("chunk QPN = %d, want %d", got, want)
		}
		if !c.EndTime().After(c.StartTime()) {
			t.Errorf("chunk %d: end %v not after start %v", a[schema.AttrChunkIndex].AsInt64(), c.EndTime(), c.StartTime())
		}
		switch a[schema.AttrChunkOutcome].AsString() {
		case schema.OutcomeAcked:
			acked[path] += units.Bytes(a[schema.AttrChunkBytes].AsInt64())
			lat := time.Duration(a[schema.AttrChunkLatency].AsInt64())
			if got := c.EndTime().Sub(c.StartTime()); got != lat {
				t.Errorf("chunk span duration %v != latency attribute %v", got, lat)
			}
			if c.Status().Code == codes.Error {
				t.Errorf("acked chunk has error status")
			}
		case schema.OutcomeRequeued:
			requeued++
			if c.Status().Code != codes.Error || a[schema.AttrErrorType].AsString() != "path down" {
				t.Errorf("requeued chunk: status %v, error.type %q; want Error, \"path down\"", c.Status(), a[schema.AttrErrorType].AsString())
			}
		default:
			t.Errorf("chunk outcome %q", a[schema.AttrChunkOutcome].AsString())
		}
	}
	if requeued != res.Requeues {
		t.Errorf("requeued chunk spans = %d, want %d", requeued, res.Requeues)
	}
	for p := range acked {
		if acked[p] != res.Acked[p] {
			t.Errorf("path %d: span bytes = %d, want engine's %d", p, acked[p], res.Acked[p])
		}
	}
}

// collect returns the int64 sums and gauges per (metric, path).
func collect(t *testing.T, r *sdkmetric.ManualReader) (map[string]map[int64]int64, map[string]map[int64]uint64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	ints := map[string]map[int64]int64{}
	counts := map[string]map[int64]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			path := func(s attribute.Set) int64 { v, _ := s.Value(schema.AttrPath); return v.AsInt64() }
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				ints[m.Name] = map[int64]int64{}
				for _, p := range d.DataPoints {
					ints[m.Name][path(p.Attributes)] = p.Value
				}
			case metricdata.Gauge[int64]:
				ints[m.Name] = map[int64]int64{}
				for _, p := range d.DataPoints {
					ints[m.Name][path(p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				counts[m.Name] = map[int64]uint64{}
				for _, p := range d.DataPoints {
					counts[m.Name][path(p.Attributes)] = p.Count
				}
			}
		}
	}
	return ints, counts
}

func TestRecorderMetrics(t *testing.T) {
	rig := newRig(t, 3, sdktrace.AlwaysSample(), false)
	res := rig.run(threePaths())
	ints, counts := collect(t, rig.reader)
	for p := range 3 {
		if got, want := ints[schema.MetricBytesAcked][int64(p)], int64(res.Acked[p]); got != want {
			t.Errorf("%s{path=%d} = %d, want %d", schema.MetricBytesAcked, p, got, want)
		}
		if got, want := counts[schema.MetricChunkLatency][int64(p)], uint64(res.Chunks[p]); got != want {
			t.Errorf("%s{path=%d} count = %d, want %d", schema.MetricChunkLatency, p, got, want)
		}
	}
	if got := ints[schema.MetricPathDown][2]; got != 1 {
		t.Errorf("%s{path=2} = %d, want 1", schema.MetricPathDown, got)
	}
	if got := ints[schema.MetricRequeues][2]; got != int64(res.Requeues) {
		t.Errorf("%s{path=2} = %d, want %d", schema.MetricRequeues, got, res.Requeues)
	}
	if got := ints[schema.MetricCNP][0]; got != int64(2*(res.Chunks[0]/3)) {
		t.Errorf("%s{path=0} = %d, want %d", schema.MetricCNP, got, 2*(res.Chunks[0]/3))
	}
	if got := ints[schema.MetricRate][1]; got != int64(25*units.Gbps) {
		t.Errorf("%s{path=1} = %d, want 25e9", schema.MetricRate, got)
	}
	sent := int64(0)
	for p := range 3 {
		sent += ints[schema.MetricBytesSent][int64(p)]
	}
	if total := int64(4*units.MiB + 123); sent <= total {
		t.Errorf("bytes sent = %d, want more than the tensor (%d): requeued attempts count too", sent, total)
	}
	if got := counts[schema.MetricTransferTime][0]; got != 1 {
		t.Errorf("%s count = %d, want 1", schema.MetricTransferTime, got)
	}
}

func TestRecorderUnsampled(t *testing.T) { bothPaths(t, testRecorderUnsampled) }

func testRecorderUnsampled(t *testing.T, direct bool) {
	rig := newRig(t, 3, sdktrace.NeverSample(), direct)
	res := rig.run(threePaths())
	if n := len(rig.spans.Ended()); n != 0 {
		t.Errorf("unsampled transfer ended %d spans, want 0", n)
	}
	ints, _ := collect(t, rig.reader)
	if got, want := ints[schema.MetricBytesAcked][1], int64(res.Acked[1]); got != want {
		t.Errorf("metrics with tracing unsampled: %s{path=1} = %d, want %d", schema.MetricBytesAcked, got, want)
	}
}

func TestRecorderCNPBurstsAndPFC(t *testing.T) { bothPaths(t, testRecorderCNPBurstsAndPFC) }

func testRecorderCNPBurstsAndPFC(t *testing.T, direct bool) {
	rig := newRig(t, 2, sdktrace.AlwaysSample(), direct)
	r := rig.rec
	us := func(n int) vtime.Time { return vtime.Time(n) * vtime.Time(time.Microsecond) }
	ev := func(e multipath.Event) { r.Record(&e) }
	ev(multipath.Event{Kind: multipath.EvTransferStart, Now: us(1), Transfer: 1, Bytes: 1024, Chunk: 1, Size: 1024})
	// Burst A on path 1: readings at 10, 50, 120µs (gaps <= 100µs).
	for _, at := range []int{10, 50, 120} {
		ev(multipath.Event{Kind: multipath.EvCNP, Now: us(at), Path: 1, ECN: 3})
	}
	// Burst B after a 400µs gap.
	ev(multipath.Event{Kind: multipath.EvCNP, Now: us(520), Path: 1, ECN: 1})
	r.RecordPFCPause(0, us(600), 50*time.Microsecond)
	ev(multipath.Event{Kind: multipath.EvTransferDone, Now: us(700), Transfer: 1, Bytes: 1024})
	r.Flush()
	spans := rig.spans.Ended()
	if len(spans) != 1 {
		t.Fatalf("spans = %d, want 1", len(spans))
	}
	var bursts []map[string]attribute.Value
	var pauses int
	for _, e := range spans[0].Events() {
		switch e.Name {
		case schema.EventCNPBurst:
			a := attrMap(e.Attributes)
			a["at"] = attribute.Int64Value(int64(e.Time.Sub(epoch)))
			bursts = append(bursts, a)
		case schema.EventPFCPause:
			pauses++
			if a := attrMap(e.Attributes); a[schema.AttrPauseNs].AsInt64() != int64(50*time.Microsecond) || a[schema.AttrPath].AsInt64() != 0 {
				t.Errorf("pfc pause attributes = %v", e.Attributes)
			}
		}
	}
	if len(bursts) != 2 {
		t.Fatalf("CNP bursts = %d, want 2", len(bursts))
	}
	for i, want := range []struct{ at, count, dur int64 }{
		{int64(10 * time.Microsecond), 9, int64(110 * time.Microsecond)},
		{int64(520 * time.Microsecond), 1, 0},
	} {
		b := bursts[i]
		if b["at"].AsInt64() != want.at || b[schema.AttrCNPCount].AsInt64() != want.count || b[schema.AttrBurstNs].AsInt64() != want.dur {
			t.Errorf("burst %d = at %d count %d dur %d, want %+v", i, b["at"].AsInt64(), b[schema.AttrCNPCount].AsInt64(), b[schema.AttrBurstNs].AsInt64(), want)
		}
	}
	if pauses != 1 {
		t.Errorf("PFC pause events = %d, want 1", pauses)
	}
	ints, _ := collect(t, rig.reader)
	if got := ints[schema.MetricPFCPauses][0]; got != 1 {
		t.Errorf("%s{path=0} = %d, want 1", schema.MetricPFCPauses, got)
	}
}

func TestRecorderCloseAbandons(t *testing.T) { bothPaths(t, testRecorderCloseAbandons) }

func testRecorderCloseAbandons(t *testing.T, direct bool) {
	rig := newRig(t, 1, sdktrace.AlwaysSample(), direct)
	r := rig.rec
	e := multipath.Event{Kind: multipath.EvTransferStart, Now: 10, Transfer: 3, Bytes: 2048, Chunk: 2, Size: 1024}
	r.Record(&e)
	e = multipath.Event{Kind: multipath.EvChunkStart, Now: 20, Transfer: 3, Chunk: 1, Attempt: 1, Bytes: 1024}
	r.Record(&e)
	r.Close(100)
	spans := rig.spans.Ended()
	if len(spans) != 2 {
		t.Fatalf("spans = %d, want 2 (chunk, transfer)", len(spans))
	}
	if got := attrMap(spans[0].Attributes())[schema.AttrChunkOutcome].AsString(); got != schema.OutcomeAbandoned {
		t.Errorf("open chunk outcome = %q, want %q", got, schema.OutcomeAbandoned)
	}
	if got := attrMap(spans[1].Attributes())[schema.AttrTransferOutcome].AsString(); got != schema.TransferAbandoned {
		t.Errorf("transfer outcome = %q, want %q", got, schema.TransferAbandoned)
	}
	if spans[1].Status().Code != codes.Error {
		t.Errorf("abandoned transfer status = %v, want Error", spans[1].Status())
	}
}

func TestRecorderTableFull(t *testing.T) {
	rec, err := NewRecorder(Config{Wall: FixedEpoch(epoch), Paths: pathAttrs(1), MaxTransfers: 2,
		TracerProvider: sdktrace.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	for id := range 3 {
		e := multipath.Event{Kind: multipath.EvTransferStart, Now: 1, Transfer: multipath.TransferID(id), Chunk: 1}
		rec.Record(&e)
	}
	rec.Flush()
	if got := rec.DroppedTransfers(); got != 1 {
		t.Errorf("DroppedTransfers() = %d, want 1", got)
	}
	e := multipath.Event{Kind: multipath.EvTransferDone, Now: 2, Transfer: 0}
	rec.Record(&e)
	e = multipath.Event{Kind: multipath.EvTransferStart, Now: 3, Transfer: 9, Chunk: 1}
	rec.Record(&e)
	rec.Flush()
	if got := rec.DroppedTransfers(); got != 1 {
		t.Errorf("after a slot was freed, DroppedTransfers() = %d, want still 1", got)
	}
}

func TestNewRecorderErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Paths: pathAttrs(1)}, "Config.Wall"},
		{Config{Wall: FixedEpoch(epoch)}, "Config.Paths"},
		{Config{Wall: FixedEpoch(epoch), Paths: pathAttrs(1), MaxTransfers: 70000}, "1..65536"},
		{Config{Wall: FixedEpoch(epoch), Paths: pathAttrs(1), CNPBurstGap: -1}, "CNPBurstGap"},
		{Config{Wall: FixedEpoch(epoch), Paths: pathAttrs(1), Buffer: -3}, "Config.Buffer = -3"},
	} {
		if _, err := NewRecorder(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewRecorder(%+v) = %v, want an error mentioning %q", tc.cfg, err, tc.want)
		}
	}
}

// TestRecorderNoAllocs checks that Record allocates nothing: always on the
// engine's side (the ring; the builder is held inside its first event so
// that its own allocations cannot be counted), and in synchronous mode for
// every event with tracing off and for chunk starts, path samples, probes
// and CNPs with tracing on (only span creation allocates).
func TestRecorderNoAllocs(t *testing.T) {
	for _, mode := range []struct {
		name          string
		sync, tracing bool
	}{{"async/tracing", false, true}, {"sync/notracing", true, false}, {"sync/tracing", true, true}} {
		reader := sdkmetric.NewManualReader()
		hold := make(chan struct{})
		first := !mode.sync
		wall := func(v vtime.Time) time.Time {
			if first {
				first = false
				<-hold
			}
			return epoch.Add(time.Duration(v))
		}
		cfg := Config{Wall: wall, Paths: pathAttrs(2), Synchronous: mode.sync,
			MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
		if mode.tracing {
			cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
		}
		rec, err := NewRecorder(cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := multipath.Event{Kind: multipath.EvTransferStart, Now: 1, Transfer: 1, Bytes: 1 << 30, Chunk: 1 << 14, Size: 64 << 10}
		rec.Record(&start)
		if mode.sync {
			rec.Flush()
		}
		ev := multipath.Event{}
		now := vtime.Time(10)
		c := uint32(0)
		allocs := testing.AllocsPerRun(1000, func() {
			now += 1000
			ev = multipath.Event{Kind: multipath.EvChunkStart, Now: now, Transfer: 1, Chunk: c % (1 << 14), Path: 1, Attempt: 1, Bytes: 64 << 10}
			rec.Record(&ev)
			ev = multipath.Event{Kind: multipath.EvPathSample, Now: now, Path: 1, Window: 1 << 20, Rate: units.Gbps, InFlight: 1 << 19, SRTT: time.Microsecond}
			rec.Record(&ev)
			ev = multipath.Event{Kind: multipath.EvCNP, Now: now, Path: 1, ECN: 1}
			rec.Record(&ev)
			ev = multipath.Event{Kind: multipath.EvProbe, Now: now, Path: 0, RTT: time.Microsecond}
			rec.Record(&ev)
			if !(mode.sync && mode.tracing) {
				ev = multipath.Event{Kind: multipath.EvChunkDone, Now: now, Transfer: 1, Chunk: c % (1 << 14), Path: 1, Attempt: 1, Bytes: 64 << 10, RTT: time.Microsecond, Latency: time.Microsecond}
				rec.Record(&ev)
			}
			c++
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per event batch, want 0", mode.name, allocs)
		}
		close(hold)
		rec.Close(now)
		if n := rec.DroppedEvents(); n != 0 {
			t.Errorf("%s: %d events dropped; the ring was meant to hold them all", mode.name, n)
		}
	}
}

// TestRecorderRingFull blocks the worker inside its first event and checks
// that Record then drops exactly the events that do not fit, counts them,
// and never blocks.
func TestRecorderRingFull(t *testing.T) {
	release := make(chan struct{})
	first := true
	wall := func(v vtime.Time) time.Time {
		if first {
			first = false
			<-release
		}
		return epoch.Add(time.Duration(v))
	}
	sr := tracetest.NewSpanRecorder()
	rec, err := NewRecorder(Config{Wall: wall, Paths: pathAttrs(1), Buffer: 8,
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))})
	if err != nil {
		t.Fatal(err)
	}
	ev := multipath.Event{Kind: multipath.EvTransferStart, Now: 1, Transfer: 1, Bytes: 100, Chunk: 100, Size: 1}
	rec.Record(&ev)
	for c := range 20 {
		ev = multipath.Event{Kind: multipath.EvChunkStart, Now: 2, Transfer: 1, Chunk: uint32(c), Attempt: 1, Bytes: 1}
		rec.Record(&ev)
	}
	if got, want := rec.DroppedEvents(), int64(20-7); got != want {
		t.Errorf("DroppedEvents() = %d, want %d (ring of 8 holding the blocked event and 7 more)", got, want)
	}
	close(release)
	rec.Close(3)
	if got := len(sr.Ended()); got != 8 {
		t.Errorf("spans after Close = %d, want 8 (7 abandoned chunks and the transfer)", got)
	}
}

// BenchmarkRecordChunk measures the recorder's cost per chunk attempt
// (start, done, path sample) on the engine's goroutine: async is the
// default (a ring copy; the worker builds spans on another goroutine),
// sync does all the work inside Record ("direct": chunk spans built by the
// Recorder, the provider's processor behind NewSpanProcessor; "on": SDK
// spans). dropped/op reports ring overflow: a benchmark loop produces
// chunks far faster than any real transfer.
func BenchmarkRecordChunk(b *testing.B) {
	for _, mode := range []struct {
		name                  string
		sync, tracing, direct bool
	}{{"async/tracing=on", false, true, false}, {"async/tracing=off", false, false, false},
		{"sync/tracing=direct", true, true, true}, {"sync/tracing=on", true, true, false}, {"sync/tracing=off", true, false, false}} {
		b.Run(mode.name, func(b *testing.B) {
			cfg := Config{Wall: FixedEpoch(epoch), Paths: pathAttrs(4), Synchronous: mode.sync,
				MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))}
			var tp *sdktrace.TracerProvider
			if mode.tracing {
				sp := sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter())
				if mode.direct {
					sp = NewSpanProcessor(sp)
				}
				tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp))
				cfg.TracerProvider = tp
			}
			rec, err := NewRecorder(cfg)
			if err != nil {
				b.Fatal(err)
			}
			const chunks = 1 << 12
			now := vtime.Time(1)
			var ev multipath.Event
			id := multipath.TransferID(0)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c := uint32(i % chunks)
				if c == 0 {
					if i > 0 {
						ev = multipath.Event{Kind: multipath.EvTransferDone, Now: now, Transfer: id}
						rec.Record(&ev)
					}
					id++
					ev = multipath.Event{Kind: multipath.EvTransferStart, Now: now, Transfer: id, Bytes: chunks << 16, Chunk: chunks, Size: 1 << 16}
					rec.Record(&ev)
				}
				now += 100
				path := int(c % 4)
				ev = multipath.Event{Kind: multipath.EvChunkStart, Now: now, Transfer: id, Chunk: c, Path: path, Attempt: 1, Bytes: 1 << 16}
				rec.Record(&ev)
				now += 5000
				ev = multipath.Event{Kind: multipath.EvChunkDone, Now: now, Transfer: id, Chunk: c, Path: path, Attempt: 1, Bytes: 1 << 16, RTT: 3 * time.Microsecond, Latency: 5 * time.Microsecond}
				rec.Record(&ev)
				ev = multipath.Event{Kind: multipath.EvPathSample, Now: now, Path: path, Window: 1 << 20, Rate: units.Gbps, InFlight: 1 << 19, SRTT: 3 * time.Microsecond}
				rec.Record(&ev)
			}
			b.StopTimer()
			rec.Close(now)
			b.ReportMetric(float64(rec.DroppedEvents())/float64(b.N), "dropped/op")
			if tp != nil {
				_ = tp.Shutdown(context.Background())
			}
		})
	}
}
