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
	name := sp.Name()
	if r.end < r.start {
		return fmt.Errorf("analyze: span %s %s ends (%d) before it starts (%d)", name, r.span, r.end, r.start)
	}
	hasID := false
	sp.Attributes().Range(func(k string, v pcommon.Value) bool {
		switch k {
		case schema.AttrTransferID:
			r.id, hasID = intValue(v)
		case schema.AttrTransferBytes:
			r.bytes, _ = intValue(v)
		case schema.AttrChunkSize:
			r.chunkSize, _ = intValue(v)
		case schema.AttrTransferChunks:
			r.chunks, _ = intValue(v)
		case schema.AttrPaths:
			r.paths, _ = intValue(v)
		case schema.AttrCC:
			r.cc = v.AsString()
		case schema.AttrBackend:
			r.backend = v.AsString()
		case schema.AttrNetworkPeerAddress:
			r.peer = v.AsString()
		case schema.AttrTransferName:
			r.name = v.AsString()
		case schema.AttrTransferOutcome:
			r.outcome = v.AsString()
		case schema.AttrErrorType:
			if r.kind == recChunk || r.kind == recRecvChunk {
				r.reason = v.AsString()
			} else {
				r.errMsg = v.AsString()
			}
		case schema.AttrRecvChunks:
			r.recvChunks, _ = intValue(v)
		case schema.AttrRecvDuplicates:
			r.dups, _ = intValue(v)
		case schema.AttrRecvQueueMax:
			r.queueMax, _ = intValue(v)
		case schema.AttrRecvHandoffSum:
			r.handoffSum, _ = intValue(v)
		case schema.AttrRecvLastArrival:
			r.lastArrival, r.hasArrival = intValue(v)
		case schema.AttrRecvLag:
			r.lag, _ = intValue(v)
		case schema.AttrChunkIndex:
			r.index, _ = intValue(v)
		case schema.AttrPath:
			r.path, r.hasPath = intValue(v)
		case schema.AttrAttempt:
			r.attempt, _ = intValue(v)
		case schema.AttrChunkBytes:
			r.chunkBytes, _ = intValue(v)
		case schema.AttrChunkOutcome:
			r.outcome = v.AsString()
		case schema.AttrChunkECN:
			r.ecn, _ = intValue(v)
		case schema.AttrQPN:
			r.qpn, _ = intValue(v)
		case schema.AttrChunkRTT:
			r.rtt, _ = intValue(v)
		case schema.AttrDevice:
			r.device = v.AsString()
		case schema.AttrNIC:
			r.nic = v.AsString()
		case schema.AttrRecvQueue:
			r.queue, _ = intValue(v)
		case schema.AttrRecvWait:
			r.wait, _ = intValue(v)
		case schema.AttrRecvHandoff:
			r.handoff, _ = intValue(v)
		}
		return true
	})
	if !hasID {
		return fmt.Errorf("analyze: span %s %s has no %s attribute", name, r.span, schema.AttrTransferID)
	}
	switch r.kind {
	case recTransfer, recReceive:
		if r.bytes < 0 || r.chunkSize < 0 || r.chunks < 0 || r.paths < 0 || r.chunks > 1<<32 || r.paths > 1<<16 {
			return fmt.Errorf("analyze: %s span %s: negative or absurd size attributes (bytes %d, chunk size %d, chunks %d, paths %d)", name, r.span, r.bytes, r.chunkSize, r.chunks, r.paths)
		}
		if r.outcome != schema.TransferDone && r.errMsg == "" {
			r.errMsg = sp.Status().Message()
		}
		if r.kind == recTransfer {
			r.events = transferEvents(sp.Events())
		}
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
		if r.kind == recRecvChunk && r.reason == "" && sp.Status().Code() == ptrace.StatusCodeError {
			r.reason = sp.Status().Message()
		}
	}
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
