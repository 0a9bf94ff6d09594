package telemetry

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/telemetry/schema"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// ReceiveConfig configures a ReceiveRecorder. Wall and Paths are required.
type ReceiveConfig struct {
	// TracerProvider makes the spans; nil means tracing off.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics; nil means metrics off.
	MeterProvider metric.MeterProvider
	// Wall converts the driver's vtime.Time to wall-clock time, as
	// Config.Wall; it must be safe for concurrent use.
	Wall func(vtime.Time) time.Time
	// Backend and Peer are recorded on every mptx.receive span (Peer: the
	// sender's address).
	Backend, Peer string
	// Paths describes the receiver's end of path i at index i.
	Paths []PathAttr
	// MaxTransfers is how many transfers can be live at once; zero means
	// 256 (chunk.MaxSlots, the slots of one connection). Valid 1..65536.
	MaxTransfers int
	// Buffer is the ring's capacity in calls; zero means 8192. Calls
	// arriving while it is full are dropped and counted.
	Buffer int
	// Synchronous builds spans inside each call instead of on the
	// recorder's goroutine (deterministic; for tests and the simulator).
	Synchronous bool
}

// RecvChunk is one chunk as the receiver saw it: the argument of
// ReceiveRecorder.Chunk. The driver fills one value and reuses it.
type RecvChunk struct {
	Transfer multipath.TransferID
	Index    uint32      // chunk index (chunk.DecodeImm)
	Path     int         // the path (qp.Completion.Path) its last segment arrived on
	Bytes    units.Bytes // the chunk's length (chunk.Plan.Span)
	// Arrived is when its last segment landed: qp.Completion.At, the
	// NIC's timestamp where the backend has one; 0 means Polled.
	Arrived vtime.Time
	// Polled is when the driver polled the completion and marked the
	// chunk in the transfer's reassembly bitmap (the Step's now).
	Polled vtime.Time
	// HandoffStart and HandoffEnd bracket the application's hand-off
	// (ReceiverConfig.OnChunk); both zero when there is none.
	HandoffStart, HandoffEnd vtime.Time
	// Rejected: the application's hand-off returned an error (the
	// transfer then fails).
	Rejected bool
}

// ReceiveRecorder records the receiving end of transfers as spans and
// metrics, so that a slow receiver (a backed-up completion queue, a slow
// hand-off to the application) is visible next to the sender's view.
//
// Model: each transfer is one mptx.receive span (kind server), the child
// of the sender's mptx.transfer span when the sender's trace context
// (Recorder.BeginTransfer, carried on the session's control channel)
// reaches Expect, else the root of its own trace; each arrived chunk is one
// mptx.recv.chunk span, its child, from the chunk's arrival (its last
// segment's completion) to the end of its hand-off to the application,
// with the completion-queue wait (arrival to poll), the wait for the
// hand-off and the hand-off's duration as attributes. The analyser
// (telemetry/analyze) joins both ends by trace and transfer id: network
// time from the sender's spans, receiver time from these.
//
// The driver calls it with plain values carrying vtime.Time, like the
// engine calls Recorder.Record: Expect when a transfer is announced,
// Chunk for each newly arrived chunk, Duplicate for a chunk arriving
// again, Done when the transfer completes or fails, Close at shutdown.
// Each call copies its arguments into a ring and returns (no allocation
// for Chunk and Duplicate, never blocks); a goroutine owned by the
// recorder builds spans and metric points (ReceiveConfig.Synchronous does
// it inside the call). Calls must come from one goroutine at a time (the
// receiver driver's). Chunk spans go straight to the span processors when
// the provider's are wrapped in NewSpanProcessor (one allocation each), as
// the sender's do.
type ReceiveRecorder struct {
	wall    func(vtime.Time) time.Time
	tracer  trace.Tracer
	tracing bool
	attrs   []attribute.KeyValue // static attributes of mptx.receive spans
	paths   []recvPath
	src     *spanSource
	ids     *rand.ChaCha8
	max     int
	live    map[multipath.TransferID]*recvTransfer
	free    []*recvTransfer
	counts  []recvCounts
	pipe    *pipe[recvEvent]
	dropped atomic.Int64 // transfers not traced: table full

	queue, handoff, lag metric.Float64Histogram
}

type recvPath struct {
	attrs   []attribute.KeyValue // mptx.path, device, QPN, NIC
	set     attribute.Set
	recOpts []metric.RecordOption
}

// recvCounts are one path's counters: written by the builder, read by the
// metrics callback.
type recvCounts struct {
	chunks, bytes, duplicates atomic.Int64
}

