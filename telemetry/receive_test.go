package telemetry

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/telemetry/schema"
	"github.com/mptx-dev/mptx/units"
)

func TestTraceContextRoundTrip(t *testing.T) {
	ts, err := trace.ParseTraceState("vendor=abc,other=x y")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []trace.SpanContext{
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{9}, TraceFlags: trace.FlagsSampled}),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xff}, SpanID: trace.SpanID{0, 0, 0, 0, 0, 0, 0, 1}}),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{7}, TraceFlags: trace.FlagsSampled, TraceState: ts}),
	} {
		b := AppendTraceContext(nil, sc)
		got, err := ParseTraceContext(b)
		if err != nil {
			t.Fatalf("ParseTraceContext(%q) = %v", b, err)
		}
		if !got.Equal(sc.WithRemote(true)) {
			t.Errorf("ParseTraceContext(AppendTraceContext(%v)) = %v", sc, got)
		}
		if !strings.HasPrefix(string(b), "00-") || len(b) < 55 || len(b) > MaxTraceContext {
			t.Errorf("AppendTraceContext = %q, want a version-00 traceparent", b)
		}
	}
	if b := AppendTraceContext([]byte("x"), trace.SpanContext{}); string(b) != "x" {
		t.Errorf("AppendTraceContext(invalid) = %q, want nothing appended", b)
	}
	if sc, err := ParseTraceContext(nil); err != nil || sc.IsValid() {
		t.Errorf("ParseTraceContext(nil) = %v, %v; want no context, no error", sc, err)
	}
	for _, bad := range []string{
		"garbage",
		"00-00000000000000000000000000000000-0000000000000001-01", // zero trace id
		"00-01000000000000000000000000000000-0000000000000000-01", // zero span id
		"00-0100000000000000000000000000000A-0000000000000001-01", // uppercase
		"ff-01000000000000000000000000000000-0000000000000001-01", // version ff
		"00-0100000000000000000000000000000-0000000000000001-01",  // short trace id
		strings.Repeat("a", MaxTraceContext+1),
	} {
		if sc, err := ParseTraceContext([]byte(bad)); err == nil || sc.IsValid() {
			t.Errorf("ParseTraceContext(%.60q) = %v, %v; want an error", bad, sc, err)
		}
	}
	// A bad tracestate is dropped, the traceparent kept (W3C §3.3.1.1).
	sc, err := ParseTraceContext([]byte("00-01000000000000000000000000000000-0000000000000001-01\n=bad=="))
	if err != nil || !sc.IsValid() || sc.TraceState().Len() != 0 {
		t.Errorf("bad tracestate: %v, %v; want the traceparent and no state", sc, err)
	}
}

