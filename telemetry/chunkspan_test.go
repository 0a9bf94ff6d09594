package telemetry

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/telemetry/internal/synth"
	"github.com/mptx-dev/mptx/telemetry/schema"
	"github.com/mptx-dev/mptx/vtime"
)

// edgeEvents feeds r the cases a synthetic run does not reach: a superseded
// attempt, a completion without a start (reconstructed from its latency), a
// path outside the table, a requeue, a chunk still open when its transfer
// is done, a failed transfer, a transfer open at Close.
func edgeEvents(r *Recorder) {
	ev := func(e multipath.Event) { r.Record(&e) }
	ev(multipath.Event{Kind: multipath.EvTransferStart, Now: 1000, Transfer: 1, Bytes: 4096, Chunk: 4, Size: 1024})
	ev(multipath.Event{Kind: multipath.EvChunkStart, Now: 1100, Transfer: 1, Chunk: 0, Path: 0, Attempt: 1, Bytes: 1024})
	ev(multipath.Event{Kind: multipath.EvChunkStart, Now: 1200, Transfer: 1, Chunk: 0, Path: 1, Attempt: 2, Bytes: 1024})
	ev(multipath.Event{Kind: multipath.EvChunkDone, Now: 1500, Transfer: 1, Chunk: 0, Path: 1, Attempt: 2, Bytes: 1024, RTT: 200, Latency: 300, ECN: 2})
	ev(multipath.Event{Kind: multipath.EvChunkStart, Now: 1300, Transfer: 1, Chunk: 1, Path: 7, Attempt: 1, Bytes: 1024})
	ev(multipath.Event{Kind: multipath.EvChunkRequeue, Now: 1600, Transfer: 1, Chunk: 1, Path: 7, Attempt: 1, Reason: "path down"})
	ev(multipath.Event{Kind: multipath.EvChunkDone, Now: 1700, Transfer: 1, Chunk: 2, Path: 0, Attempt: 1, Bytes: 1024, RTT: 100, Latency: 250})
	ev(multipath.Event{Kind: multipath.EvCNP, Now: 1750, Path: 0, ECN: 3})
	ev(multipath.Event{Kind: multipath.EvChunkStart, Now: 1800, Transfer: 1, Chunk: 3, Path: 0, Attempt: 1, Bytes: 1024})
	ev(multipath.Event{Kind: multipath.EvTransferDone, Now: 2000, Transfer: 1, Bytes: 4096})
	ev(multipath.Event{Kind: multipath.EvTransferStart, Now: 3000, Transfer: 2, Bytes: 2048, Chunk: 2, Size: 1024})
	ev(multipath.Event{Kind: multipath.EvChunkStart, Now: 3100, Transfer: 2, Chunk: 0, Path: 2, Attempt: 1, Bytes: 1024})
	ev(multipath.Event{Kind: multipath.EvTransferFailed, Now: 3500, Transfer: 2, Reason: "all paths down"})
	ev(multipath.Event{Kind: multipath.EvTransferStart, Now: 4000, Transfer: 3, Bytes: 1024, Chunk: 1, Size: 1024})
	ev(multipath.Event{Kind: multipath.EvChunkStart, Now: 4100, Transfer: 3, Chunk: 0, Path: 1, Attempt: 1, Bytes: 1024})
	r.Close(5000)
}

// normalise replaces trace and span ids by their order of appearance (the
// two paths draw different random ids) and clears ChildSpanCount (the SDK
// counts its own children only), so that spans can be compared whole.
func normalise(stubs tracetest.SpanStubs) tracetest.SpanStubs {
	traces := map[trace.TraceID]byte{}
	spans := map[trace.SpanID]byte{}
	norm := func(sc trace.SpanContext) trace.SpanContext {
		if !sc.IsValid() {
			return sc
		}
		if _, ok := traces[sc.TraceID()]; !ok {
			traces[sc.TraceID()] = byte(len(traces) + 1)
		}
		if _, ok := spans[sc.SpanID()]; !ok {
			spans[sc.SpanID()] = byte(len(spans) + 1)
		}
		return sc.WithTraceID(trace.TraceID{traces[sc.TraceID()]}).WithSpanID(trace.SpanID{spans[sc.SpanID()]})
	}
	out := slices.Clone(stubs)
	for i := range out {
		out[i].SpanContext = norm(out[i].SpanContext)
		out[i].Parent = norm(out[i].Parent)
		out[i].ChildSpanCount = 0
	}
	return out
}

