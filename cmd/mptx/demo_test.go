package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/telemetry/analyze"
)

func runDemoCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	c := demoCmd()
	c.SilenceErrors, c.SilenceUsage = true, true
	var out, stderr bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&stderr)
	c.SetArgs(args)
	err := c.Execute()
	return out.String() + stderr.String(), err
}

// TestDemoBadInput: sizes and rates that used to exhaust memory or hang,
// and a negative failure time once taken for "never", are one clear line
// of bad input, at once.
func TestDemoBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--size", "16TiB"}, `--size "16TiB": want a size in 1B..1GiB`},
		{[]string{"--size", "0"}, `--size "0"`},
		{[]string{"--rates", "1,1"}, `path 0 rate "1": want a rate in 1Mbps..10Tbps`},
		{[]string{"--rates", "40G,0"}, `path 1 rate "0"`},
		{[]string{"--rates", "40G,-5G"}, `path 1 rate "-5G"`},
		{[]string{"--size", "1GiB", "--rates", "10M"}, "exceeds the demo's 10s of virtual time"},
		{[]string{"--fail-at", "-5ms"}, "--fail-at -5ms: want a virtual time > 0 (or 0: never)"},
		{[]string{"--fail-at", "1ms", "--fail-path", "9"}, "--fail-path 9: valid 0..3"},
	} {
		start := time.Now()
		_, err := runDemoCmd(t, tc.args...)
		var u usageError
		if err == nil || !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("mptx demo %v = %v, want one bad-input line containing %q", tc.args, err, tc.want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Logf("mptx demo %v took %v to refuse", tc.args, d) // not an assertion: the machine may be loaded
		}
	}
}

// TestDemoTrace: --trace and OTEL_TRACES_EXPORTER=file both produce traces
// that mptx trace analyze reads: one transfer, both ends in one trace
// (the receiver's view joined by trace id), metrics included.
func TestDemoTrace(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "demo.jsonl")
	envFile := filepath.Join(dir, "env.jsonl")
	runs := []struct {
		name string
		args []string
		env  map[string]string
		file string
	}{
		{"flag", []string{"--size", "16MiB", "--trace", file}, nil, file},
		{"env", []string{"--size", "16MiB", "--rates", "40G,10G"}, map[string]string{"OTEL_TRACES_EXPORTER": "file", "MPTX_OTEL_FILE": envFile, "OTEL_SERVICE_NAME": "demo-env"}, envFile},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_SDK_DISABLED", "MPTX_OTEL_FILE", "OTEL_SERVICE_NAME"} {
				t.Setenv(k, "")
			}
			for k, v := range r.env {
				t.Setenv(k, v)
			}
			out, err := runDemoCmd(t, r.args...)
			if err != nil {
				t.Fatalf("mptx demo %v: %v\n%s", r.args, err, out)
			}
			if !strings.Contains(out, "telemetry: file:"+r.file) {
				t.Errorf("demo output does not name the trace file:\n%s", out)
			}
			srcs, err := analyze.FileSources(r.file)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := analyze.Scan(context.Background(), srcs, analyze.ScanConfig{Detail: 1})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Selected != 1 || sum.Failed != 0 || len(sum.Transfers) != 1 {
				t.Fatalf("trace holds %d transfers (%d failed), want 1 done", sum.Selected, sum.Failed)
			}
			tr := sum.Transfers[0]
			if tr.Outcome != "done" || tr.Receiver == nil || tr.Receiver.Outcome != "done" || tr.Receiver.Chunks != tr.Chunks || len(tr.Attempts) < tr.Chunks {
				t.Errorf("transfer %+v, receiver %+v: want both ends done, every chunk on both", tr, tr.Receiver)
			}
			if sum.Metrics == nil || len(sum.Metrics.Paths) == 0 {
				t.Errorf("no metrics in the trace file")
			}
			if want := r.env["OTEL_SERVICE_NAME"]; want != "" && tr.Service != want {
				t.Errorf("service %q, want %q from OTEL_SERVICE_NAME", tr.Service, want)
			}
		})
	}
	// No --trace and no OTEL_* exporter: no telemetry, no file.
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_METRICS_EXPORTER", "")
	out, err := runDemoCmd(t, "--size", "4MiB")
	if err != nil || strings.Contains(out, "telemetry:") {
		t.Errorf("plain demo: %v, output %q; want no telemetry", err, out)
	}
	// A bad OTEL value is bad input.
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	if _, err := runDemoCmd(t, "--size", "4MiB"); err == nil || !strings.Contains(err.Error(), `unsupported exporter "zipkin"`) {
		t.Errorf("OTEL_TRACES_EXPORTER=zipkin: %v", err)
	}
}
