package telemetry

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/telemetry/schema"
)

// NewSpanProcessor wraps span processors (typically batch processors over
// exporters) for a TracerProvider that Recorders will use, and lets a
// Recorder hand its mptx.chunk spans straight to them.
//
// Why: an SDK span costs about 13 allocations (3 KB) and several
// microseconds to start and end, most of it generality a chunk span does
// not need (mutable state, locking, attribute de-duplication, a context per
// child). One chunk span per chunk attempt made the garbage collector and
// the span machinery the largest part of tracing's cost to the engine. A
// Recorder whose transfer span is started through a provider holding this
// processor builds each chunk span itself instead: one immutable
// sdktrace.ReadOnlySpan of one allocation, its attributes produced when an
// exporter asks for them, handed to the wrapped processors (OnStart, then
// OnEnd) exactly as the SDK would hand them its own spans. Exporters see
// the same span as before: name, kind, parent, trace flags and trace
// state, timestamps, attributes, status, resource and instrumentation
// scope. Differences, none of which OTLP carries: the span IDs come from
// the Recorder's own generator (random, like the SDK's default) rather than
// the provider's IDGenerator; the sampling decision is the transfer span's
// (what the default parent-based sampler decides, and what every
// OTEL_TRACES_SAMPLER value decides for a child of the same trace);
// ChildSpanCount of the transfer span does not count them; and span limits
// are not applied (a chunk span has at most 13 attributes, far under the
// default 128).
//
// Spans of other tracers pass through unchanged: the processor forwards
// every call to the wrapped processors in order. Processors registered on
// the provider outside this wrapper (TracerProvider.RegisterSpanProcessor)
// see transfer spans only; wrap them too. Setup builds its provider with
// this processor around its exporters.
//
// How a Recorder finds it: it starts each transfer span with a context
// carrying a request that OnStart answers (the SDK passes the context given
// to Start to every processor's OnStart), so no registry or type assertion
// on the provider is needed, and a provider without this processor keeps
// the SDK path.
func NewSpanProcessor(next ...sdktrace.SpanProcessor) sdktrace.SpanProcessor {
	return &spanProcessor{next: next}
}

type spanProcessor struct {
	next []sdktrace.SpanProcessor
}

var _ sdktrace.SpanProcessor = (*spanProcessor)(nil)

// handshakeKey is the context key under which a Recorder passes its
// *handshake to tracer.Start for a transfer span.
type handshakeKey struct{}

// handshake is a Recorder's request, answered by every spanProcessor the
// transfer span reaches.
type handshake struct {
	active bool
	procs  []*spanProcessor
}

// OnStart answers a Recorder's handshake, then forwards. A processor nested
// inside another answers nothing (the outer one forwards to it).
func (p *spanProcessor) OnStart(parent context.Context, s sdktrace.ReadWriteSpan) {
	h, _ := parent.Value(handshakeKey{}).(*handshake)
	if h != nil && h.active {
		h.procs = append(h.procs, p)
		h.active = false
		defer func() { h.active = true }()
	}
	for _, n := range p.next {
		n.OnStart(parent, s)
	}
}

// OnEnd forwards.
func (p *spanProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	for _, n := range p.next {
		n.OnEnd(s)
	}
}