// FuzzTraceContext: the receiver parses bytes from its peer. Parsing never
// panics, and what parses re-encodes to something that parses the same.
func FuzzTraceContext(f *testing.F) {
	f.Add([]byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	f.Add([]byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00\nrojo=00f067aa0ba902b7,congo=t61rcWkgMzE"))
	f.Add([]byte("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future"))
	f.Add([]byte("00-xyz"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sc, err := ParseTraceContext(b)
		if err != nil {
			if sc.IsValid() {
				t.Fatalf("error %v with a valid context", err)
			}
			return
		}
		if !sc.IsValid() {
			if len(b) != 0 {
				t.Fatalf("ParseTraceContext(%q): no error and no context", b)
			}
			return
		}
		again, err := ParseTraceContext(AppendTraceContext(nil, sc))
		if err != nil || !again.Equal(sc) {
			t.Fatalf("re-encoding %v: %v, %v", sc, again, err)
		}
	})
}

// recvCalls drives a ReceiveRecorder through the cases a receiver meets:
// chunks with and without a hand-off, a rejected hand-off, a duplicate,
// an unknown path, an unknown transfer, a done, a failed, and a transfer
// still open at Close.
func recvCalls(r *ReceiveRecorder, tc []byte) {
	_ = r.Expect(1000, 1, 3*units.KiB, 3, units.KiB, tc)
	c := RecvChunk{Transfer: 1, Index: 0, Path: 0, Bytes: units.KiB, Arrived: 1100, Polled: 1150, HandoffStart: 1160, HandoffEnd: 1400}
	r.Chunk(&c)
	c = RecvChunk{Transfer: 1, Index: 2, Path: 1, Bytes: units.KiB, Arrived: 1200, Polled: 1500}
	r.Chunk(&c)
	r.Duplicate(1600, 1, 2, 1)
	c = RecvChunk{Transfer: 1, Index: 1, Path: 9, Bytes: units.KiB, Polled: 1700, HandoffStart: 1700, HandoffEnd: 1750}
	r.Chunk(&c)
	c = RecvChunk{Transfer: 99, Index: 1, Path: 0, Bytes: units.KiB, Polled: 1700}
	r.Chunk(&c)
	r.Done(1800, 1, "")
	_ = r.Expect(2000, 2, 2*units.KiB, 2, units.KiB, nil)
	c = RecvChunk{Transfer: 2, Index: 0, Path: 0, Bytes: units.KiB, Arrived: 2100, Polled: 2100, HandoffStart: 2100, HandoffEnd: 2300, Rejected: true}
	r.Chunk(&c)
	r.Done(2300, 2, "checksum mismatch")
	_ = r.Expect(3000, 3, units.KiB, 1, units.KiB, tc)
	r.Close(4000)
}

// TestReceiveSpans checks the receiver's spans on both span paths: the
// receive span is the child of the sender's context, chunk spans are its
// children with the right times and attributes, and the outcomes.
func TestReceiveSpans(t *testing.T) {
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab}, SpanID: trace.SpanID{0xcd}, TraceFlags: trace.FlagsSampled})
	tc := AppendTraceContext(nil, parent)
	for _, direct := range []bool{false, true} {
		sr := tracetest.NewSpanRecorder()
		var sp sdktrace.SpanProcessor = sr
		if direct {
			sp = NewSpanProcessor(sr)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp))
		r, err := NewReceiveRecorder(ReceiveConfig{TracerProvider: tp, Wall: FixedEpoch(epoch), Backend: "mem", Peer: "10.0.0.1", Paths: pathAttrs(2)})
		if err != nil {
			t.Fatal(err)
		}
		recvCalls(r, tc)
		spans := sr.Ended()
		byName := map[string][]sdktrace.ReadOnlySpan{}
		for _, s := range spans {
			byName[s.Name()] = append(byName[s.Name()], s)
		}
		recv, chunks := byName[schema.SpanReceive], byName[schema.SpanRecvChunk]
		if len(recv) != 3 || len(chunks) != 4 {
			t.Fatalf("direct=%v: %d receive spans, %d chunk spans; want 3, 4", direct, len(recv), len(chunks))
		}
		t1 := recv[0]
		if t1.Parent().SpanID() != parent.SpanID() || t1.SpanContext().TraceID() != parent.TraceID() || t1.SpanKind() != trace.SpanKindServer {
			t.Errorf("direct=%v: receive span parent %v trace %v kind %v; want the sender's span %v", direct, t1.Parent().SpanID(), t1.SpanContext().TraceID(), t1.SpanKind(), parent.SpanID())
		}
		a := attrMap(t1.Attributes())
		for k, want := range map[string]int64{schema.AttrRecvChunks: 3, schema.AttrRecvDuplicates: 1, schema.AttrRecvQueueMax: 300,
			schema.AttrRecvHandoffSum: 290, schema.AttrRecvLastArrival: 700, schema.AttrRecvLag: 100, schema.AttrTransferBytes: 3072} {
			if got := a[k].AsInt64(); got != want {
				t.Errorf("direct=%v: receive span %s = %d, want %d", direct, k, got, want)
			}
		}
		if a[schema.AttrTransferOutcome].AsString() != schema.TransferDone || t1.EndTime().Sub(epoch) != 1800 {
			t.Errorf("direct=%v: transfer 1 outcome %v end %v", direct, a[schema.AttrTransferOutcome], t1.EndTime().Sub(epoch))
		}
		c0 := chunks[0]
		if c0.Parent().SpanID() != t1.SpanContext().SpanID() || c0.StartTime().Sub(epoch) != 1100 || c0.EndTime().Sub(epoch) != 1400 {
			t.Errorf("direct=%v: chunk 0 parent %v, %v..%v; want the receive span, 1100..1400", direct, c0.Parent().SpanID(), c0.StartTime().Sub(epoch), c0.EndTime().Sub(epoch))
		}
		ca := attrMap(c0.Attributes())
		if ca[schema.AttrRecvQueue].AsInt64() != 50 || ca[schema.AttrRecvWait].AsInt64() != 10 || ca[schema.AttrRecvHandoff].AsInt64() != 240 || ca[schema.AttrDevice].AsString() != "mlx5_0" {
			t.Errorf("direct=%v: chunk 0 attributes %v", direct, ca)
		}
		if c2 := attrMap(chunks[1].Attributes()); chunks[1].EndTime().Sub(epoch) != 1500 || c2[schema.AttrRecvHandoff].AsInt64() != 0 {
			t.Errorf("direct=%v: chunk without a hand-off ends at %v (want its poll, 1500), attributes %v", direct, chunks[1].EndTime().Sub(epoch), c2)
		}
		if c1 := attrMap(chunks[2].Attributes()); c1[schema.AttrPath].AsInt64() != 9 || chunks[2].StartTime().Sub(epoch) != 1700 {
			t.Errorf("direct=%v: chunk on an unknown path: %v from %v", direct, c1, chunks[2].StartTime().Sub(epoch))
		}
		if st := chunks[3].Status(); st.Code != codes.Error || st.Description != schema.HandoffRejected {
			t.Errorf("direct=%v: rejected hand-off status %+v", direct, st)
		}
		if t2 := recv[1]; t2.Status().Code != codes.Error || attrMap(t2.Attributes())[schema.AttrErrorType].AsString() != "checksum mismatch" || t2.Parent().IsValid() {
			t.Errorf("direct=%v: failed transfer without context: status %+v, parent %v", direct, t2.Status(), t2.Parent())
		}
		if t3 := attrMap(recv[2].Attributes()); t3[schema.AttrTransferOutcome].AsString() != schema.TransferAbandoned {
			t.Errorf("direct=%v: open transfer at Close: %v", direct, t3[schema.AttrTransferOutcome])
		}
	}
}

