// Package analyze answers the question users ask after a slow transfer —
// where did the time go, on which path, and why — from the spans mptx's
// telemetry exports (package telemetry; names in telemetry/schema).
//
// Input is OTLP JSON as the OpenTelemetry collector's file exporter and
// mptx's own file exporter write it: one ExportTraceServiceRequest per
// line. A single (possibly pretty-printed) document, and Jaeger's API v3
// responses ({"result": {...}} per line), are accepted too. Parsing is
// done by the collector's pdata unmarshaler (ptrace.JSONUnmarshaler), never
// by hand; lines holding metrics or logs are skipped.
//
// Analyze groups chunk-attempt spans by transfer and computes, per
// transfer: completion time; the critical chunk (the one acknowledged
// last), its path, its attempts and the reasons it was late; per-path
// bytes, share, throughput, chunk latency p50/p99 and finish time; the
// imbalance between paths (max/mean path finish time); requeues and
// stragglers. WriteTable, WriteJSON and WriteCSV format the report;
// Timeline draws a per-path Gantt chart.
package analyze

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// Read reads OTLP JSON traces from r; name labels errors.
func Read(r io.Reader, name string) (ptrace.Traces, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return ptrace.Traces{}, fmt.Errorf("analyze: reading %s: %w", name, err)
	}
	return Parse(b, name)
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
