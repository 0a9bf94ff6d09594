package telemetry

import (
	"bytes"
	"context"
	"fmt"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// MaxTraceContext is the largest encoded trace context, in bytes, that
// ParseTraceContext accepts: a version-00 traceparent (55 bytes), a
// newline and a tracestate of at most 512 bytes (the size W3C Trace
// Context §3.3.1.5 lets a receiver truncate to).
const MaxTraceContext = 55 + 1 + 512

// AppendTraceContext appends sc's W3C trace context (W3C Trace Context,
// https://www.w3.org/TR/trace-context/) to dst and returns the result: the
// traceparent header value ("00-<trace-id>-<parent-id>-<flags>", 55
// bytes) and, when sc carries a tracestate, a newline and the tracestate
// header value. The bytes are what a sender puts on the session's control
// channel next to a transfer's plan; the receiver gives them to
// ParseTraceContext (or ReceiveRecorder.Expect), and its spans join the
// sender's trace. An invalid sc appends nothing. Encoding goes through
// OpenTelemetry's own W3C propagator (propagation.TraceContext).
func AppendTraceContext(dst []byte, sc trace.SpanContext) []byte {
	if !sc.IsValid() {
		return dst
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	dst = append(dst, c["traceparent"]...)
	if ts := c["tracestate"]; ts != "" && len(ts) <= MaxTraceContext-56 {
		dst = append(append(dst, '\n'), ts...)
	}
	return dst
}

// ParseTraceContext decodes what AppendTraceContext wrote into a remote
// span context. Empty input means no context (an invalid SpanContext and no
// error). Anything else that is not a valid traceparent (W3C Trace Context
// §3.2: lowercase hex, non-zero ids, version ff refused, later versions'
// extra fields ignored), optionally followed by a newline and a tracestate,
// or that is longer than MaxTraceContext, is an error; an invalid
// tracestate is dropped, as §3.3.1.1 asks of a receiver.
func ParseTraceContext(b []byte) (trace.SpanContext, error) {
	if len(b) == 0 {
		return trace.SpanContext{}, nil
	}
	if len(b) > MaxTraceContext {
		return trace.SpanContext{}, fmt.Errorf("telemetry: trace context of %d bytes: want at most %d (traceparent, newline, tracestate)", len(b), MaxTraceContext)
	}
	tp, ts, _ := bytes.Cut(b, []byte{'\n'})
	c := propagation.MapCarrier{"traceparent": string(tp)}
	if len(ts) > 0 {
		c["tracestate"] = string(ts)
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), c))
	if !sc.IsValid() {
		return trace.SpanContext{}, fmt.Errorf("telemetry: trace context %q: not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, non-zero ids)", truncate(tp, 80))
	}
	return sc, nil
}

// truncate returns at most n bytes of b, for error messages.
func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