// Shutdown shuts every wrapped processor down and returns their errors.
func (p *spanProcessor) Shutdown(ctx context.Context) error {
	var errs []error
	for _, n := range p.next {
		errs = append(errs, n.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// ForceFlush flushes every wrapped processor and returns their errors.
func (p *spanProcessor) ForceFlush(ctx context.Context) error {
	var errs []error
	for _, n := range p.next {
		errs = append(errs, n.ForceFlush(ctx))
	}
	return errors.Join(errs...)
}

// spanSource is what a Recorder's chunk spans share, immutable: the
// provider's resource and the tracer's scope (read from a transfer span)
// and the paths' static attributes.
type spanSource struct {
	res   *resource.Resource
	scope instrumentation.Scope
	tp    trace.TracerProvider
	paths [][]attribute.KeyValue
}

// pathAttrs returns path i's static attributes, or nil outside the table.
func (src *spanSource) pathAttrs(i int32) []attribute.KeyValue {
	if i < 0 || int(i) >= len(src.paths) {
		return nil
	}
	return src.paths[i]
}

// chunkSpan is an mptx.chunk span built by the Recorder (see
// NewSpanProcessor). It is created when its attempt ends, handed to the
// processors' OnStart, during which they may change it like any span, then
// ended and handed to their OnEnd; from then on it is immutable and safe
// for concurrent reads. Its attributes are those of the SDK path
// (Recorder.endChunk): transfer id, chunk index, attempt, bytes, outcome,
// the path's attributes, RTT, latency and ECN marks when acknowledged,
// error.type when there is a reason.
type chunkSpan struct {
	// nil: embedded only for the interfaces' unexported methods; every
	// method is implemented below.
	sdktrace.ReadWriteSpan

	src        *spanSource
	parent     trace.SpanContext
	id         trace.SpanID
	start, end time.Time
	transfer   multipath.TransferID
	bytes      int64
	rtt        int64
	latency    int64
	ecn        int64
	outcome    string
	reason     string
	index      uint32
	path       int32
	attempt    uint16
	ended      bool
	x          *spanChanges // what processors changed in OnStart; nil if nothing

	// recv marks a receiver's mptx.recv.chunk span (ReceiveRecorder);
	// then queue, wait and handoff (ns) replace rtt, latency and ecn,
	// attempt and outcome are unused, and reason, if set, is a rejected
	// hand-off.
	recv                 bool
	queue, wait, handoff int64
}

// spanChanges holds the rare changes span processors make in OnStart.
type spanChanges struct {
	name      string
	attrs     []attribute.KeyValue
	events    []sdktrace.Event
	links     []sdktrace.Link
	status    sdktrace.Status
	statusSet bool
}

var _ sdktrace.ReadWriteSpan = (*chunkSpan)(nil)

func (c *chunkSpan) changes() *spanChanges {
	if c.x == nil {
		c.x = &spanChanges{}
	}
	return c.x
}

// Name implements sdktrace.ReadOnlySpan.
func (c *chunkSpan) Name() string {
	if c.x != nil && c.x.name != "" {
		return c.x.name
	}
	if c.recv {
		return schema.SpanRecvChunk
	}
	return schema.SpanChunk
}

// SpanContext implements trace.Span: the parent's trace, flags and state
// with the span's own id.
func (c *chunkSpan) SpanContext() trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    c.parent.TraceID(),
		SpanID:     c.id,
		TraceFlags: c.parent.TraceFlags(),
		TraceState: c.parent.TraceState(),
	})
}

// Parent implements sdktrace.ReadOnlySpan: the transfer span.
func (c *chunkSpan) Parent() trace.SpanContext { return c.parent }

// SpanKind implements sdktrace.ReadOnlySpan.
func (c *chunkSpan) SpanKind() trace.SpanKind { return trace.SpanKindInternal }

// StartTime implements sdktrace.ReadOnlySpan.
func (c *chunkSpan) StartTime() time.Time { return c.start }

// EndTime implements sdktrace.ReadOnlySpan; zero until ended.
func (c *chunkSpan) EndTime() time.Time {
	if !c.ended {
		return time.Time{}
	}
	return c.end
}

// Attributes implements sdktrace.ReadOnlySpan. It builds a new slice on
// every call.
func (c *chunkSpan) Attributes() []attribute.KeyValue {
	pa := c.src.pathAttrs(c.path)
	n := 5 + max(len(pa), 1) + 4
	if c.x != nil {
		n += len(c.x.attrs)
	}
	a := make([]attribute.KeyValue, 0, n)
	if c.recv {
		a = c.recvAttributes(a, pa)
	} else {
		a = c.sendAttributes(a, pa)
	}
	if c.x != nil && len(c.x.attrs) > 0 {
		// Later values win, as with the SDK's SetAttributes.
		for _, kv := range c.x.attrs {
			i := 0
			for i < len(a) && a[i].Key != kv.Key {
				i++
			}
			if i < len(a) {
				a[i] = kv
			} else {
				a = append(a, kv)
			}
		}
	}
	return a
}