type recvTransfer struct {
	id          multipath.TransferID
	start       vtime.Time
	span        trace.Span
	ctx         context.Context
	sc          trace.SpanContext
	recording   bool
	fast        []*spanProcessor
	chunks      int64
	duplicates  int64
	lastArrival vtime.Time
	queueMax    time.Duration
	handoffSum  time.Duration
}

// Receive event kinds carried through the ring.
const (
	recvExpect uint8 = iota + 1
	recvChunk
	recvDuplicate
	recvDone
	recvClose
)

type recvEvent struct {
	kind      uint8
	c         RecvChunk // Transfer, Index, Path, Bytes and times; Polled is now for the others
	chunks    uint32
	chunkSize units.Bytes
	sc        trace.SpanContext
	reason    string
}

// NewReceiveRecorder validates cfg and returns a ReceiveRecorder.
func NewReceiveRecorder(cfg ReceiveConfig) (*ReceiveRecorder, error) {
	if cfg.Wall == nil {
		return nil, fmt.Errorf("telemetry: ReceiveConfig.Wall is nil: want the driver's vtime-to-wall conversion ((*vtime.Monotonic).Wall on hardware, FixedEpoch in the simulator)")
	}
	if len(cfg.Paths) == 0 {
		return nil, fmt.Errorf("telemetry: ReceiveConfig.Paths is empty: want one PathAttr per path (1 or more)")
	}
	if cfg.MaxTransfers == 0 {
		cfg.MaxTransfers = 256
	}
	if cfg.MaxTransfers < 1 || cfg.MaxTransfers > 65536 {
		return nil, fmt.Errorf("telemetry: ReceiveConfig.MaxTransfers = %d: valid range is 1..65536 (0 means 256)", cfg.MaxTransfers)
	}
	if cfg.Buffer == 0 {
		cfg.Buffer = 1 << 13
	}
	if cfg.Buffer < 0 || cfg.Buffer > 1<<24 {
		return nil, fmt.Errorf("telemetry: ReceiveConfig.Buffer = %d calls: valid range is 1..%d (0 means 8192)", cfg.Buffer, 1<<24)
	}
	tp := cfg.TracerProvider
	tracing := tp != nil
	if _, isNoop := tp.(tracenoop.TracerProvider); isNoop {
		tracing = false
	}
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	mp := cfg.MeterProvider
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	r := &ReceiveRecorder{
		wall:    cfg.Wall,
		tracer:  tp.Tracer(schema.ScopeName, trace.WithInstrumentationVersion(schema.SchemaVersion)),
		tracing: tracing,
		paths:   make([]recvPath, len(cfg.Paths)),
		max:     cfg.MaxTransfers,
		live:    make(map[multipath.TransferID]*recvTransfer, min(cfg.MaxTransfers, 1024)),
	}
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // never fails (crypto/rand.Read's documentation)
	r.ids = rand.NewChaCha8(seed)
	r.attrs = append(r.attrs, attribute.Int(schema.AttrPaths, len(cfg.Paths)))
	if cfg.Backend != "" {
		r.attrs = append(r.attrs, attribute.String(schema.AttrBackend, cfg.Backend))
	}
	if cfg.Peer != "" {
		r.attrs = append(r.attrs, attribute.String(schema.AttrNetworkPeerAddress, cfg.Peer))
	}
	for i, pa := range cfg.Paths {
		p := &r.paths[i]
		p.attrs = pathAttrList(i, pa)
		p.set = attribute.NewSet(p.attrs...)
		p.recOpts = []metric.RecordOption{metric.WithAttributeSet(p.set)}
	}
	if err := r.initMetrics(mp); err != nil {
		return nil, err
	}
	if !cfg.Synchronous {
		r.pipe = newPipe(cfg.Buffer, r.process)
	}
	return r, nil
}

// pathAttrList returns path i's static attributes.
func pathAttrList(i int, pa PathAttr) []attribute.KeyValue {
	a := []attribute.KeyValue{attribute.Int(schema.AttrPath, i)}
	if pa.Device != "" {
		a = append(a, attribute.String(schema.AttrDevice, pa.Device))
	}
	if pa.QPN != 0 {
		a = append(a, attribute.Int64(schema.AttrQPN, int64(pa.QPN)))
	}
	if pa.NIC != "" {
		a = append(a, attribute.String(schema.AttrNIC, pa.NIC))
	}
	return a
}

