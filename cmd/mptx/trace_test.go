package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const traceInput = "../../telemetry/analyze/testdata/transfers.otlp.jsonl"

func runTrace(t *testing.T, args ...string) (string, error) {
	t.Helper()
	c := traceCmd()
	c.SilenceErrors, c.SilenceUsage = true, true
	var out, stderr bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&stderr)
	c.SetArgs(args)
	err := c.Execute()
	return out.String(), err
}

// isFailure: a selected transfer failed (exit status 1, not bad input).
func isFailure(err error) bool {
	var u usageError
	return err != nil && !errors.As(err, &u) && strings.Contains(err.Error(), "selected transfers failed")
}

func TestTraceAnalyze(t *testing.T) {
	out, err := runTrace(t, "analyze", "--format", "json", traceInput)
	if !isFailure(err) {
		t.Fatalf("analyze of a file holding a failed transfer: %v, want exit status 1 (a failure)", err)
	}
	var rep struct {
		Selected  int `json:"selected"`
		Failed    int `json:"failed"`
		Transfers []struct {
			ID       int64 `json:"transfer_id"`
			Critical struct {
				Chunk int64 `json:"chunk"`
			} `json:"critical"`
		} `json:"transfers"`
		Findings []string `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--format json output is not JSON: %v", err)
	}
	if rep.Selected != 3 || rep.Failed != 1 || len(rep.Transfers) != 3 || rep.Transfers[1].Critical.Chunk != 9 {
		t.Errorf("report = %+v, want 3 transfers (1 failed), the second's critical chunk 9", rep)
	}
	// Only the transfers done: nothing failed, exit 0; the table explains each.
	out, err = runTrace(t, "analyze", "--outcome", "done", traceInput)
	if err != nil {
		t.Fatalf("analyze --outcome done: %v", err)
	}
	for _, want := range []string{"transfer 7", "transfer 8", "critical:", "selected 2 transfers (1 more filtered out)", "findings:"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "transfer 9 ") {
		t.Errorf("--outcome done kept the failed transfer 9")
	}
	// A directory, gzipped input and standard-input-like paths.
	dir := t.TempDir()
	data, err := os.ReadFile(traceInput)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(data)
	zw.Close()
	if err := os.WriteFile(filepath.Join(dir, "a.jsonl.gz"), gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runTrace(t, "analyze", "--format", "paths-csv", "--transfer", "8", dir)
	if err != nil {
		t.Fatalf("analyze DIR --transfer 8: %v", err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "service,path,device") {
		t.Errorf("paths-csv of transfer 8 (3 paths) = %q", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze", "--format", "xml", traceInput}, `--format "xml": valid: table, json, csv, paths-csv`},
		{[]string{"analyze", "/nonexistent.jsonl"}, "no such file"},
		{[]string{"analyze"}, "no input"},
		{[]string{"analyze", "--straggler-factor", "0.5", traceInput}, "StragglerFactor = 0.5"},
		{[]string{"analyze", "--outcome", "bogus", traceInput}, `outcome "bogus"`},
		{[]string{"analyze", "--since", "yesterday", traceInput}, `--since "yesterday"`},
		{[]string{"analyze", "--peer", "[", traceInput}, `peer pattern "["`},
		{[]string{"analyze", t.TempDir()}, "holds no *.json"},
		{[]string{"analyze", "--jaeger", "ftp://x", "--service", "s"}, "want http(s)://"},
		{[]string{"analyze", "--jaeger", "http://127.0.0.1:1"}, "a service name is required"},
		{[]string{"timeline", "-o", "x.gif", traceInput}, "want a file name ending in .png, .svg or .html"},
		{[]string{"timeline", "--transfer", "99", "-o", "x.png", traceInput}, "no transfer selected"},
	} {
		_, err := runTrace(t, tc.args...)
		var u usageError
		if err == nil || !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mptx trace %v = %v, want a bad-input error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestTraceAnalyzeJaeger queries a fake Jaeger query service (API v3)
// serving the committed spans as Jaeger does: {"result": …} lines.
func TestTraceAnalyzeJaeger(t *testing.T) {
	data, err := os.ReadFile(traceInput)
	if err != nil {
		t.Fatal(err)
	}
	var gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v3/traces" {
			http.NotFound(w, r)
			return
		}
		gotQuery = r.URL.RawQuery
		for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			if bytes.HasPrefix(line, []byte(`{"resourceSpans"`)) {
				fmt.Fprintf(w, "{\"result\":%s}\n", line)
			}
		}
	}))
	defer srv.Close()
	out, err := runTrace(t, "analyze", "--jaeger", srv.URL, "--service", "mptx-golden", "--lookback", "2h", "--outcome", "done", "--format", "json")
	if err != nil {
		t.Fatalf("analyze --jaeger: %v\n%s", err, out)
	}
	if !strings.Contains(gotQuery, "query.service_name=mptx-golden") || !strings.Contains(gotQuery, "query.raw_traces=true") || !strings.Contains(gotQuery, "query.start_time_min=") {
		t.Errorf("Jaeger query %q lacks the service, raw traces or the time range", gotQuery)
	}
	var rep struct {
		Selected int `json:"selected"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Selected != 2 {
		t.Errorf("selected %d (%v), want the 2 transfers done", rep.Selected, err)
	}
	// An unreachable Jaeger is bad input with the URL in the message.
	srv.Close()
	if _, err := runTrace(t, "analyze", "--jaeger", srv.URL, "--service", "x"); err == nil || !strings.Contains(err.Error(), "Jaeger query") {
		t.Errorf("unreachable Jaeger: %v", err)
	}
}

func TestTraceTimeline(t *testing.T) {
	dir := t.TempDir()
	out, err := runTrace(t, "timeline", "-o", filepath.Join(dir, "tl.svg"), traceInput)
	if err != nil {
		t.Fatal(err)
	}
	files := strings.Fields(out)
	if len(files) != 3 {
		t.Fatalf("timeline wrote %v, want one file per transfer", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("%s: %v, want an SVG", f, err)
		}
	}
	if _, err := runTrace(t, "timeline", "--transfer", "8", "-o", filepath.Join(dir, "one.png"), traceInput); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "one.png")); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("one.png: %v, want a PNG", err)
	}
	page := filepath.Join(dir, "all.html")
	if _, err := runTrace(t, "timeline", "--html", "-o", page, traceInput); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(page)
	if err != nil || !bytes.Contains(b, []byte(`id="mptx-data"`)) {
		t.Fatalf("%s: %v, want the HTML timeline", page, err)
	}
}

// TestTraceTimelineLimits: hostile sizes are one clear error line (bad
// input), never a panic or an unbounded image.
func TestTraceTimelineLimits(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--width", "NaN"}, "--width NaN"},
		{[]string{"--width", "Inf"}, "--width +Inf"},
		{[]string{"--height", "-Inf"}, "--height -Inf"},
		{[]string{"--width", "1e6"}, "--width 1e+06: want inches in (0, 100]"},
		{[]string{"--width", "-1"}, "--width -1"},
		{[]string{"--width", "100", "--height", "100"}, "at most 2000 square inches"},
		{[]string{"--limit", "0"}, "--limit 0"},
		{[]string{"--html", "-o", filepath.Join(dir, "x.png")}, "ending in .html"},
	} {
		args := append([]string{"timeline", "-o", filepath.Join(dir, "x.png")}, tc.args...)
		args = append(args, traceInput)
		out, err := runTrace(t, args...)
		var u usageError
		if err == nil || !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("mptx trace %v = %v (output %q), want one bad-input line containing %q", args, err, out, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.png")); err == nil {
		t.Errorf("a refused timeline left a file behind")
	}
}