// TestRecvChunkSpansMatchSDK compares the receiver chunk spans built
// directly with the SDK's, whole, under each sampler.
func TestRecvChunkSpansMatchSDK(t *testing.T) {
	res := resource.NewSchemaless(attribute.String(schema.AttrServiceName, "recv-equivalence"))
	tc := AppendTraceContext(nil, trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}))
	for _, s := range []sdktrace.Sampler{sdktrace.AlwaysSample(), sdktrace.ParentBased(sdktrace.AlwaysSample()), sdktrace.NeverSample()} {
		var got [2][]sdktrace.ReadOnlySpan
		for i, direct := range []bool{false, true} {
			sr := tracetest.NewSpanRecorder()
			var sp sdktrace.SpanProcessor = sr
			if direct {
				sp = NewSpanProcessor(sr)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithSampler(s), sdktrace.WithResource(res))
			r, err := NewReceiveRecorder(ReceiveConfig{TracerProvider: tp, Wall: FixedEpoch(epoch), Paths: pathAttrs(2), Synchronous: true})
			if err != nil {
				t.Fatal(err)
			}
			recvCalls(r, tc)
			got[i] = sr.Ended()
		}
		a := normalise(tracetest.SpanStubsFromReadOnlySpans(got[0]))
		b := normalise(tracetest.SpanStubsFromReadOnlySpans(got[1]))
		if len(a) != len(b) {
			t.Fatalf("%s: SDK path %d spans, direct %d", s.Description(), len(a), len(b))
		}
		for i := range a {
			if !reflect.DeepEqual(a[i], b[i]) {
				t.Errorf("%s: span %d differs:\n SDK:    %s\n direct: %s", s.Description(), i, stubString(a[i]), stubString(b[i]))
			}
		}
	}
}

