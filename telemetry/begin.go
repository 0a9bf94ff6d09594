package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/telemetry/schema"
	"github.com/mptx-dev/mptx/vtime"
)

// begunTransfer is a transfer span started by BeginTransfer.
type begunTransfer struct {
	ctx   context.Context
	span  trace.Span
	procs []*spanProcessor // processors that answered the handshake
}

// BeginTransfer starts transfer id's mptx.transfer span at now, before the
// engine learns of the transfer, and returns the span's W3C trace context
// (AppendTraceContext) for the session to carry to the receiver on its
// control channel, so that the receiver's spans (ReceiveRecorder.Expect)
// join this trace. Call it just before the engine's Submit for id, from
// the goroutine that calls Record; the engine's transfer-start event then
// completes the span (size, chunks) instead of starting a new one, and the
// rest is as without BeginTransfer.
//
// ctx is the application's context: when it carries a span, the transfer
// span is its child (kind client); otherwise the transfer is the root of a
// new trace. name, if not empty, is recorded as mptx.transfer.name (the
// application's label for the tensor, which `mptx trace analyze --name`
// filters on).
//
// If Submit then fails, call CancelTransfer. With tracing off (no
// provider, or the no-op one) it returns nil and does nothing. It costs
// one SDK span start (a few microseconds and allocations, once per
// transfer, never per chunk).
func (r *Recorder) BeginTransfer(ctx context.Context, now vtime.Time, id multipath.TransferID, name string) []byte {
	if !r.tracing {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	hs := &handshake{active: true}
	attrs := make([]attribute.KeyValue, 0, 2+len(r.transferAttrs))
	attrs = append(attrs, attribute.Int64(schema.AttrTransferID, int64(id)))
	if name != "" {
		attrs = append(attrs, attribute.String(schema.AttrTransferName, name))
	}
	attrs = append(attrs, r.transferAttrs...)
	opts := []trace.SpanStartOption{
		trace.WithTimestamp(r.wall(now)),
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrs...),
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		opts = append(opts, trace.WithNewRoot())
	}
	sctx, span := r.tracer.Start(context.WithValue(ctx, handshakeKey{}, hs), schema.SpanTransfer, opts...)
	hs.active = false
	r.beginMu.Lock()
	if r.begun == nil {
		r.begun = map[multipath.TransferID]begunTransfer{}
	}
	old, dup := r.begun[id]
	r.begun[id] = begunTransfer{ctx: sctx, span: span, procs: hs.procs}
	r.beginMu.Unlock()
	if dup {
		endAbandoned(old.span, r.wall(now), "BeginTransfer called again for the same id before Submit")
	}
	return AppendTraceContext(nil, span.SpanContext())
}

// CancelTransfer ends the span BeginTransfer started for id, as failed
// with reason, when the engine never got the transfer (Submit failed). It
// does nothing for an id without such a span.
func (r *Recorder) CancelTransfer(now vtime.Time, id multipath.TransferID, reason string) {
	b, ok := r.takeBegun(id)
	if !ok {
		return
	}
	b.span.SetAttributes(attribute.String(schema.AttrTransferOutcome, schema.TransferFailed), attribute.String(schema.AttrErrorType, reason))
	b.span.SetStatus(codes.Error, reason)
	b.span.End(trace.WithTimestamp(r.wall(now)))
}

// takeBegun removes and returns id's span started by BeginTransfer.
func (r *Recorder) takeBegun(id multipath.TransferID) (begunTransfer, bool) {
	r.beginMu.Lock()
	defer r.beginMu.Unlock()
	b, ok := r.begun[id]
	if ok {
		delete(r.begun, id)
	}
	return b, ok
}

// abandonBegun ends every span BeginTransfer started whose transfer never
// reached the engine (at Close).
func (r *Recorder) abandonBegun(now vtime.Time) {
	r.beginMu.Lock()
	left := r.begun
	r.begun = nil
	r.beginMu.Unlock()
	for _, b := range left {
		endAbandoned(b.span, r.wall(now), "recorder closed before the transfer was submitted")
	}
}

// endAbandoned ends span as abandoned with reason at t.
func endAbandoned(span trace.Span, t time.Time, reason string) {
	span.SetAttributes(attribute.String(schema.AttrTransferOutcome, schema.TransferAbandoned), attribute.String(schema.AttrErrorType, reason))
	span.SetStatus(codes.Error, reason)
	span.End(trace.WithTimestamp(t))
}