// runBoth feeds the same events to a Recorder whose provider goes through
// the SDK and to one behind NewSpanProcessor, and returns the spans each
// processor saw end.
func runBoth(t *testing.T, sampler sdktrace.Sampler, paths int, feed func(*Recorder)) (sdk, direct []sdktrace.ReadOnlySpan) {
	t.Helper()
	res := resource.NewSchemaless(attribute.String(schema.AttrServiceName, "equivalence"))
	for _, d := range []bool{false, true} {
		sr := tracetest.NewSpanRecorder()
		var sp sdktrace.SpanProcessor = sr
		if d {
			sp = NewSpanProcessor(sr)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithSampler(sampler), sdktrace.WithResource(res))
		rec, err := NewRecorder(Config{TracerProvider: tp, Wall: FixedEpoch(epoch), CC: "dcqcn", Backend: "mem",
			Peer: "10.0.0.2", Paths: pathAttrs(paths)})
		if err != nil {
			t.Fatal(err)
		}
		feed(rec)
		rec.Close(vtime.Time(time.Hour))
		if d {
			direct = sr.Ended()
		} else {
			sdk = sr.Ended()
		}
	}
	return sdk, direct
}

// TestChunkSpansMatchSDK checks that the chunk spans a Recorder builds
// itself are the SDK's: same spans, in the same order, with the same name,
// kind, parent, trace flags, timestamps, attributes (in order), events,
// status, resource and scope, for every sampler Setup offers.
func TestChunkSpansMatchSDK(t *testing.T) {
	synthRun := func(r *Recorder) { synth.Run(threePaths(), r) }
	for _, sc := range []struct {
		name string
		s    sdktrace.Sampler
	}{
		{"always_on", sdktrace.AlwaysSample()},
		{"parentbased_always_on", sdktrace.ParentBased(sdktrace.AlwaysSample())},
		{"always_off", sdktrace.NeverSample()},
		{"parentbased_always_off", sdktrace.ParentBased(sdktrace.NeverSample())},
	} {
		for _, feed := range []struct {
			name string
			f    func(*Recorder)
		}{{"synth", synthRun}, {"edges", edgeEvents}} {
			t.Run(sc.name+"/"+feed.name, func(t *testing.T) {
				sdk, direct := runBoth(t, sc.s, 3, feed.f)
				if len(sdk) != len(direct) {
					t.Fatalf("SDK path ended %d spans, direct path %d", len(sdk), len(direct))
				}
				chunks := 0
				ids := map[trace.SpanID]bool{}
				for _, s := range direct {
					if s.Name() != schema.SpanChunk {
						continue
					}
					chunks++
					if id := s.SpanContext().SpanID(); !id.IsValid() || ids[id] {
						t.Errorf("chunk span id %v: invalid or repeated", id)
					} else {
						ids[id] = true
					}
					if _, ok := s.(*chunkSpan); !ok {
						t.Errorf("direct path ended a %T, want a *chunkSpan", s)
					}
				}
				if sc.name == "always_on" && chunks == 0 {
					t.Fatal("no chunk spans: the comparison proves nothing")
				}
				a := normalise(tracetest.SpanStubsFromReadOnlySpans(sdk))
				b := normalise(tracetest.SpanStubsFromReadOnlySpans(direct))
				for i := range a {
					if !reflect.DeepEqual(a[i], b[i]) {
						t.Errorf("span %d differs:\n SDK:    %s\n direct: %s", i, stubString(a[i]), stubString(b[i]))
					}
				}
			})
		}
	}
}

func stubString(s tracetest.SpanStub) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s kind=%v ctx=%v/%v flags=%v parent=%v start=%v end=%v status=%+v scope=%+v res=%v links=%d events=%d\n    attrs:",
		s.Name, s.SpanKind, s.SpanContext.TraceID(), s.SpanContext.SpanID(), s.SpanContext.TraceFlags(), s.Parent.SpanID(),
		s.StartTime.Sub(epoch), s.EndTime.Sub(epoch), s.Status, s.InstrumentationScope, s.Resource, len(s.Links), len(s.Events))
	for _, kv := range s.Attributes {
		fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value.Emit())
	}
	return b.String()
}

// mutator changes every chunk span in OnStart, as enrichment processors do.
type mutator struct{ sdktrace.SpanProcessor }

func (mutator) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.Name() != schema.SpanChunk {
		return
	}
	s.SetAttributes(attribute.String("enriched", "yes"), attribute.Int64(schema.AttrChunkBytes, -1))
	s.AddEvent("seen", trace.WithTimestamp(epoch), trace.WithAttributes(attribute.Int("n", 1)))
	s.SetStatus(codes.Ok, "")
	s.SetName("renamed")
	s.AddLink(trace.Link{Attributes: []attribute.KeyValue{attribute.Bool("l", true)}})
	s.RecordError(fmt.Errorf("recorded"), trace.WithTimestamp(epoch))
}