// recvAttributes appends a receiver chunk span's attributes, in the order
// ReceiveRecorder's SDK path sets them.
func (c *chunkSpan) recvAttributes(a, pa []attribute.KeyValue) []attribute.KeyValue {
	a = append(a,
		attribute.Int64(schema.AttrTransferID, int64(c.transfer)),
		attribute.Int64(schema.AttrChunkIndex, int64(c.index)),
		attribute.Int64(schema.AttrChunkBytes, c.bytes),
	)
	if pa != nil {
		a = append(a, pa...)
	} else {
		a = append(a, attribute.Int(schema.AttrPath, int(c.path)))
	}
	a = append(a,
		attribute.Int64(schema.AttrRecvQueue, c.queue),
		attribute.Int64(schema.AttrRecvWait, c.wait),
		attribute.Int64(schema.AttrRecvHandoff, c.handoff),
	)
	if c.reason != "" {
		a = append(a, attribute.String(schema.AttrErrorType, c.reason))
	}
	return a
}

// sendAttributes appends a sender chunk span's attributes, in the order
// Recorder.endChunk sets them.
func (c *chunkSpan) sendAttributes(a, pa []attribute.KeyValue) []attribute.KeyValue {
	a = append(a,
		attribute.Int64(schema.AttrTransferID, int64(c.transfer)),
		attribute.Int64(schema.AttrChunkIndex, int64(c.index)),
		attribute.Int(schema.AttrAttempt, int(c.attempt)),
		attribute.Int64(schema.AttrChunkBytes, c.bytes),
		attribute.String(schema.AttrChunkOutcome, c.outcome),
	)
	if pa != nil {
		a = append(a, pa...)
	} else {
		a = append(a, attribute.Int(schema.AttrPath, int(c.path)))
	}
	if c.outcome == schema.OutcomeAcked {
		a = append(a,
			attribute.Int64(schema.AttrChunkRTT, c.rtt),
			attribute.Int64(schema.AttrChunkLatency, c.latency),
			attribute.Int64(schema.AttrChunkECN, c.ecn),
		)
	}
	if c.reason != "" {
		a = append(a, attribute.String(schema.AttrErrorType, c.reason))
	}
	return a
}

// Links implements sdktrace.ReadOnlySpan.
func (c *chunkSpan) Links() []sdktrace.Link {
	if c.x == nil {
		return nil
	}
	return c.x.links
}

// Events implements sdktrace.ReadOnlySpan.
func (c *chunkSpan) Events() []sdktrace.Event {
	if c.x == nil {
		return nil
	}
	return c.x.events
}

// Status implements sdktrace.ReadOnlySpan: unset when acknowledged, else
// Error with the reason (or the outcome when there is none).
func (c *chunkSpan) Status() sdktrace.Status {
	if c.x != nil && c.x.statusSet {
		return c.x.status
	}
	if c.recv {
		if c.reason == "" {
			return sdktrace.Status{}
		}
		return sdktrace.Status{Code: codes.Error, Description: c.reason}
	}
	if c.outcome == schema.OutcomeAcked {
		return sdktrace.Status{}
	}
	desc := c.reason
	if desc == "" {
		desc = c.outcome
	}
	return sdktrace.Status{Code: codes.Error, Description: desc}
}

// InstrumentationScope implements sdktrace.ReadOnlySpan: the transfer
// span's.
func (c *chunkSpan) InstrumentationScope() instrumentation.Scope { return c.src.scope }