func (r *ReceiveRecorder) initMetrics(mp metric.MeterProvider) error {
	m := mp.Meter(schema.ScopeName, metric.WithInstrumentationVersion(schema.SchemaVersion))
	var err error
	hist := func(name, desc string) metric.Float64Histogram {
		if err != nil {
			return nil
		}
		var h metric.Float64Histogram
		h, err = m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(secondsBuckets...))
		return h
	}
	r.queue = hist(schema.MetricRecvQueue, "Completion-queue wait of each arrived chunk: its arrival to the receiver driver's poll")
	r.handoff = hist(schema.MetricRecvHandoff, "The application's hand-off (OnChunk) per chunk")
	r.lag = hist(schema.MetricRecvLag, "Per transfer: the last chunk's arrival to the transfer's completion on the receiver")
	if err != nil {
		return fmt.Errorf("telemetry: creating receiver histograms: %w", err)
	}
	chunks, err := m.Int64ObservableCounter(schema.MetricRecvChunks, metric.WithUnit("{chunk}"), metric.WithDescription("Distinct chunks arrived on the path"))
	if err != nil {
		return fmt.Errorf("telemetry: creating %s: %w", schema.MetricRecvChunks, err)
	}
	bytes, err := m.Int64ObservableCounter(schema.MetricRecvBytes, metric.WithUnit("By"), metric.WithDescription("Bytes of the distinct chunks arrived on the path"))
	if err != nil {
		return fmt.Errorf("telemetry: creating %s: %w", schema.MetricRecvBytes, err)
	}
	dups, err := m.Int64ObservableCounter(schema.MetricRecvDuplicates, metric.WithUnit("{chunk}"), metric.WithDescription("Chunks that arrived again on the path (resent after a lost acknowledgement)"))
	if err != nil {
		return fmt.Errorf("telemetry: creating %s: %w", schema.MetricRecvDuplicates, err)
	}
	r.counts = make([]recvCounts, len(r.paths))
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i := range r.paths {
			opt := metric.WithAttributeSet(r.paths[i].set)
			c := &r.counts[i]
			o.ObserveInt64(chunks, c.chunks.Load(), opt)
			o.ObserveInt64(bytes, c.bytes.Load(), opt)
			o.ObserveInt64(dups, c.duplicates.Load(), opt)
		}
		return nil
	}, chunks, bytes, dups)
	if err != nil {
		return fmt.Errorf("telemetry: registering receiver metric callback: %w", err)
	}
	return nil
}

// Expect records that transfer id was announced at now: bytes in chunks
// chunks of chunkSize, with tc the sender's trace context from the control
// channel (AppendTraceContext; empty when the sender sent none). It starts
// the transfer's mptx.receive span, the child of the sender's transfer
// span. A malformed tc is returned as an error (the bytes come from the
// peer) and the transfer is then recorded as the root of its own trace.
func (r *ReceiveRecorder) Expect(now vtime.Time, id multipath.TransferID, bytes units.Bytes, chunks uint32, chunkSize units.Bytes, tc []byte) error {
	sc, err := ParseTraceContext(tc)
	ev := recvEvent{kind: recvExpect, c: RecvChunk{Transfer: id, Bytes: bytes, Polled: now}, chunks: chunks, chunkSize: chunkSize, sc: sc}
	r.push(&ev)
	return err
}

// Chunk records one newly arrived chunk (see RecvChunk). It does not
// allocate.
func (r *ReceiveRecorder) Chunk(c *RecvChunk) {
	ev := recvEvent{kind: recvChunk, c: *c}
	r.push(&ev)
}

// Duplicate records that chunk index of transfer id arrived again on path
// at now (the sender resent it after a lost acknowledgement). It does not
// allocate.
func (r *ReceiveRecorder) Duplicate(now vtime.Time, id multipath.TransferID, index uint32, path int) {
	ev := recvEvent{kind: recvDuplicate, c: RecvChunk{Transfer: id, Index: index, Path: path, Polled: now}}
	r.push(&ev)
}

// Done records that transfer id ended at now on the receiver: every chunk
// arrived and was handed off (reason empty), or it failed (reason says
// why: the application rejected a chunk, the session gave up).
func (r *ReceiveRecorder) Done(now vtime.Time, id multipath.TransferID, reason string) {
	ev := recvEvent{kind: recvDone, c: RecvChunk{Transfer: id, Polled: now}, reason: reason}
	r.push(&ev)
}

// Flush returns once every call made before it has been turned into spans
// and metrics (handed to the SDK, which may still buffer them).
func (r *ReceiveRecorder) Flush() {
	if r.pipe != nil {
		r.pipe.flush()
	}
}

