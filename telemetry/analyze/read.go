// Package analyze answers the questions asked after slow transfers —
// where did the time go, on which path, and why; and across an hour of
// traffic, which path or NIC is usually the bottleneck, which receiver
// stalls, what failed — from the spans and metrics mptx's telemetry
// exports (package telemetry; names in telemetry/schema).
//
// Input is OTLP JSON as the OpenTelemetry collector's file exporter and
// mptx's own file exporter write it: one ExportTraceServiceRequest or
// ExportMetricsServiceRequest per line. A single (possibly pretty-printed)
// document, Jaeger's API v3 responses ({"result": {...}} per line) and a
// running Jaeger's query API (JaegerSource) are accepted too.
//
// Two entry points:
//
//   - Scan reads any number of files, directories, standard input and
//     Jaeger queries as a stream, selects transfers (Filter) and returns a
//     Summary: per-path and per-device latency and rate percentiles,
//     bottleneck frequency, requeue and path-down rates, receivers'
//     stalls, failures with reasons, findings, and what the metric lines
//     say; it keeps a few transfers whole (ScanConfig.Detail). Its memory
//     does not grow with the number of spans (see stream and hist), and a
//     fast decoder does the bulk of the parsing (see fastDecoder).
//   - Analyze computes every transfer of an in-memory ptrace.Traces in
//     detail: completion time; the critical chunk (the one acknowledged
//     last), its path, its attempts and the reasons it was late; per-path
//     bytes, share, throughput, chunk latency p50/p99 and finish time; the
//     imbalance between paths; requeues and stragglers; and, when the
//     receiver's spans are in the same trace, the receiver's view
//     (network time vs receiver time).
//
// Report.WriteTable, WriteJSON and WriteCSV format transfers; Summary's
// methods the aggregate; Timeline draws a per-path Gantt chart (PNG/SVG)
// and TimelineHTML an interactive page.
package analyze

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// ErrNoSpans is returned (wrapped) when the input holds no spans at all.
var ErrNoSpans = errors.New("analyze: no spans in input")

// ReadFiles reads and merges the OTLP JSON traces in paths.
func ReadFiles(paths ...string) (ptrace.Traces, error) {
	all := ptrace.NewTraces()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return ptrace.Traces{}, fmt.Errorf("analyze: %w", err)
		}
		td, err := Parse(b, p)
		if err != nil {
			return ptrace.Traces{}, err
		}
		td.ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	}
	return all, nil
}

// Parse decodes data, OTLP JSON lines or one OTLP JSON document, with
// pdata's unmarshaler. Errors name the input, the line and what is wrong;
// truncated or invalid input gives an error, never a panic.
func Parse(data []byte, name string) (ptrace.Traces, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return ptrace.Traces{}, fmt.Errorf("analyze: %s: empty input: %w", name, ErrNoSpans)
	}
	all := ptrace.NewTraces()
	var firstErr error
	lineNo := 0
	rest := data
	for len(rest) > 0 {
		lineNo++
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		td, err := parseDoc(line)
		if err != nil {
			if lineNo == 1 {
				// Perhaps one pretty-printed document spanning lines.
				if td2, err2 := parseDoc(data); err2 == nil {
					return td2, nil
				}
			}
			hint := ""
			if rest == nil && !bytes.HasSuffix(data, []byte("\n")) {
				hint = " (last line has no newline: truncated file?)"
			}
			firstErr = fmt.Errorf("analyze: %s:%d: invalid OTLP JSON%s: %w", name, lineNo, hint, err)
			break
		}
		td.ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	}
	if firstErr != nil {
		return ptrace.Traces{}, firstErr
	}
	return all, nil
}

// parseDoc decodes one OTLP JSON document (an ExportTraceServiceRequest
// or TracesData), unwrapping Jaeger API v3's {"result": ...}.
func parseDoc(doc []byte) (ptrace.Traces, error) {
	if err := checkObject(doc); err != nil {
		return ptrace.Traces{}, err
	}
	var wrap struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if bytes.Contains(doc, []byte(`"result"`)) || bytes.Contains(doc, []byte(`"error"`)) {
		if err := json.Unmarshal(doc, &wrap); err == nil {
			if len(wrap.Error) > 0 && len(wrap.Result) == 0 {
				return ptrace.Traces{}, fmt.Errorf("a query API error response: %s", wrap.Error)
			}
			if len(wrap.Result) > 0 {
				doc = wrap.Result
				if err := checkObject(doc); err != nil {
					return ptrace.Traces{}, fmt.Errorf("result: %w", err)
				}
			}
		}
	}
	u := ptrace.JSONUnmarshaler{}
	return u.UnmarshalTraces(doc)
}

// checkObject rejects documents that are not a complete JSON object, which
// pdata's lenient iterator might otherwise read as empty.
func checkObject(doc []byte) error {
	d := bytes.TrimSpace(doc)
	if len(d) == 0 || d[0] != '{' {
		return errors.New("want a JSON object ({\"resourceSpans\": [...]})")
	}
	if !json.Valid(d) {
		// Let encoding/json say where: its message has the offset.
		var v any
		if err := json.Unmarshal(d, &v); err != nil {
			return fmt.Errorf("malformed JSON: %w", err)
		}
		return errors.New("malformed JSON")
	}
	return nil
}