// InstrumentationLibrary implements sdktrace.ReadOnlySpan.
//
// Deprecated: as in the SDK, use InstrumentationScope.
func (c *chunkSpan) InstrumentationLibrary() instrumentation.Library { return c.src.scope } //nolint:staticcheck // required by the interface

// Resource implements sdktrace.ReadOnlySpan: the transfer span's.
func (c *chunkSpan) Resource() *resource.Resource { return c.src.res }

// DroppedAttributes implements sdktrace.ReadOnlySpan.
func (c *chunkSpan) DroppedAttributes() int { return 0 }

// DroppedLinks implements sdktrace.ReadOnlySpan.
func (c *chunkSpan) DroppedLinks() int { return 0 }

// DroppedEvents implements sdktrace.ReadOnlySpan.
func (c *chunkSpan) DroppedEvents() int { return 0 }

// ChildSpanCount implements sdktrace.ReadOnlySpan.
func (c *chunkSpan) ChildSpanCount() int { return 0 }

// End implements trace.Span. The Recorder ends the span itself; a
// processor calling End in OnStart has no effect.
func (c *chunkSpan) End(...trace.SpanEndOption) {}

// IsRecording implements trace.Span: true until ended.
func (c *chunkSpan) IsRecording() bool { return !c.ended }

// AddEvent implements trace.Span (for processors, in OnStart).
func (c *chunkSpan) AddEvent(name string, opts ...trace.EventOption) {
	if c.ended {
		return
	}
	cfg := trace.NewEventConfig(opts...)
	x := c.changes()
	x.events = append(x.events, sdktrace.Event{Name: name, Attributes: cfg.Attributes(), Time: cfg.Timestamp()})
}

// AddLink implements trace.Span (for processors, in OnStart).
func (c *chunkSpan) AddLink(l trace.Link) {
	if c.ended || (!l.SpanContext.IsValid() && len(l.Attributes) == 0 && l.SpanContext.TraceState().Len() == 0) {
		return
	}
	x := c.changes()
	x.links = append(x.links, sdktrace.Link{SpanContext: l.SpanContext, Attributes: l.Attributes})
}

// RecordError implements trace.Span (for processors, in OnStart), as the
// SDK does: an "exception" event.
func (c *chunkSpan) RecordError(err error, opts ...trace.EventOption) {
	if err == nil || c.ended {
		return
	}
	opts = append(opts, trace.WithAttributes(
		attribute.String("exception.type", typeName(err)),
		attribute.String("exception.message", err.Error()),
	))
	if cfg := trace.NewEventConfig(opts...); cfg.StackTrace() {
		buf := make([]byte, 2048)
		opts = append(opts, trace.WithAttributes(attribute.String("exception.stacktrace", string(buf[:runtime.Stack(buf, false)]))))
	}
	c.AddEvent("exception", opts...)
}

// typeName names err's type as the SDK's RecordError does.
func typeName(err error) string {
	t := reflect.TypeOf(err)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return t.PkgPath() + "." + t.Name()
}

// SetStatus implements trace.Span (for processors, in OnStart), with the
// SDK's precedence (Ok over Error over Unset).
func (c *chunkSpan) SetStatus(code codes.Code, description string) {
	if c.ended || c.Status().Code > code {
		return
	}
	st := sdktrace.Status{Code: code}
	if code == codes.Error {
		st.Description = description
	}
	x := c.changes()
	x.status, x.statusSet = st, true
}

// SetName implements trace.Span (for processors, in OnStart).
func (c *chunkSpan) SetName(name string) {
	if !c.ended {
		c.changes().name = name
	}
}

// SetAttributes implements trace.Span (for processors, in OnStart).
func (c *chunkSpan) SetAttributes(kv ...attribute.KeyValue) {
	if c.ended {
		return
	}
	x := c.changes()
	for _, a := range kv {
		if a.Valid() {
			x.attrs = append(x.attrs, a)
		}
	}
}

// TracerProvider implements trace.Span: the transfer span's provider.
func (c *chunkSpan) TracerProvider() trace.TracerProvider { return c.src.tp }