// Close ends every live transfer at now as abandoned, processes
// everything queued and stops the recorder's goroutine. Call it before
// shutting the providers down. Later calls are ignored; Close is
// idempotent.
func (r *ReceiveRecorder) Close(now vtime.Time) {
	ev := recvEvent{kind: recvClose, c: RecvChunk{Polled: now}}
	if r.pipe == nil {
		r.process(&ev)
		return
	}
	r.pipe.close(&ev)
}

// DroppedEvents returns how many calls were dropped because the ring was
// full.
func (r *ReceiveRecorder) DroppedEvents() int64 {
	if r.pipe == nil {
		return 0
	}
	return r.pipe.dropped.Load()
}

// DroppedTransfers returns how many transfers were not traced because
// MaxTransfers were live.
func (r *ReceiveRecorder) DroppedTransfers() int64 { return r.dropped.Load() }

func (r *ReceiveRecorder) push(ev *recvEvent) {
	if r.pipe == nil {
		r.process(ev)
		return
	}
	r.pipe.push(ev)
}

// process does the work for one call, on the builder's goroutine (or in
// the call when synchronous).
func (r *ReceiveRecorder) process(ev *recvEvent) {
	switch ev.kind {
	case recvExpect:
		r.expect(ev)
	case recvChunk:
		r.chunk(&ev.c)
	case recvDuplicate:
		if p := ev.c.Path; p >= 0 && p < len(r.counts) {
			r.counts[p].duplicates.Add(1)
		}
		if t := r.live[ev.c.Transfer]; t != nil {
			t.duplicates++
		}
	case recvDone:
		if t := r.live[ev.c.Transfer]; t != nil {
			outcome := schema.TransferDone
			if ev.reason != "" {
				outcome = schema.TransferFailed
			}
			r.end(t, ev.c.Polled, outcome, ev.reason)
		}
	case recvClose:
		for _, t := range r.live {
			r.end(t, ev.c.Polled, schema.TransferAbandoned, "recorder closed")
		}
	}
}

func (r *ReceiveRecorder) expect(ev *recvEvent) {
	id := ev.c.Transfer
	now := ev.c.Polled
	if old := r.live[id]; old != nil {
		r.end(old, now, schema.TransferAbandoned, "transfer id announced again while live")
	}
	if len(r.live) >= r.max {
		r.dropped.Add(1)
		return
	}
	t := r.getTransfer()
	t.id, t.start = id, now
	r.live[id] = t
	if !r.tracing {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 4+len(r.attrs))
	attrs = append(attrs,
		attribute.Int64(schema.AttrTransferID, int64(id)),
		attribute.Int64(schema.AttrTransferBytes, int64(ev.c.Bytes)),
		attribute.Int64(schema.AttrTransferChunks, int64(ev.chunks)),
		attribute.Int64(schema.AttrChunkSize, int64(ev.chunkSize)),
	)
	attrs = append(attrs, r.attrs...)
	ctx := context.Background()
	opts := []trace.SpanStartOption{trace.WithTimestamp(r.wall(now)), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
	if ev.sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, ev.sc)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	hs := &handshake{active: true}
	t.ctx, t.span = r.tracer.Start(context.WithValue(ctx, handshakeKey{}, hs), schema.SpanReceive, opts...)
	hs.active = false
	t.sc = t.span.SpanContext()
	t.recording = t.span.IsRecording()
	if len(hs.procs) > 0 && t.recording {
		if ro, ok := t.span.(sdktrace.ReadOnlySpan); ok {
			if r.src == nil {
				r.src = &spanSource{res: ro.Resource(), scope: ro.InstrumentationScope(), tp: t.span.TracerProvider()}
				for i := range r.paths {
					r.src.paths = append(r.src.paths, r.paths[i].attrs)
				}
			}
			t.fast = hs.procs
		}
	}
}

func (r *ReceiveRecorder) getTransfer() *recvTransfer {
	if n := len(r.free); n > 0 {
		t := r.free[n-1]
		r.free = r.free[:n-1]
		*t = recvTransfer{}
		return t
	}
	return &recvTransfer{}
}