// TestReceiveNoAllocs: the per-chunk calls cost no allocation.
func TestReceiveNoAllocs(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(NewSpanProcessor(tracetest.NewSpanRecorder())))
	r, err := NewReceiveRecorder(ReceiveConfig{TracerProvider: tp, Wall: FixedEpoch(epoch), Paths: pathAttrs(2), Buffer: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(0)
	_ = r.Expect(1, 1, units.MiB, 1<<20, 1, nil)
	c := RecvChunk{Transfer: 1, Path: 1, Bytes: 1, Arrived: 5, Polled: 6, HandoffStart: 7, HandoffEnd: 8}
	if n := testing.AllocsPerRun(1000, func() {
		c.Index++
		r.Chunk(&c)
		r.Duplicate(9, 1, c.Index, 1)
	}); n != 0 {
		t.Errorf("Chunk + Duplicate: %v allocations, want 0", n)
	}
}

// TestBeginTransfer: a transfer span started before the engine's event
// keeps its ids (the trace context handed out), is the child of the
// application's span, and gets the engine's attributes; CancelTransfer
// and Close end the ones the engine never got.
func TestBeginTransfer(t *testing.T) {
	for _, direct := range []bool{false, true} {
		rig := newRig(t, 2, sdktrace.AlwaysSample(), direct)
		app := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x5a}, SpanID: trace.SpanID{0x5b}, TraceFlags: trace.FlagsSampled})
		ctx := trace.ContextWithSpanContext(context.Background(), app)
		tc := rig.rec.BeginTransfer(ctx, 100, 1, "layer3.weights")
		sc, err := ParseTraceContext(tc)
		if err != nil || sc.TraceID() != app.TraceID() {
			t.Fatalf("BeginTransfer's context %q (%v): want the application's trace %v", tc, err, app.TraceID())
		}
		ev := func(e multipath.Event) { rig.rec.Record(&e) }
		ev(multipath.Event{Kind: multipath.EvTransferStart, Now: 100, Transfer: 1, Bytes: 2048, Chunk: 2, Size: 1024})
		ev(multipath.Event{Kind: multipath.EvChunkStart, Now: 110, Transfer: 1, Chunk: 0, Path: 0, Attempt: 1, Bytes: 1024})
		ev(multipath.Event{Kind: multipath.EvChunkDone, Now: 150, Transfer: 1, Chunk: 0, Path: 0, Attempt: 1, Bytes: 1024, RTT: 20, Latency: 40})
		ev(multipath.Event{Kind: multipath.EvTransferDone, Now: 200, Transfer: 1, Bytes: 2048})
		_ = rig.rec.BeginTransfer(context.Background(), 300, 2, "")
		rig.rec.CancelTransfer(310, 2, "submit: too many transfers")
		_ = rig.rec.BeginTransfer(context.Background(), 400, 3, "")
		rig.rec.Close(500)
		var transfer, chunk sdktrace.ReadOnlySpan
		outcomes := map[int64]string{}
		for _, s := range rig.spans.Ended() {
			a := attrMap(s.Attributes())
			switch s.Name() {
			case schema.SpanTransfer:
				outcomes[a[schema.AttrTransferID].AsInt64()] = a[schema.AttrTransferOutcome].AsString()
				if a[schema.AttrTransferID].AsInt64() == 1 {
					transfer = s
				}
			case schema.SpanChunk:
				chunk = s
			}
		}
		if transfer == nil || chunk == nil {
			t.Fatalf("direct=%v: transfer %v chunk %v", direct, transfer, chunk)
		}
		a := attrMap(transfer.Attributes())
		if transfer.SpanContext().SpanID() != sc.SpanID() || transfer.Parent().SpanID() != app.SpanID() ||
			a[schema.AttrTransferName].AsString() != "layer3.weights" || a[schema.AttrTransferChunks].AsInt64() != 2 || transfer.EndTime().Sub(epoch) != 200 {
			t.Errorf("direct=%v: transfer span %v parent %v attrs %v end %v", direct, transfer.SpanContext().SpanID(), transfer.Parent().SpanID(), a, transfer.EndTime().Sub(epoch))
		}
		if chunk.Parent().SpanID() != sc.SpanID() {
			t.Errorf("direct=%v: chunk's parent %v, want the begun transfer span %v", direct, chunk.Parent().SpanID(), sc.SpanID())
		}
		if outcomes[2] != schema.TransferFailed || outcomes[3] != schema.TransferAbandoned || outcomes[1] != schema.TransferDone {
			t.Errorf("direct=%v: outcomes %v; want 1 done, 2 failed (cancelled), 3 abandoned (never submitted)", direct, outcomes)
		}
	}
	// Tracing off: nothing to carry.
	r, err := NewRecorder(Config{Wall: FixedEpoch(epoch), Paths: pathAttrs(1), Synchronous: true})
	if err != nil {
		t.Fatal(err)
	}
	if tc := r.BeginTransfer(context.Background(), 1, 1, ""); tc != nil {
		t.Errorf("BeginTransfer without tracing = %q, want nil", tc)
	}
}
