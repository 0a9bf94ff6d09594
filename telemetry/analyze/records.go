package analyze

import (
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/mptx-dev/mptx/telemetry/schema"
)

// Kinds of the mptx spans the analyser reads (spanRec.kind).
const (
	recTransfer  uint8 = iota + 1 // mptx.transfer (sender)
	recChunk                      // mptx.chunk (sender)
	recReceive                    // mptx.receive (receiver)
	recRecvChunk                  // mptx.recv.chunk (receiver)
)

// spanRec is what the analyser keeps of one mptx span: the decoded
// attributes it uses and nothing else. Extraction runs on the decoding
// goroutines; the builders never touch pdata.
type spanRec struct {
	kind       uint8
	service    string
	trace      pcommon.TraceID
	span       pcommon.SpanID
	id         int64
	start, end pcommon.Timestamp

	// mptx.transfer and mptx.receive.
	bytes, chunkSize, chunks, paths          int64
	cc, backend, peer, name, outcome, errMsg string
	errType                                  string // error.type, before the kind decides its meaning
	hasID                                    bool
	events                                   []rawEvent
	recvChunks, dups, queueMax, handoffSum   int64
	lastArrival, lag                         int64
	hasArrival                               bool

	// mptx.chunk and mptx.recv.chunk.
	index, path, attempt, chunkBytes int64
	ecn, qpn, rtt                    int64
	queue, wait, handoff             int64
	hasPath                          bool
	device, nic, reason              string
}

// extract appends the mptx spans of td to out and returns it with the
// number of spans of any name seen. A malformed mptx span is an error
// naming it.
func extract(td ptrace.Traces, out []spanRec) ([]spanRec, int, error) {
	spans := 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		service := ""
		if v, ok := rs.Resource().Attributes().Get(schema.AttrServiceName); ok {
			service = v.AsString()
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				sp := ss.At(k)
				spans++
				var kind uint8
				switch sp.Name() {
				case schema.SpanTransfer:
					kind = recTransfer
				case schema.SpanChunk:
					kind = recChunk
				case schema.SpanReceive:
					kind = recReceive
				case schema.SpanRecvChunk:
					kind = recRecvChunk
				default:
					continue
				}
				out = append(out, spanRec{kind: kind, service: service})
				r := &out[len(out)-1]
				if err := r.fill(sp); err != nil {
					return out, spans, err
				}
			}
		}
	}
	return out, spans, nil
}

// fill decodes sp into r (whose kind is set).
func (r *spanRec) fill(sp ptrace.Span) error {
	r.trace, r.span = sp.TraceID(), sp.SpanID()
	r.start, r.end = sp.StartTimestamp(), sp.EndTimestamp()
	sp.Attributes().Range(func(k string, v pcommon.Value) bool {
		r.setAttr(k, valueOf(v))
		return true
	})
	var events []rawEvent
	if r.kind == recTransfer {
		events = transferEvents(sp.Events())
	}
	return r.check(sp.Name(), int64(sp.Status().Code()), sp.Status().Message(), events)
}

// valueOf converts a pdata attribute value.
func valueOf(v pcommon.Value) value {
	out := value{str: v.AsString(), hasStr: true}
	switch v.Type() {
	case pcommon.ValueTypeStr:
		out.kind = 's'
	case pcommon.ValueTypeInt:
		out.kind, out.i = 'i', v.Int()
	case pcommon.ValueTypeDouble:
		out.kind, out.d = 'd', v.Double()
	case pcommon.ValueTypeBool:
		out.kind = 'b'
	case pcommon.ValueTypeEmpty:
	default:
		out.kind = 'x'
	}
	return out
}

// check validates a decoded span and completes what depends on its kind
// (known once the whole span is read): the error attribute's meaning,
// the status message as the error, the transfer span's events.
func (r *spanRec) check(name string, statusCode int64, statusMsg string, events []rawEvent) error {
	if r.end < r.start {
		return fmt.Errorf("analyze: span %s %s ends (%d) before it starts (%d)", name, r.span, r.end, r.start)
	}
	if !r.hasID {
		return fmt.Errorf("analyze: span %s %s has no %s attribute", name, r.span, schema.AttrTransferID)
	}
	switch r.kind {
	case recTransfer, recReceive:
		if r.bytes < 0 || r.chunkSize < 0 || r.chunks < 0 || r.paths < 0 || r.chunks > 1<<32 || r.paths > 1<<16 {
			return fmt.Errorf("analyze: %s span %s: negative or absurd size attributes (bytes %d, chunk size %d, chunks %d, paths %d)", name, r.span, r.bytes, r.chunkSize, r.chunks, r.paths)
		}
		r.errMsg = r.errType
		if r.outcome != schema.TransferDone && r.errMsg == "" {
			r.errMsg = statusMsg
		}
		r.events = events
	case recChunk, recRecvChunk:
		if (!r.hasPath && r.kind == recChunk) || r.path < 0 || r.path > 1<<16 {
			return fmt.Errorf("analyze: chunk span %s: %s = %d (present %v): want 0..65536", r.span, schema.AttrPath, r.path, r.hasPath)
		}
		if r.chunkBytes < 0 {
			return fmt.Errorf("analyze: chunk span %s: %s = %d: want >= 0", r.span, schema.AttrChunkBytes, r.chunkBytes)
		}
		if r.queue < 0 || r.wait < 0 || r.handoff < 0 {
			return fmt.Errorf("analyze: chunk span %s: negative receiver times (queue %d, wait %d, hand-off %d ns)", r.span, r.queue, r.wait, r.handoff)
		}
		r.reason = r.errType
		if r.kind == recRecvChunk && r.reason == "" && statusCode == int64(ptrace.StatusCodeError) {
			r.reason = statusMsg
		}
	}
	r.errType = ""
	return nil
}

// transferEvents keeps the path events the analysis uses.
func transferEvents(evs ptrace.SpanEventSlice) []rawEvent {
	var out []rawEvent
	for i := 0; i < evs.Len(); i++ {
		e := evs.At(i)
		name := e.Name()
		switch name {
		case schema.EventCNPBurst, schema.EventPFCPause, schema.EventPathDown, schema.EventPathUp, schema.EventPathQuarantine, schema.EventRequeue:
		default:
			continue
		}
		ea := e.Attributes()
		p, _ := intAttr(ea, schema.AttrPath)
		re := rawEvent{name: name, path: int(p), at: e.Timestamp()}
		switch name {
		case schema.EventCNPBurst:
			re.count, _ = intAttr(ea, schema.AttrCNPCount)
		case schema.EventPFCPause:
			d, _ := intAttr(ea, schema.AttrPauseNs)
			re.dur = time.Duration(d)
		case schema.EventPathQuarantine:
			d, _ := intAttr(ea, schema.AttrBackoff)
			re.dur = time.Duration(d)
		case schema.EventRequeue:
			re.count, _ = intAttr(ea, schema.AttrChunkIndex)
		}
		out = append(out, re)
	}
	return out
}

// intValue reads an integer attribute value; some backends stringify
// integers or send doubles.
func intValue(v pcommon.Value) (int64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), true
	case pcommon.ValueTypeDouble:
		return int64(v.Double()), true
	case pcommon.ValueTypeStr:
		if n, err := strconv.ParseInt(v.Str(), 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

func intAttr(m pcommon.Map, k string) (int64, bool) {
	v, ok := m.Get(k)
	if !ok {
		return 0, false
	}
	return intValue(v)
}
