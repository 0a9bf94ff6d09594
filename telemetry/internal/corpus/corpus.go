// Package corpus generates a large trace corpus for the analyser's tests
// and benchmark: an hour of transfers between several senders and
// receivers, both ends traced by the real Recorder and ReceiveRecorder
// and exported by the real file exporter (OTLP JSON lines, traces and
// metrics), with faults planted where the aggregate report must find them.
//
// Model: each transfer runs on the synthetic engine (package synth) over
// its sender's paths; the receiver's side is derived from the sender's
// acknowledgements: a chunk arrives half an RTT before its
// acknowledgement, is polled a few microseconds later, and is handed to
// an application that handles one chunk at a time (a hand-off starts when
// the previous one ended), so a slow application makes the receiver fall
// behind the network.
//
// Planted faults:
//   - slow path: one sender's path runs at a quarter of the others' rate,
//     all hour, so that path is the bottleneck of that sender's transfers;
//   - receiver stall: one receiver's application takes 100× longer per
//     chunk during the middle third of the hour, so its transfers are
//     receiver-bound then;
//   - every FailEvery-th transfer loses all its paths (failed), every
//     RequeueEvery-th one path (requeues).
package corpus

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/telemetry"
	"github.com/mptx-dev/mptx/telemetry/internal/synth"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Config describes a corpus. Zero fields take the defaults of Default.
type Config struct {
	Transfers int         // transfers in all
	Chunks    int         // chunks per transfer
	ChunkSize units.Bytes // chunk size
	Senders   int         // sender services mptx-send-0..
	Receivers int         // receiver services mptx-recv-0..
	Paths     int         // paths per sender
	Rate      units.BitRate
	RTT       time.Duration
	Start     time.Time     // the hour's start
	Window    time.Duration // transfers start spread over it
	// Handoff is the application's time per chunk; StallHandoff the
	// stalled receiver's.
	Handoff, StallHandoff time.Duration
	// SlowSender's path SlowPath runs at Rate/4.
	SlowSender, SlowPath int
	// StallReceiver stalls during the middle third of the window.
	StallReceiver int
	// FailEvery and RequeueEvery plant failures and requeues (0: none).
	FailEvery, RequeueEvery int
}

// Default is the corpus of the issue: 10,000 transfers of 50 chunks, both
// ends traced: 500,000 sender and 500,000 receiver chunk spans.
var Default = Config{
	Transfers: 10_000, Chunks: 50, ChunkSize: units.MiB,
	Senders: 8, Receivers: 8, Paths: 4,
	Rate: 100 * units.Gbps, RTT: 10 * time.Microsecond,
	Start:   time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
	Window:  time.Hour,
	Handoff: 20 * time.Microsecond, StallHandoff: 2 * time.Millisecond,
	SlowSender: 3, SlowPath: 2, StallReceiver: 5,
	FailEvery: 997, RequeueEvery: 101,
}

func (c Config) withDefaults() Config {
	d := Default
	set := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	set(&c.Transfers, d.Transfers)
	set(&c.Chunks, d.Chunks)
	set(&c.Senders, d.Senders)
	set(&c.Receivers, d.Receivers)
	set(&c.Paths, d.Paths)
	if c.ChunkSize == 0 {
		c.ChunkSize = d.ChunkSize
	}
	if c.Rate == 0 {
		c.Rate = d.Rate
	}
	if c.RTT == 0 {
		c.RTT = d.RTT
	}
	if c.Start.IsZero() {
		c.Start = d.Start
	}
	if c.Window == 0 {
		c.Window = d.Window
	}
	if c.Handoff == 0 {
		c.Handoff = d.Handoff
	}
	if c.StallHandoff == 0 {
		c.StallHandoff = d.StallHandoff
	}
	return c
}

// Stats is what was generated.
type Stats struct {
	Transfers, Failed, Stalled, SlowPath int
	SenderChunkSpans, RecvChunkSpans     int
}

// Name is the sender (or receiver) service name of index i.
func SenderName(i int) string   { return fmt.Sprintf("mptx-send-%d", i) }
func ReceiverName(i int) string { return fmt.Sprintf("mptx-recv-%d", i) }

