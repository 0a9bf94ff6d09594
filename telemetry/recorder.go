package telemetry

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
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

// PathAttr holds the static facts about one path that the engine does not
// know and the driver does. The zero value is valid: empty fields are left
// out of spans and metrics.
type PathAttr struct {
	Device string // RDMA device name, as ibv_get_device_name(3) reports it ("mlx5_0")
	QPN    uint32 // local queue pair number (ibv_qp.qp_num)
	NIC    string // network interface carrying the path ("eth2"), if known
}

// Config configures a Recorder. Paths and Wall are required.
type Config struct {
	// TracerProvider makes the spans; nil means tracing off (the no-op
	// provider), in which case only metrics are recorded.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics; nil means metrics off.
	MeterProvider metric.MeterProvider
	// Wall converts an event's vtime.Time to the wall-clock time stamped
	// on spans and span events. On hardware pass (*vtime.Monotonic).Wall of
	// the driver's clock; in the simulator pass FixedEpoch(runStart) so
	// virtual nanoseconds become an offset from a fixed instant.
	Wall func(vtime.Time) time.Time
	// CC, Backend and Peer are recorded on every transfer span (CC name
	// as registered in package cc; backend "verbs", "tcp", "mem" or
	// "sim"; the peer's address).
	CC, Backend, Peer string
	// Paths describes path i at index i; its length is the number of
	// paths. Events naming a path outside it still produce spans but no
	// per-path metrics.
	Paths []PathAttr
	// MaxTransfers is how many transfers can be live at once; the tables
	// are allocated for this many. Transfers started while the table is
	// full are not traced and are counted in mptx.telemetry.dropped.
	// Zero means 64; the valid range is 1..65536.
	MaxTransfers int
	// Buffer is the capacity, in events, of the ring between Record and
	// the span builder; it is rounded up to a power of two. Zero means
	// 32768 (about 4 MiB). Events arriving while it is full are dropped
	// and counted (DroppedEvents, mptx.telemetry.dropped).
	Buffer int
	// Synchronous builds spans and records histograms inside Record
	// instead of on the recorder's goroutine: deterministic and
	// goroutine-free, but Record then costs microseconds per chunk. For
	// tests and tools that replay recorded events.
	Synchronous bool
	// CNPBurstGap ends a CNP burst: CNP readings on a path less than this
	// apart belong to one burst, reported as one mptx.cnp.burst span
	// event. Zero means 100µs (a few RTTs in a datacenter fabric).
	CNPBurstGap time.Duration
}

// FixedEpoch returns a Config.Wall that maps virtual time t to epoch+t, for
// the simulator (where vtime counts from zero) and for golden tests.
func FixedEpoch(epoch time.Time) func(vtime.Time) time.Time {
	return func(t vtime.Time) time.Time { return epoch.Add(time.Duration(t)) }
}

// PFCRecorder is the simulator's hook for PFC pauses, which the engine
// cannot see. *Recorder implements it; the simulator's glue finds it by a
// type assertion on the multipath.Recorder it was given and calls it once
// per pause episode (XOFF until XON or expiry), not per pause frame.
type PFCRecorder interface {
	// RecordPFCPause reports that the traffic of path was paused from now
	// for d. The glue maps switch ports to the paths whose traffic they
	// carry.
	RecordPFCPause(path int, now vtime.Time, d time.Duration)
}