func (mutator) OnEnd(sdktrace.ReadOnlySpan) {}

// TestChunkSpanChangedInOnStart checks that a processor changing chunk
// spans in OnStart gets the SDK's result on the direct path too.
func TestChunkSpanChangedInOnStart(t *testing.T) {
	var got [2]tracetest.SpanStubs
	for i, d := range []bool{false, true} {
		sr := tracetest.NewSpanRecorder()
		procs := []sdktrace.SpanProcessor{mutator{sr}, sr}
		var opts []sdktrace.TracerProviderOption
		if d {
			opts = append(opts, sdktrace.WithSpanProcessor(NewSpanProcessor(procs...)))
		} else {
			for _, p := range procs {
				opts = append(opts, sdktrace.WithSpanProcessor(p))
			}
		}
		rec, err := NewRecorder(Config{TracerProvider: sdktrace.NewTracerProvider(opts...), Wall: FixedEpoch(epoch), Paths: pathAttrs(2), Synchronous: true})
		if err != nil {
			t.Fatal(err)
		}
		edgeEvents(rec)
		got[i] = normalise(tracetest.SpanStubsFromReadOnlySpans(sr.Ended()))
	}
	if len(got[0]) != len(got[1]) || len(got[0]) == 0 {
		t.Fatalf("SDK path ended %d spans, direct path %d", len(got[0]), len(got[1]))
	}
	renamed := 0
	for i := range got[0] {
		a, b := got[0][i], got[1][i]
		if a.Name == "renamed" {
			renamed++
		}
		// The SDK de-duplicates attributes in place (an overridden key keeps
		// its position); compare them as sets.
		sortKV := func(kv []attribute.KeyValue) {
			slices.SortFunc(kv, func(x, y attribute.KeyValue) int { return strings.Compare(string(x.Key), string(y.Key)) })
		}
		sortKV(a.Attributes)
		sortKV(b.Attributes)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("span %d differs:\n SDK:    %s\n direct: %s\n events %+v\n        %+v", i, stubString(a), stubString(b), a.Events, b.Events)
		}
	}
	if renamed == 0 {
		t.Error("the mutator changed no span")
	}
}

// TestSpanProcessorForwards checks that the wrapper forwards every call,
// that nesting wrappers does not deliver chunk spans twice, and that a
// processor outside the wrapper sees transfer spans only (as documented).
func TestSpanProcessorForwards(t *testing.T) {
	inner, outside := tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()
	exp := tracetest.NewInMemoryExporter()
	wrapped := NewSpanProcessor(NewSpanProcessor(inner), sdktrace.NewSimpleSpanProcessor(exp))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(wrapped), sdktrace.WithSpanProcessor(outside))
	rec, err := NewRecorder(Config{TracerProvider: tp, Wall: FixedEpoch(epoch), Paths: pathAttrs(3)})
	if err != nil {
		t.Fatal(err)
	}
	res := synth.Run(threePaths(), rec)
	rec.Close(res.End)
	count := func(spans []sdktrace.ReadOnlySpan) (transfers, chunks int) {
		for _, s := range spans {
			if s.Name() == schema.SpanTransfer {
				transfers++
			} else {
				chunks++
			}
		}
		return
	}
	want := 17 + res.Requeues
	if tr, ch := count(inner.Ended()); tr != 1 || ch != want {
		t.Errorf("nested processor: %d transfer, %d chunk spans; want 1, %d", tr, ch, want)
	}
	if got := len(inner.Started()); got != 1+want {
		t.Errorf("nested processor: %d OnStart calls, want %d", got, 1+want)
	}
	if tr, ch := count(exp.GetSpans().Snapshots()); tr != 1 || ch != want {
		t.Errorf("exporter: %d transfer, %d chunk spans; want 1, %d", tr, ch, want)
	}
	if tr, ch := count(outside.Ended()); tr != 1 || ch != 0 {
		t.Errorf("processor outside the wrapper: %d transfer, %d chunk spans; want 1, 0", tr, ch)
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Errorf("ForceFlush: %v", err)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	exp.Reset()
	// After Shutdown the wrapped processors are shut down too: the simple
	// processor drops what it is given.
	wrapped.OnEnd(inner.Ended()[0])
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("exporter received %d spans after Shutdown", n)
	}
}
