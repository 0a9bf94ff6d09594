package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/telemetry/analyze"
)

// incastSpec is a small incast that backs the switch up to PFC with no
// congestion control: eight senders, one receiver.
const incastSpec = `name: tinyincast
description: eight senders, one receiver, PFC on
topology: {kind: star, hosts: 9, host_rate: 100Gbps, link_delay: 1us}
switch:
  buffer: 1MiB
  pfc: {enabled: true}
  ecn: {enabled: true}
workloads:
  - {kind: incast, senders: "1-8", receiver: 0, size: 2MiB}
matrix:
  cc: [none, dcqcn]
  pacing: [off]
seeds: [1]
stop: {time: 50ms}
`

// TestSimTrace: mptx sim --trace writes the run's spans in virtual time,
// one transfer per flow, with the fabric's PFC pauses on the senders'
// paths, and mptx trace analyze reads them.
func TestSimTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a simulation")
	}
	dir := t.TempDir()
	spec := filepath.Join(dir, "incast.yaml")
	if err := os.WriteFile(spec, []byte(incastSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "sim.jsonl")
	before := time.Now()
	out, err := execute(t, simCmd, spec, "--trace", file)
	if err != nil {
		t.Fatalf("sim --trace: %v\n%s", err, out)
	}
	srcs, err := analyze.FileSources(file)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := analyze.Scan(context.Background(), srcs, analyze.ScanConfig{Detail: 8})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Selected != 8 || sum.Outcomes["done"] != 8 {
		t.Fatalf("sim trace: %d transfers %v, want the 8 flows done", sum.Selected, sum.Outcomes)
	}
	var pfc time.Duration
	for _, p := range sum.Paths {
		pfc += p.PFCPause
	}
	if pfc <= 0 {
		t.Errorf("no PFC pause on any sender's path in an incast with cc none")
	}
	// Virtual time from the command's start: within the run's 50 ms.
	if sum.First.Before(before.Add(-time.Second)) || sum.Last.After(before.Add(time.Minute)) {
		t.Errorf("transfers started %v … %v, want around the command's start %v", sum.First, sum.Last, before)
	}
	if sum.Metrics == nil || len(sum.Metrics.Paths) == 0 {
		t.Errorf("no metrics in the sim trace")
	}
	t.Logf("sim trace: %d transfers, PFC pause %v in all, completion p50 %v", sum.Selected, pfc, sum.Completion.P50)

	// exp run --trace: one file per traced run, only the runs asked for.
	tdir := filepath.Join(dir, "traces")
	out, err = execute(t, expCmd, "run", spec, "-q", "--no-plots", "--out", filepath.Join(dir, "res"), "--trace", tdir, "--trace-run", "*/dcqcn/*")
	if err != nil {
		t.Fatalf("exp run --trace: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(tdir, "*.otlp.jsonl"))
	if len(files) != 1 || !strings.HasPrefix(filepath.Base(files[0]), "tinyincast-") {
		t.Fatalf("exp run --trace-run '*/dcqcn/*' wrote %v, want one file for the dcqcn run", files)
	}
	if _, err := execute(t, expCmd, "run", spec, "--trace-run", "x"); !isUsage(err) {
		t.Errorf("--trace-run without --trace: %v, want bad input", err)
	}
}
