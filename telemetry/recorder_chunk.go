package telemetry

import (
	"context"
	"encoding/binary"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/telemetry/schema"
	"github.com/mptx-dev/mptx/vtime"
)

func (r *Recorder) chunkStart(ev *multipath.Event) {
	if p := r.path(ev.Path); p != nil {
		p.sent.Add(int64(ev.Bytes))
	}
	i := r.lookup(ev.Transfer)
	if i < 0 || !r.slots[i].recording {
		return
	}
	s := &r.slots[i]
	if int(ev.Chunk) >= len(s.chunks) {
		return // chunk index beyond the transfer's chunk count: ignored
	}
	c := &s.chunks[ev.Chunk]
	if c.start != 0 {
		r.endChunk(s, ev.Chunk, ev.Now, schema.OutcomeSuperseded, "", 0, 0, 0)
	}
	*c = chunkSlot{start: ev.Now, bytes: ev.Bytes, path: int32(ev.Path), attempt: ev.Attempt}
}

func (r *Recorder) chunkDone(ev *multipath.Event) {
	if p := r.path(ev.Path); p != nil {
		ctx := context.Background()
		p.acked.Add(int64(ev.Bytes))
		if ev.ECN > 0 {
			p.ecnChunks.Add(1)
		}
		if ev.Latency > 0 {
			r.ins.latency.Record(ctx, ev.Latency.Seconds(), p.recOpts...)
		}
		if ev.RTT > 0 {
			r.ins.rtt.Record(ctx, ev.RTT.Seconds(), p.recOpts...)
		}
	}
	i := r.lookup(ev.Transfer)
	if i < 0 || !r.slots[i].recording {
		return
	}
	s := &r.slots[i]
	if int(ev.Chunk) >= len(s.chunks) {
		return
	}
	c := &s.chunks[ev.Chunk]
	if c.start == 0 { // no start seen: reconstruct it from the latency
		*c = chunkSlot{start: ev.Now.Add(-ev.Latency), bytes: ev.Bytes, path: int32(ev.Path), attempt: ev.Attempt}
	}
	c.bytes, c.path, c.attempt = ev.Bytes, int32(ev.Path), ev.Attempt
	r.endChunk(s, ev.Chunk, ev.Now, schema.OutcomeAcked, "", ev.RTT, ev.Latency, ev.ECN)
}

func (r *Recorder) chunkRequeue(ev *multipath.Event) {
	if p := r.path(ev.Path); p != nil {
		p.requeues.Add(1)
	}
	i := r.lookup(ev.Transfer)
	if i < 0 || !r.slots[i].recording {
		return
	}
	s := &r.slots[i]
	if int(ev.Chunk) < len(s.chunks) && s.chunks[ev.Chunk].start != 0 {
		r.endChunk(s, ev.Chunk, ev.Now, schema.OutcomeRequeued, ev.Reason, 0, 0, 0)
	}
	a := append(r.attrs[:0],
		attribute.Int64(schema.AttrChunkIndex, int64(ev.Chunk)),
		attribute.Int(schema.AttrPath, ev.Path),
		attribute.Int(schema.AttrAttempt, int(ev.Attempt)),
		attribute.String(schema.AttrReason, ev.Reason),
	)
	r.attrs = a
	s.span.AddEvent(schema.EventRequeue, trace.WithTimestamp(r.wall(ev.Now)), trace.WithAttributes(a...))
}

// endChunk creates and ends the span of chunk c's open attempt.
func (r *Recorder) endChunk(s *transferSlot, c uint32, now vtime.Time, outcome, reason string, rtt, latency time.Duration, ecn uint64) {
	ch := &s.chunks[c]
	if s.fast != nil {
		r.endChunkFast(s, ch, c, now, outcome, reason, rtt, latency, ecn)
		return
	}
	a := append(r.attrs[:0],
		attribute.Int64(schema.AttrTransferID, int64(s.id)),
		attribute.Int64(schema.AttrChunkIndex, int64(c)),
		attribute.Int(schema.AttrAttempt, int(ch.attempt)),
		attribute.Int64(schema.AttrChunkBytes, int64(ch.bytes)),
		attribute.String(schema.AttrChunkOutcome, outcome),
	)
	if p := r.path(int(ch.path)); p != nil {
		a = append(a, p.attrs...)
	} else {
		a = append(a, attribute.Int(schema.AttrPath, int(ch.path)))
	}
	if outcome == schema.OutcomeAcked {
		a = append(a,
			attribute.Int64(schema.AttrChunkRTT, int64(rtt)),
			attribute.Int64(schema.AttrChunkLatency, int64(latency)),
			attribute.Int64(schema.AttrChunkECN, int64(min(ecn, 1<<62))),
		)
	}
	if reason != "" {
		a = append(a, attribute.String(schema.AttrErrorType, reason))
	}
	r.attrs = a
	o := append(r.startOpt[:0],
		trace.WithTimestamp(r.wall(ch.start)),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(a...),
	)
	r.startOpt = o
	_, span := r.tracer.Start(s.ctx, schema.SpanChunk, o...)
	if outcome != schema.OutcomeAcked {
		desc := reason
		if desc == "" {
			desc = outcome
		}
		span.SetStatus(codes.Error, desc)
	}
	span.End(trace.WithTimestamp(r.wall(now)))
	ch.start = 0
}

// endChunkFast builds the chunk span itself (see NewSpanProcessor) and
// hands it to s's processors. Like the SDK's parent-based sampler, it
// records chunks of sampled transfers only.
func (r *Recorder) endChunkFast(s *transferSlot, ch *chunkSlot, c uint32, now vtime.Time, outcome, reason string, rtt, latency time.Duration, ecn uint64) {
	start := ch.start
	ch.start = 0
	if !s.sc.IsSampled() {
		return
	}
	sp := &chunkSpan{
		src: r.src, parent: s.sc, id: r.spanID(),
		start: r.wall(start), end: r.wall(now),
		transfer: s.id, index: c, attempt: ch.attempt, path: ch.path, bytes: int64(ch.bytes),
		outcome: outcome, reason: reason,
	}
	if outcome == schema.OutcomeAcked {
		sp.rtt, sp.latency, sp.ecn = int64(rtt), int64(latency), int64(min(ecn, 1<<62))
	}
	for _, p := range s.fast {
		p.OnStart(s.ctx, sp)
	}
	sp.ended = true
	for _, p := range s.fast {
		p.OnEnd(sp)
	}
}

// spanID returns a random non-zero span id.
func (r *Recorder) spanID() trace.SpanID {
	var id trace.SpanID
	for id == (trace.SpanID{}) {
		binary.LittleEndian.PutUint64(id[:], r.ids.Uint64())
	}
	return id
}