// Recorder turns the engine's events into OpenTelemetry spans, span events
// and metrics. It implements multipath.Recorder and PFCRecorder.
//
// Model: each transfer is one mptx.transfer span, the root of its own
// trace; each attempt of each chunk is one mptx.chunk span, its child,
// created when the attempt ends (acknowledged, requeued or abandoned) with
// the start time remembered from its start event. Path events (down, up,
// quarantine, CNP bursts, PFC pauses) become span events on every live
// transfer span. Timestamps are the events' Now converted by Config.Wall,
// so the simulator's spans carry virtual time. There are no per-packet
// spans.
//
// Sampling is decided once per transfer by the TracerProvider's sampler
// (OTEL_TRACES_SAMPLER); the chunks of an unsampled transfer cost a table
// write and no span.
//
// Per-transfer and per-chunk state lives in tables allocated up front
// (MaxTransfers slots; each slot's chunk table grows to the largest chunk
// count seen and is reused), so steady-state events other than span
// creation allocate nothing.
//
// Chunk spans: when the provider's span processors are wrapped in
// NewSpanProcessor (Setup does this), the Recorder builds each chunk span
// itself, one allocation, and hands it to them; otherwise it starts and
// ends an SDK span (about 13 allocations). The spans are the same; see
// NewSpanProcessor.
//
// Cost: Record copies the event into a single-producer ring (tens of
// nanoseconds, no allocation, never blocks) and a goroutine owned by the
// Recorder does the rest: spans, span events, histograms and counters. The
// goroutine polls the ring while events flow instead of being woken per
// event (a wake-up costs the engine's thread far more than the copy; see
// worker). If it falls behind by Config.Buffer events, new events are
// dropped and counted rather than slowing the engine. Flush waits until
// everything recorded so far has been processed; Close also stops the
// goroutine. Config.Synchronous does the work inside Record instead.
//
// Concurrency: Record, RecordPFCPause, Flush and Close must be called from
// one goroutine at a time (the engine's); metric collection may run
// concurrently on the SDK's goroutine. Config.Wall is called from the
// Recorder's goroutine and must be safe for that.
type Recorder struct {
	wall    func(vtime.Time) time.Time
	tracer  trace.Tracer
	tracing bool
	gap     time.Duration

	transferAttrs []attribute.KeyValue // static part of every transfer span
	paths         []pathState
	slots         []transferSlot
	live          []int32 // indices into slots of live transfers, in start order
	free          []int32 // indices of free slots (stack)
	last          int32   // slot of the most recent lookup, or -1

	attrs    []attribute.KeyValue    // reused attribute buffer
	startOpt []trace.SpanStartOption // reused option buffer

	// Chunk spans built by the Recorder (see NewSpanProcessor).
	hs      handshake        // request answered by the provider's spanProcessors
	hsCtx   context.Context  // carries &hs into transfer spans' Start
	fast    []*spanProcessor // the processors found at the last transfer start
	src     *spanSource      // resource, scope and path attributes of chunk spans
	ids     *rand.ChaCha8    // span ids of chunk spans
	lastNow atomic.Int64     // latest event time (vtime.Time)
	ins     instruments
	dropped atomic.Int64 // transfers not traced: table full

	// Transfer spans started by BeginTransfer, waiting for the engine's
	// transfer-start event (written by the caller's goroutine, taken by
	// the builder's).
	beginMu sync.Mutex
	begun   map[multipath.TransferID]begunTransfer

	// Producer/consumer ring between Record and the builder goroutine; nil
	// when synchronous.
	pipe *pipe[multipath.Event]
}

// Internal event kinds carried through the ring besides the engine's.
const (
	kindPFC   multipath.EventKind = 250 // Path, Now, Latency = pause duration
	kindClose multipath.EventKind = 251 // abandon every live transfer at Now
)

var (
	_ multipath.Recorder = (*Recorder)(nil)
	_ PFCRecorder        = (*Recorder)(nil)
)

type transferSlot struct {
	id        multipath.TransferID
	start     vtime.Time
	span      trace.Span
	ctx       context.Context
	sc        trace.SpanContext // span's
	recording bool
	fast      []*spanProcessor // non-nil: chunk spans go straight to these
	chunks    []chunkSlot
}

type chunkSlot struct {
	start   vtime.Time // 0: no open attempt
	bytes   units.Bytes
	path    int32
	attempt uint16
}

// pathState is one path's static attributes and live metric values. The
// atomics are written by Record and read by the metrics callback.
type pathState struct {
	attrs   []attribute.KeyValue // mptx.path, device, QPN, NIC
	set     attribute.Set
	recOpts []metric.RecordOption
	addOpts []metric.AddOption

	window, rate, inflight atomic.Int64
	cnp, ecnChunks         atomic.Int64
	sent, acked            atomic.Int64
	requeues, down         atomic.Int64
	pfcPauses, pfcNs       atomic.Int64

	// open CNP burst, owned by the Record goroutine
	burstStart, burstLast vtime.Time
	burstCount            uint64
}