// PeerAddr is receiver i's address, the senders' network.peer.address.
func PeerAddr(i int) string { return fmt.Sprintf("10.0.1.%d", i+1) }

// Device names path p's device.
func Device(p int) string { return fmt.Sprintf("mlx5_%d", p) }

// Generate writes the corpus to w as OTLP JSON lines (traces, then each
// service's metrics at the end) and returns what it generated.
func Generate(w io.Writer, cfg Config) (Stats, error) {
	cfg = cfg.withDefaults()
	ctx := context.Background()
	bw := bufio.NewWriterSize(w, 1<<20)
	lw := &lockedWriter{w: bw}
	ids := &seqIDs{}
	// A Recorder per connection (sender, receiver), as an engine per
	// peer; a ReceiveRecorder per receiver (all its connections).
	type svc struct {
		tp   *sdktrace.TracerProvider
		mp   *sdkmetric.MeterProvider
		recs []*telemetry.Recorder
		rrec *telemetry.ReceiveRecorder
	}
	newProviders := func(name string) (*sdktrace.TracerProvider, *sdkmetric.MeterProvider, error) {
		res := resource.NewSchemaless(attribute.String("service.name", name))
		exp, err := telemetry.NewFileSpanExporter(ctx, lw)
		if err != nil {
			return nil, nil, err
		}
		bsp := sdktrace.NewBatchSpanProcessor(exp, sdktrace.WithBlocking(), sdktrace.WithMaxExportBatchSize(512),
			sdktrace.WithMaxQueueSize(8192), sdktrace.WithBatchTimeout(time.Hour))
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(telemetry.NewSpanProcessor(bsp)),
			sdktrace.WithIDGenerator(ids), sdktrace.WithResource(res))
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(telemetry.NewFileMetricExporter(lw),
			sdkmetric.WithInterval(24*time.Hour))), sdkmetric.WithResource(res))
		return tp, mp, nil
	}
	paths := make([]telemetry.PathAttr, cfg.Paths)
	for p := range paths {
		paths[p] = telemetry.PathAttr{Device: Device(p), QPN: uint32(0x100 + p), NIC: fmt.Sprintf("eth%d", p)}
	}
	senders := make([]svc, cfg.Senders)
	receivers := make([]svc, cfg.Receivers)
	wall := telemetry.FixedEpoch(cfg.Start)
	for i := range senders {
		tp, mp, err := newProviders(SenderName(i))
		if err != nil {
			return Stats{}, err
		}
		senders[i] = svc{tp: tp, mp: mp}
		for r := range cfg.Receivers {
			rec, err := telemetry.NewRecorder(telemetry.Config{TracerProvider: tp, MeterProvider: mp, Wall: wall, CC: "dcqcn",
				Backend: "verbs", Peer: PeerAddr(r), Paths: paths, Synchronous: true})
			if err != nil {
				return Stats{}, err
			}
			senders[i].recs = append(senders[i].recs, rec)
		}
	}
	for i := range receivers {
		tp, mp, err := newProviders(ReceiverName(i))
		if err != nil {
			return Stats{}, err
		}
		rrec, err := telemetry.NewReceiveRecorder(telemetry.ReceiveConfig{TracerProvider: tp, MeterProvider: mp, Wall: wall,
			Backend: "verbs", Paths: paths, Synchronous: true})
		if err != nil {
			return Stats{}, err
		}
		receivers[i] = svc{tp: tp, mp: mp, rrec: rrec}
	}

	var st Stats
	tee := &tee{}
	gap := cfg.Window / time.Duration(cfg.Transfers)
	stallFrom, stallTo := cfg.Window/3, 2*cfg.Window/3
	for i := range cfg.Transfers {
		s, r := i%cfg.Senders, (i/cfg.Senders+i)%cfg.Receivers
		start := vtime.Time(time.Duration(i)*gap + time.Duration(i*7919%1000)*time.Microsecond)
		spec := synth.Spec{Transfer: multipath.TransferID(i + 1), Bytes: units.Bytes(cfg.Chunks) * cfg.ChunkSize, ChunkSize: cfg.ChunkSize, Start: start}
		for p := range cfg.Paths {
			sp := synth.Path{Rate: cfg.Rate, RTT: cfg.RTT, Window: 2}
			if s == cfg.SlowSender && p == cfg.SlowPath {
				sp.Rate = cfg.Rate / 4
			}
			spec.Paths = append(spec.Paths, sp)
		}
		// Roughly the transfer's duration, to place path failures inside it.
		dur := vtime.Time(cfg.Rate.TxTime(spec.Bytes) / time.Duration(cfg.Paths))
		switch {
		case cfg.FailEvery > 0 && i%cfg.FailEvery == cfg.FailEvery-1:
			for p := range spec.Paths {
				spec.Paths[p].DownAt = start + dur/2
			}
			st.Failed++
		case cfg.RequeueEvery > 0 && i%cfg.RequeueEvery == cfg.RequeueEvery-1:
			spec.Paths[1].DownAt = start + dur/3
		}
		if s == cfg.SlowSender {
			st.SlowPath++
		}
		snd := senders[s].recs[r]
		tc := snd.BeginTransfer(ctx, start, spec.Transfer, fmt.Sprintf("layer%d.weights", i%48))
		tee.next, tee.done = snd, tee.done[:0]
		res := synth.Run(spec, tee)
		st.Transfers++
		st.SenderChunkSpans += len(tee.done) + res.Requeues

		// The receiver's side.
		rr := receivers[r].rrec
		if err := rr.Expect(start, spec.Transfer, spec.Bytes, uint32(cfg.Chunks), cfg.ChunkSize, tc); err != nil {
			return st, err
		}
		handoff := cfg.Handoff
		off := time.Duration(start)
		if r == cfg.StallReceiver && off >= stallFrom && off < stallTo {
			handoff = cfg.StallHandoff
			st.Stalled++
		}
		var free vtime.Time
		var c telemetry.RecvChunk
		for k, d := range tee.done {
			arrived := d.Now.Add(-cfg.RTT / 2)
			polled := arrived.Add(time.Duration(1+k%3) * time.Microsecond)
			hs := max(polled, free)
			free = hs.Add(handoff)
			c = telemetry.RecvChunk{Transfer: spec.Transfer, Index: d.Chunk, Path: d.Path, Bytes: d.Bytes,
				Arrived: arrived, Polled: polled, HandoffStart: hs, HandoffEnd: free}
			rr.Chunk(&c)
			st.RecvChunkSpans++
		}
		if len(tee.done) == cfg.Chunks {
			rr.Done(free, spec.Transfer, "")
		} else {
			rr.Done(res.End, spec.Transfer, "sender failed: all paths down")
		}
	}
	end := vtime.Time(cfg.Window + time.Second)
	for _, s := range senders {
		for _, rec := range s.recs {
			rec.Close(end)
		}
	}
	for _, r := range receivers {
		r.rrec.Close(end)
	}
	for _, s := range append(senders, receivers...) {
		if err := s.tp.Shutdown(ctx); err != nil {
			return st, err
		}
	}
	for _, s := range append(senders, receivers...) {
		if err := s.mp.Shutdown(ctx); err != nil {
			return st, err
		}
	}
	return st, bw.Flush()
}

// tee forwards events to the sender's Recorder and keeps the
// acknowledgements of the current transfer.
type tee struct {
	next multipath.Recorder
	done []multipath.Event
}

func (t *tee) Record(ev *multipath.Event) {
	if ev.Kind == multipath.EvChunkDone {
		t.done = append(t.done, *ev)
	}
	t.next.Record(ev)
}

// lockedWriter serialises the exporters' lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// seqIDs is a deterministic IDGenerator.
type seqIDs struct {
	mu sync.Mutex
	n  uint64
}

func (g *seqIDs) next() uint64 { g.mu.Lock(); defer g.mu.Unlock(); g.n++; return g.n }

func (g *seqIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	var t trace.TraceID
	binary.BigEndian.PutUint64(t[8:], g.next())
	t[0] = 0xc0
	return t, g.NewSpanID(context.Background(), t)
}

func (g *seqIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var s trace.SpanID
	binary.BigEndian.PutUint64(s[:], g.next())
	return s
}
