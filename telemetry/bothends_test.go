package telemetry_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/telemetry"
	"github.com/mptx-dev/mptx/telemetry/schema"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// recvClock is a receiver's own clock in virtual time: it follows the
// network's clock, and an application hand-off that takes time moves it
// ahead (a single-threaded receiver slower than the network falls behind).
type recvClock struct {
	net *mem.Network
	own vtime.Time
}

func (c *recvClock) Now() vtime.Time { return max(c.own, c.net.Now()) }

// bothEnds is one transfer through the real driver at both ends over the
// in-memory backend, in virtual time: an mptx.Sender recording into a
// Recorder (transfer span begun with BeginTransfer, its trace context
// handed to the receiver as a session's control channel would), and an
// unmodified mptx.Receiver observed through a ReceiverTap into a
// ReceiveRecorder.
type bothEnds struct {
	sentAt, recvAt vtime.Time
	sendErr        error
	recvErr        error
	plan           chunk.Plan
	start          vtime.Time
}

type bothEndsConfig struct {
	paths     []mem.PathConfig
	size      units.Bytes
	handoff   time.Duration // the application's OnChunk cost per chunk
	pollEvery time.Duration // the receiver polls no more often than this (0: at every event)
	sendTP    trace.TracerProvider
	recvTP    trace.TracerProvider
	parent    context.Context
	epoch     time.Time // wall time of virtual zero; zero: 2026-03-01 12:00 UTC
}

