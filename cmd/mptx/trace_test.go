package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const traceInput = "../../telemetry/analyze/testdata/transfers.otlp.jsonl"

func runTrace(t *testing.T, args ...string) (string, error) {
	t.Helper()
	c := traceCmd()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(args)
	err := c.Execute()
	return out.String(), err
}

func TestTraceAnalyze(t *testing.T) {
	out, err := runTrace(t, "analyze", "--format", "json", traceInput)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Transfers []struct {
			ID       int64 `json:"transfer_id"`
			Critical struct {
				Chunk int64 `json:"chunk"`
			} `json:"critical"`
		} `json:"transfers"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--format json output is not JSON: %v", err)
	}
	if len(rep.Transfers) != 3 || rep.Transfers[1].Critical.Chunk != 9 {
		t.Errorf("report = %+v, want 3 transfers, the second's critical chunk 9", rep)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze", "--format", "xml", traceInput}, `--format "xml": valid: table, json, csv`},
		{[]string{"analyze", "/nonexistent.jsonl"}, "no such file"},
		{[]string{"analyze", "--straggler-factor", "0.5", traceInput}, "StragglerFactor = 0.5"},
		{[]string{"timeline", "-o", "x.gif", traceInput}, "want a file name ending in .png or .svg"},
		{[]string{"timeline", "--transfer", "99", "-o", "x.png", traceInput}, "no such transfer"},
	} {
		_, err := runTrace(t, tc.args...)
		var u usageError
		if err == nil || !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mptx trace %v = %v, want a bad-input error containing %q", tc.args, err, tc.want)
		}
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
}