func (r *ReceiveRecorder) chunk(c *RecvChunk) {
	arrived := c.Arrived
	if arrived == 0 || arrived > c.Polled {
		arrived = c.Polled
	}
	end := c.Polled
	var wait, handoff time.Duration
	if c.HandoffStart != 0 && c.HandoffEnd >= c.HandoffStart {
		wait = max(c.HandoffStart.Sub(c.Polled), 0)
		handoff = c.HandoffEnd.Sub(c.HandoffStart)
		end = max(c.HandoffEnd, c.Polled)
	}
	queue := c.Polled.Sub(arrived)
	var pathOpts []metric.RecordOption
	if c.Path >= 0 && c.Path < len(r.counts) {
		r.counts[c.Path].chunks.Add(1)
		r.counts[c.Path].bytes.Add(int64(c.Bytes))
		pathOpts = r.paths[c.Path].recOpts
	}
	ctx := context.Background()
	r.queue.Record(ctx, queue.Seconds(), pathOpts...)
	if c.HandoffStart != 0 {
		r.handoff.Record(ctx, handoff.Seconds(), pathOpts...)
	}
	t := r.live[c.Transfer]
	if t == nil {
		return
	}
	t.chunks++
	t.lastArrival = max(t.lastArrival, arrived)
	t.queueMax = max(t.queueMax, queue)
	t.handoffSum += handoff
	if !t.recording || !t.sc.IsSampled() {
		return
	}
	reason := ""
	if c.Rejected {
		reason = schema.HandoffRejected
	}
	if t.fast != nil {
		sp := &chunkSpan{
			src: r.src, parent: t.sc, id: r.spanID(),
			start: r.wall(arrived), end: r.wall(end),
			transfer: c.Transfer, index: c.Index, path: int32(c.Path), bytes: int64(c.Bytes),
			reason: reason, recv: true, queue: int64(queue), wait: int64(wait), handoff: int64(handoff),
		}
		for _, p := range t.fast {
			p.OnStart(t.ctx, sp)
		}
		sp.ended = true
		for _, p := range t.fast {
			p.OnEnd(sp)
		}
		return
	}
	a := make([]attribute.KeyValue, 0, 12)
	a = append(a,
		attribute.Int64(schema.AttrTransferID, int64(c.Transfer)),
		attribute.Int64(schema.AttrChunkIndex, int64(c.Index)),
		attribute.Int64(schema.AttrChunkBytes, int64(c.Bytes)),
	)
	if c.Path >= 0 && c.Path < len(r.paths) {
		a = append(a, r.paths[c.Path].attrs...)
	} else {
		a = append(a, attribute.Int(schema.AttrPath, c.Path))
	}
	a = append(a,
		attribute.Int64(schema.AttrRecvQueue, int64(queue)),
		attribute.Int64(schema.AttrRecvWait, int64(wait)),
		attribute.Int64(schema.AttrRecvHandoff, int64(handoff)),
	)
	if reason != "" {
		a = append(a, attribute.String(schema.AttrErrorType, reason))
	}
	_, span := r.tracer.Start(t.ctx, schema.SpanRecvChunk, trace.WithTimestamp(r.wall(arrived)),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(a...))
	if reason != "" {
		span.SetStatus(codes.Error, reason)
	}
	span.End(trace.WithTimestamp(r.wall(end)))
}

// end ends t's span with outcome at now and frees t.
func (r *ReceiveRecorder) end(t *recvTransfer, now vtime.Time, outcome, reason string) {
	lag := time.Duration(0)
	if t.lastArrival != 0 {
		lag = max(now.Sub(t.lastArrival), 0)
		if outcome == schema.TransferDone {
			r.lag.Record(context.Background(), lag.Seconds())
		}
	}
	if t.recording {
		a := []attribute.KeyValue{
			attribute.String(schema.AttrTransferOutcome, outcome),
			attribute.Int64(schema.AttrRecvChunks, t.chunks),
			attribute.Int64(schema.AttrRecvDuplicates, t.duplicates),
			attribute.Int64(schema.AttrRecvQueueMax, int64(t.queueMax)),
			attribute.Int64(schema.AttrRecvHandoffSum, int64(t.handoffSum)),
		}
		if t.lastArrival != 0 {
			a = append(a,
				attribute.Int64(schema.AttrRecvLastArrival, int64(max(t.lastArrival.Sub(t.start), 0))),
				attribute.Int64(schema.AttrRecvLag, int64(lag)))
		}
		if outcome != schema.TransferDone {
			a = append(a, attribute.String(schema.AttrErrorType, reason))
			t.span.SetStatus(codes.Error, reason)
		}
		t.span.SetAttributes(a...)
		t.span.End(trace.WithTimestamp(r.wall(now)))
	}
	delete(r.live, t.id)
	*t = recvTransfer{}
	r.free = append(r.free, t)
}

// spanID returns a random non-zero span id.
func (r *ReceiveRecorder) spanID() trace.SpanID {
	var id trace.SpanID
	for id == (trace.SpanID{}) {
		binary.LittleEndian.PutUint64(id[:], r.ids.Uint64())
	}
	return id
}