func runBothEnds(t testing.TB, cfg bothEndsConfig) bothEnds {
	t.Helper()
	net, err := mem.New(mem.Config{Paths: cfg.paths, SendRegion: make([]byte, cfg.size), RecvRegion: make([]byte, cfg.size)})
	if err != nil {
		t.Fatal(err)
	}
	epoch := cfg.epoch
	if epoch.IsZero() {
		epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	}
	srec, err := telemetry.NewRecorder(telemetry.Config{TracerProvider: cfg.sendTP, Wall: telemetry.FixedEpoch(epoch),
		CC: "dcqcn", Backend: "mem", Peer: "receiver", Paths: memPathAttrs(len(cfg.paths)), Synchronous: true})
	if err != nil {
		t.Fatal(err)
	}
	rrec, err := telemetry.NewReceiveRecorder(telemetry.ReceiveConfig{TracerProvider: cfg.recvTP, Wall: telemetry.FixedEpoch(epoch),
		Backend: "mem", Peer: "sender", Paths: memPathAttrs(len(cfg.paths)), Synchronous: true})
	if err != nil {
		t.Fatal(err)
	}
	var res bothEnds
	sent, got := false, false
	snd, err := mptx.NewSender(net.Conn(), mptx.SenderConfig{
		Engine: multipath.Config{CC: "dcqcn", Recorder: srec, ChunkSize: 256 * units.KiB},
		OnDone: func(_ multipath.TransferID, now vtime.Time, err error) {
			sent, res.sentAt, res.sendErr = true, now, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	clock := &recvClock{net: net}
	tap := telemetry.NewReceiverTap(net.Receiver(), rrec, clock)
	app := func(multipath.TransferID, chunk.Chunk) error {
		clock.own = clock.Now().Add(cfg.handoff) // the hand-off's work
		return nil
	}
	rcv, err := mptx.NewReceiver(tap, mptx.ReceiverConfig{
		OnChunk: tap.OnChunk(app),
		OnDone: tap.OnDone(func(_ multipath.TransferID, now vtime.Time, err error) {
			got, res.recvAt, res.recvErr = true, clock.Now(), err
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	parent := cfg.parent
	if parent == nil {
		parent = context.Background()
	}
	res.start = net.Now()
	const id = 77
	tc := srec.BeginTransfer(parent, res.start, id, "both-ends")
	tag, plan, err := snd.Submit(res.start, multipath.TransferSpec{ID: id, Size: cfg.size})
	if err != nil {
		t.Fatal(err)
	}
	res.plan = plan
	// The control channel: the plan and the trace context reach the receiver.
	if err := rcv.Expect(tag, id, plan, 0); err != nil {
		t.Fatal(err)
	}
	if err := tap.Expect(tag, id, plan, tc); err != nil {
		t.Fatal(err)
	}
	next := snd.Step(res.start)
	var nextPoll vtime.Time
	for i := 0; !(sent && got); i++ {
		at := vtime.Earliest(net.Next(), next)
		if sent && !got { // the network is done; the receiver catches up
			at = max(net.Now(), clock.Now(), nextPoll)
			if net.Next() != 0 {
				at = min(at, net.Next())
			}
		}
		if at == 0 || i > 10_000_000 {
			t.Fatalf("stuck at %v (sent %v got %v)", net.Now(), sent, got)
		}
		if at > net.Now() {
			net.AdvanceTo(at)
		}
		if now := clock.Now(); now >= nextPoll {
			rcv.Step(now)
			nextPoll = now.Add(cfg.pollEvery)
		}
		next = snd.Step(net.Now())
	}
	srec.Close(max(res.sentAt, res.recvAt))
	rrec.Close(max(res.sentAt, res.recvAt))
	return res
}

// TestBothEndsOneTrace runs a transfer through the real driver at both
// ends with a slow receiver (each hand-off costs 100 µs of the receiver's
// time; the network delivers a 256 KiB chunk every ~30 µs) and checks that
// the spans form one trace (the receive span is the sender's transfer
// span's child, the receiver's chunk spans the receive span's) and that
// the receiver's attributes show where its time went.
func TestBothEndsOneTrace(t *testing.T) {
	for _, direct := range []bool{false, true} {
		wrap := func(sr *tracetest.SpanRecorder) sdktrace.SpanProcessor {
			if direct {
				return telemetry.NewSpanProcessor(sr)
			}
			return sr
		}
		ssr, rsr := tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()
		stp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(wrap(ssr)),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String(schema.AttrServiceName, "sender"))))
		rtp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(wrap(rsr)),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String(schema.AttrServiceName, "receiver"))))
		const handoff = 100 * time.Microsecond
		res := runBothEnds(t, bothEndsConfig{
			paths:   []mem.PathConfig{{Rate: 100 * units.Gbps, NIC: 0}, {Rate: 100 * units.Gbps, NIC: 1}},
			size:    8 * units.MiB,
			handoff: handoff,
			sendTP:  stp, recvTP: rtp,
		})
		if res.sendErr != nil || res.recvErr != nil {
			t.Fatalf("transfer: send %v, receive %v", res.sendErr, res.recvErr)
		}
		var transfer sdktrace.ReadOnlySpan
		for _, s := range ssr.Ended() {
			if s.Name() == schema.SpanTransfer {
				transfer = s
			}
		}
		var receive sdktrace.ReadOnlySpan
		var chunks []sdktrace.ReadOnlySpan
		for _, s := range rsr.Ended() {
			switch s.Name() {
			case schema.SpanReceive:
				receive = s
			case schema.SpanRecvChunk:
				chunks = append(chunks, s)
			}
		}
		if transfer == nil || receive == nil {
			t.Fatalf("direct=%v: transfer span %v, receive span %v", direct, transfer, receive)
		}
		if receive.SpanContext().TraceID() != transfer.SpanContext().TraceID() || receive.Parent().SpanID() != transfer.SpanContext().SpanID() {
			t.Errorf("direct=%v: receive span in trace %v under %v; want the sender's trace %v under its transfer span %v", direct,
				receive.SpanContext().TraceID(), receive.Parent().SpanID(), transfer.SpanContext().TraceID(), transfer.SpanContext().SpanID())
		}
		if len(chunks) != res.plan.Count {
			t.Fatalf("direct=%v: %d receiver chunk spans, want one per chunk (%d)", direct, len(chunks), res.plan.Count)
		}
		var last time.Time
		for _, c := range chunks {
			a := spanAttrs(c)
			if c.Parent().SpanID() != receive.SpanContext().SpanID() || c.SpanContext().TraceID() != transfer.SpanContext().TraceID() {
				t.Errorf("direct=%v: receiver chunk span not under the receive span", direct)
			}
			if got := time.Duration(a[schema.AttrRecvHandoff].AsInt64()); got != handoff {
				t.Errorf("direct=%v: hand-off %v, want the application's %v", direct, got, handoff)
			}
			last = maxTime(last, c.StartTime())
		}
		ra := spanAttrs(receive)
		// 32 chunks × 100 µs of hand-off, the network done in ~340 µs: the
		// receiver finishes long after the last arrival, and the spans say so.
		lag := time.Duration(ra[schema.AttrRecvLag].AsInt64())
		if want := res.recvAt.Sub(res.sentAt); lag < want || lag < time.Millisecond {
			t.Errorf("direct=%v: receiver lag %v; want at least the gap between the sender's completion and the receiver's (%v) and > 1ms", direct, lag, want)
		}
		if got, want := receive.EndTime().Sub(last), lag; got != want {
			t.Errorf("direct=%v: receive span ends %v after the last arrival, lag attribute %v", direct, got, want)
		}
		net := transfer.EndTime().Sub(transfer.StartTime())
		t.Logf("direct=%v: %d chunks; network (sender's span) %v; receiver lag after the last arrival %v; receiver done %v after start",
			direct, len(chunks), net, lag, res.recvAt.Sub(res.start))
		if net >= lag {
			t.Errorf("direct=%v: network time %v not below the receiver's lag %v: the slow receiver is not visible", direct, net, lag)
		}
	}
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