// NewRecorder validates cfg and returns a Recorder with its tables
// allocated and its metric instruments registered.
func NewRecorder(cfg Config) (*Recorder, error) {
	if cfg.Wall == nil {
		return nil, fmt.Errorf("telemetry: Config.Wall is nil: want the driver's vtime-to-wall conversion ((*vtime.Monotonic).Wall on hardware, FixedEpoch in the simulator)")
	}
	if len(cfg.Paths) == 0 {
		return nil, fmt.Errorf("telemetry: Config.Paths is empty: want one PathAttr per path (1 or more)")
	}
	if cfg.MaxTransfers == 0 {
		cfg.MaxTransfers = 64
	}
	if cfg.MaxTransfers < 1 || cfg.MaxTransfers > 65536 {
		return nil, fmt.Errorf("telemetry: Config.MaxTransfers = %d: valid range is 1..65536 (0 means 64)", cfg.MaxTransfers)
	}
	if cfg.Buffer == 0 {
		cfg.Buffer = 1 << 15
	}
	if cfg.Buffer < 0 || cfg.Buffer > 1<<24 {
		return nil, fmt.Errorf("telemetry: Config.Buffer = %d events: valid range is 1..%d (0 means 32768)", cfg.Buffer, 1<<24)
	}
	if cfg.CNPBurstGap == 0 {
		cfg.CNPBurstGap = 100 * time.Microsecond
	}
	if cfg.CNPBurstGap < 0 {
		return nil, fmt.Errorf("telemetry: Config.CNPBurstGap = %v: want > 0 (0 means 100µs)", cfg.CNPBurstGap)
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
	r := &Recorder{
		wall:    cfg.Wall,
		tracer:  tp.Tracer(schema.ScopeName, trace.WithInstrumentationVersion(schema.SchemaVersion)),
		tracing: tracing,
		gap:     cfg.CNPBurstGap,
		paths:   make([]pathState, len(cfg.Paths)),
		slots:   make([]transferSlot, cfg.MaxTransfers),
		live:    make([]int32, 0, cfg.MaxTransfers),
		free:    make([]int32, cfg.MaxTransfers),
		last:    -1,
		attrs:   make([]attribute.KeyValue, 0, 24),
	}
	for i := range r.free {
		r.free[i] = int32(cfg.MaxTransfers - 1 - i)
	}
	r.hsCtx = context.WithValue(context.Background(), handshakeKey{}, &r.hs)
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // never fails (crypto/rand.Read's documentation)
	r.ids = rand.NewChaCha8(seed)
	r.transferAttrs = append(r.transferAttrs, attribute.Int(schema.AttrPaths, len(cfg.Paths)))
	if cfg.CC != "" {
		r.transferAttrs = append(r.transferAttrs, attribute.String(schema.AttrCC, cfg.CC))
	}
	if cfg.Backend != "" {
		r.transferAttrs = append(r.transferAttrs, attribute.String(schema.AttrBackend, cfg.Backend))
	}
	if cfg.Peer != "" {
		r.transferAttrs = append(r.transferAttrs, attribute.String(schema.AttrNetworkPeerAddress, cfg.Peer))
	}
	for i, pa := range cfg.Paths {
		p := &r.paths[i]
		p.attrs = append(p.attrs, attribute.Int(schema.AttrPath, i))
		if pa.Device != "" {
			p.attrs = append(p.attrs, attribute.String(schema.AttrDevice, pa.Device))
		}
		if pa.QPN != 0 {
			p.attrs = append(p.attrs, attribute.Int64(schema.AttrQPN, int64(pa.QPN)))
		}
		if pa.NIC != "" {
			p.attrs = append(p.attrs, attribute.String(schema.AttrNIC, pa.NIC))
		}
		p.set = attribute.NewSet(p.attrs...)
		p.recOpts = []metric.RecordOption{metric.WithAttributeSet(p.set)}
		p.addOpts = []metric.AddOption{metric.WithAttributeSet(p.set)}
	}
	if err := r.ins.init(mp, r); err != nil {
		return nil, err
	}
	if !cfg.Synchronous {
		r.pipe = newPipe(cfg.Buffer, r.process)
	}
	return r, nil
}

// Record implements multipath.Recorder. It copies ev; with the default
// asynchronous builder it costs a copy into the ring and never blocks.
// Events recorded after Close are ignored.
func (r *Recorder) Record(ev *multipath.Event) {
	if r.pipe == nil {
		r.process(ev)
		return
	}
	r.pipe.push(ev)
}

// Flush returns once every event recorded before the call has been
// turned into spans and metrics (and handed to the SDK, which may still
// buffer them: call the provider's ForceFlush to export).
func (r *Recorder) Flush() {
	if r.pipe != nil {
		r.pipe.flush()
	}
}

// DroppedEvents returns how many events were dropped because the ring was
// full.
func (r *Recorder) DroppedEvents() int64 {
	if r.pipe == nil {
		return 0
	}
	return r.pipe.dropped.Load()
}

// DroppedTransfers returns how many transfers were not traced because the
// table was full.
func (r *Recorder) DroppedTransfers() int64 { return r.dropped.Load() }

// WallNow returns the wall time of the latest event recorded (through
// Config.Wall), or the zero time before the first. In the simulator it is
// the virtual clock that Telemetry.UseVirtualClock stamps metrics with.
func (r *Recorder) WallNow() time.Time {
	t := vtime.Time(r.lastNow.Load())
	if t == 0 {
		return time.Time{}
	}
	return r.wall(t)
}

// process does the work for one event; it runs on the worker (or in
// Record when synchronous).
func (r *Recorder) process(ev *multipath.Event) {
	if ev.Now > vtime.Time(r.lastNow.Load()) {
		r.lastNow.Store(int64(ev.Now))
	}
	switch ev.Kind {
	case multipath.EvTransferStart:
		r.transferStart(ev)
	case multipath.EvTransferDone:
		r.transferEnd(ev, schema.TransferDone, "")
	case multipath.EvTransferFailed:
		r.transferEnd(ev, schema.TransferFailed, ev.Reason)
	case multipath.EvChunkStart:
		r.chunkStart(ev)
	case multipath.EvChunkDone:
		r.chunkDone(ev)
	case multipath.EvChunkRequeue:
		r.chunkRequeue(ev)
	case multipath.EvPathDown:
		if p := r.path(ev.Path); p != nil {
			p.down.Add(1)
		}
		r.pathEvent(schema.EventPathDown, ev.Now, ev.Path, ev.Reason, 0)
	case multipath.EvPathUp:
		r.pathEvent(schema.EventPathUp, ev.Now, ev.Path, "", 0)
	case multipath.EvPathQuarantine:
		r.pathEvent(schema.EventPathQuarantine, ev.Now, ev.Path, ev.Reason, ev.Latency)
	case multipath.EvProbe:
		if p := r.path(ev.Path); p != nil && ev.RTT > 0 {
			r.ins.rtt.Record(context.Background(), ev.RTT.Seconds(), p.recOpts...)
		}
	case multipath.EvCNP:
		r.cnp(ev)
	case kindPFC:
		r.pfcPause(ev.Path, ev.Now, ev.Latency)
	case kindClose:
		r.abandonBegun(ev.Now)
		for len(r.live) > 0 {
			e := multipath.Event{Now: ev.Now, Transfer: r.slots[r.live[0]].id}
			r.transferEnd(&e, schema.TransferAbandoned, "recorder closed")
		}
	case multipath.EvPathSample:
		if p := r.path(ev.Path); p != nil {
			p.window.Store(int64(ev.Window))
			p.rate.Store(int64(ev.Rate))
			p.inflight.Store(int64(ev.InFlight))
			if ev.SRTT > 0 {
				r.ins.srtt.Record(context.Background(), ev.SRTT.Seconds(), p.recOpts...)
			}
		}
	}
}

func (r *Recorder) path(i int) *pathState {
	if i < 0 || i >= len(r.paths) {
		return nil
	}
	return &r.paths[i]
}

// lookup returns the slot index of live transfer id, or -1.
func (r *Recorder) lookup(id multipath.TransferID) int32 {
	if r.last >= 0 && r.slots[r.last].start != 0 && r.slots[r.last].id == id {
		return r.last
	}
	for _, i := range r.live {
		if r.slots[i].id == id {
			r.last = i
			return i
		}
	}
	return -1
}

func (r *Recorder) transferStart(ev *multipath.Event) {
	if r.lookup(ev.Transfer) >= 0 {
		// The engine reused a live id: a contract violation upstream.
		// Close the old trace so the new one starts clean.
		r.transferEnd(ev, schema.TransferAbandoned, "transfer id reused while live")
	}
	begun, hasBegun := r.takeBegun(ev.Transfer)
	if len(r.free) == 0 {
		r.dropped.Add(1)
		if hasBegun {
			endAbandoned(begun.span, r.wall(ev.Now), "transfer table full (Config.MaxTransfers)")
		}
		return
	}
	i := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	r.live = append(r.live, i)
	r.last = i
	s := &r.slots[i]
	s.id = ev.Transfer
	s.start = ev.Now
	s.recording = false
	s.span = nil
	s.ctx = nil
	s.fast = nil
	s.sc = trace.SpanContext{}
	if !r.tracing {
		return
	}
	n := int(ev.Chunk)
	s.chunks = slices.Grow(s.chunks[:0], n)[:n]
	clear(s.chunks)
	if hasBegun {
		// Started by BeginTransfer: the span, its ids (already on the
		// control channel) and its processors are known; add what the
		// engine knows.
		s.ctx, s.span, s.sc = begun.ctx, begun.span, begun.span.SpanContext()
		s.span.SetAttributes(
			attribute.Int64(schema.AttrTransferBytes, int64(ev.Bytes)),
			attribute.Int64(schema.AttrTransferChunks, int64(ev.Chunk)),
			attribute.Int64(schema.AttrChunkSize, int64(ev.Size)),
		)
		s.recording = s.span.IsRecording()
		if len(begun.procs) > 0 && s.recording {
			r.useFastPath(s, begun.procs)
		}
		return
	}
	a := append(r.attrs[:0],
		attribute.Int64(schema.AttrTransferID, int64(ev.Transfer)),
		attribute.Int64(schema.AttrTransferBytes, int64(ev.Bytes)),
		attribute.Int64(schema.AttrTransferChunks, int64(ev.Chunk)),
		attribute.Int64(schema.AttrChunkSize, int64(ev.Size)),
	)
	a = append(a, r.transferAttrs...)
	r.attrs = a
	o := append(r.startOpt[:0],
		trace.WithTimestamp(r.wall(ev.Now)),
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithNewRoot(),
		trace.WithAttributes(a...),
	)
	r.startOpt = o
	r.hs.active, r.hs.procs = true, r.hs.procs[:0]
	ctx, span := r.tracer.Start(r.hsCtx, schema.SpanTransfer, o...)
	r.hs.active = false
	s.ctx, s.span, s.sc = ctx, span, span.SpanContext()
	s.recording = span.IsRecording()
	if len(r.hs.procs) > 0 && s.recording {
		r.useFastPath(s, r.hs.procs)
	}
}

// useFastPath makes slot s's chunk spans go to the processors that
// answered the handshake, with the resource and scope of its span.
func (r *Recorder) useFastPath(s *transferSlot, procs []*spanProcessor) {
	ro, ok := s.span.(sdktrace.ReadOnlySpan)
	if !ok {
		return
	}
	if !slices.Equal(procs, r.fast) {
		r.fast = slices.Clone(procs)
	}
	if r.src == nil { // r.tracer, hence resource and scope, never change
		r.src = &spanSource{res: ro.Resource(), scope: ro.InstrumentationScope(), tp: s.span.TracerProvider()}
		for i := range r.paths {
			r.src.paths = append(r.src.paths, r.paths[i].attrs)
		}
	}
	s.fast = r.fast
}

// transferEnd ends live transfer ev.Transfer with outcome; reason is the
// failure reason, if any. Open chunk attempts end as abandoned.
func (r *Recorder) transferEnd(ev *multipath.Event, outcome, reason string) {
	i := r.lookup(ev.Transfer)
	if i < 0 {
		return
	}
	s := &r.slots[i]
	if outcome == schema.TransferDone {
		r.ins.transferTime.Record(context.Background(), ev.Now.Sub(s.start).Seconds())
	}
	if s.recording {
		for c := range s.chunks {
			if s.chunks[c].start != 0 {
				r.endChunk(s, uint32(c), ev.Now, schema.OutcomeAbandoned, reason, 0, 0, 0)
			}
		}
		// Bursts still open are reported now so that they reach this span.
		for p := range r.paths {
			r.flushBurst(p)
		}
		s.span.SetAttributes(attribute.String(schema.AttrTransferOutcome, outcome))
		if outcome != schema.TransferDone {
			s.span.SetAttributes(attribute.String(schema.AttrErrorType, reason))
			s.span.SetStatus(codes.Error, reason)
		}
		s.span.End(trace.WithTimestamp(r.wall(ev.Now)))
	}
	s.span, s.ctx, s.recording, s.start, s.fast = nil, nil, false, 0, nil
	for k, j := range r.live {
		if j == i {
			r.live = append(r.live[:k], r.live[k+1:]...)
			break
		}
	}
	r.free = append(r.free, i)
	r.last = -1
}

// Close ends every live transfer at now with outcome "abandoned" (and
// their open chunk attempts likewise), so that a driver shutting down
// mid-transfer still exports what happened, processes everything queued
// and stops the Recorder's goroutine. Call it before shutting the
// providers down. Later Record calls are ignored; Close is idempotent.
func (r *Recorder) Close(now vtime.Time) {
	ev := multipath.Event{Kind: kindClose, Now: now}
	if r.pipe == nil {
		r.process(&ev)
		return
	}
	r.pipe.close(&ev)
}
