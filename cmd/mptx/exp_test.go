package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// execute runs a fresh command tree (flags do not leak between calls) and
// returns its output and error.
func execute(t *testing.T, mk func() *cobra.Command, args ...string) (string, error) {
	t.Helper()
	c := mk()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(args)
	c.SilenceUsage, c.SilenceErrors = true, true
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	err := c.Execute()
	return out.String(), err
}

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u) || (err != nil && isCobraUsage(err))
}

func TestExpBadInputIsUsageError(t *testing.T) {
	spec := filepath.Join("..", "..", "experiments", "testdata", "specs", "bad-unknown-cc.yaml")
	for _, args := range [][]string{
		{"run", spec},
		{"run", "no-such-suite"},
		{"run", "--shard", "3/3", "default"},
		{"run", "--workers", "-1", "default"},
		{"merge", "/no/such/dir"},
		{"run", "--no-such-flag"},
	} {
		_, err := execute(t, expCmd, args...)
		if !isUsage(err) {
			t.Errorf("exp %v: error %v, want bad input (exit status 2)", args, err)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("exp %v: error is not one line: %q", args, err)
		}
	}
	_, err := execute(t, expCmd, "run", spec)
	if !strings.Contains(err.Error(), `bad-unknown-cc.yaml:6:15: matrix.cc[1] = "dcqnc": unknown congestion control; allowed: dcqcn`) {
		t.Errorf("spec error %q lacks file:line, field, value and allowed values", err)
	}
}

func TestExpDryRunAndList(t *testing.T) {
	out, err := execute(t, expCmd, "run", "--dry-run", "--shard", "1/4", "default")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "of 24 runs") || !strings.Contains(out, "default-incast") {
		t.Errorf("dry run output:\n%s", out)
	}
	out, err = execute(t, expCmd, "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"default", "incast", "ecmp-collision", "pfc-storm", "link-failure", "kvcache"} {
		if !strings.Contains(out, s) {
			t.Errorf("exp list lacks suite %s:\n%s", s, out)
		}
	}
}

func TestExpRunShardMerge(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "tiny.yaml")
	if err := os.WriteFile(spec, []byte(`name: tiny
topology: {kind: star, hosts: 3}
workloads: [{kind: incast, senders: [1, 2], receiver: 0, size: 256KiB}]
matrix: {cc: [dcqcn, swift]}
seeds: [1, 2]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, sh := range []string{"0/2", "1/2"} {
		if _, err := execute(t, expCmd, "run", spec, "-q", "--no-plots", "--shard", sh, "--out", out); err != nil {
			t.Fatal(err)
		}
	}
	got, err := execute(t, expCmd, "merge", "--no-plots", out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "merged 4 runs") || !strings.Contains(got, "| swift |") {
		t.Errorf("merge output:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(out, "tiny", "summary.md")); err != nil {
		t.Error(err)
	}
	got, err = execute(t, expCmd, "run", spec, "-q", "--no-plots", "--out", out)
	if err != nil || !strings.Contains(got, "4 runs (0 run now, 4 reused)") {
		t.Errorf("re-run after merge: %v\n%s", err, got)
	}
}

func TestSimNS3(t *testing.T) {
	dir := filepath.Join("..", "..", "experiments", "testdata", "specs")
	fct := filepath.Join(t.TempDir(), "fct.txt")
	out, err := execute(t, simCmd, "--ns3-topology", filepath.Join(dir, "topology.txt"), "--ns3-flows", filepath.Join(dir, "flow.txt"), "--fct-out", fct, "--cc", "hpcc")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(fct)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 3 || !strings.Contains(out, "| hpcc | 3/3 |") {
		t.Errorf("fct.txt has %d lines, output:\n%s", n, out)
	}
	out, err = execute(t, simCmd, "--ns3-topology", filepath.Join(dir, "topology.txt"), "--ns3-flows", filepath.Join(dir, "flow.txt"), "--compare", fct)
	if err != nil || !strings.Contains(out, "| flows completed | 3 | 3 |") {
		t.Errorf("--compare: %v\n%s", err, out)
	}
	if _, err := execute(t, simCmd, "--ns3-topology", filepath.Join(dir, "topology.txt")); !isUsage(err) {
		t.Errorf("--ns3-topology alone: %v, want bad input", err)
	}
	if _, err := execute(t, simCmd, "--ns3-topology", filepath.Join(dir, "topology.txt"), "--ns3-flows", filepath.Join(dir, "flow-to-switch.txt")); !isUsage(err) || !strings.Contains(err.Error(), "not a host") {
		t.Errorf("flows to a switch: %v, want bad input naming the problem", err)
	}
}

const tinySpec = `name: tiny
topology: {kind: star, hosts: 3}
workloads: [{kind: incast, senders: [1, 2], receiver: 0, size: 256KiB}]
matrix: {cc: [dcqcn, swift]}
seeds: [1, 2]
`

func writeSpec(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func exitCode(err error) int {
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return -1
}

// TestExpRunInterrupted: a sweep whose context is cancelled (Ctrl-C) exits
// with 130 and says that finished runs are kept; the progress output never
// claims 100%.
func TestExpRunInterrupted(t *testing.T) {
	spec := writeSpec(t, tinySpec)
	c := expCmd()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs([]string{"run", spec, "--no-plots", "--out", filepath.Join(t.TempDir(), "out")})
	c.SilenceUsage, c.SilenceErrors = true, true
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := c.ExecuteContext(ctx)
	if exitCode(err) != 130 || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted run: error %v (exit %d), want exit 130 saying interrupted", err, exitCode(err))
	}
	if strings.Contains(out.String(), "100%") || strings.Contains(out.String(), "\r") {
		t.Errorf("interrupted progress output claims completion or holds carriage returns:\n%q", out.String())
	}
}

// TestExpRunProgressNotTerminal: with stderr not a terminal, progress is
// plain lines, no carriage returns.
func TestExpRunProgressNotTerminal(t *testing.T) {
	spec := writeSpec(t, tinySpec)
	got, err := execute(t, expCmd, "run", spec, "--no-plots", "--out", filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "\r") || !strings.Contains(got, "4/4 runs (100%)") {
		t.Errorf("progress output:\n%q\nwant plain lines ending in 4/4 runs (100%%)", got)
	}
	if !strings.Contains(got, "Report: ") || !strings.Contains(got, "report.html") {
		t.Errorf("run output lacks the report's path:\n%s", got)
	}
}

// TestExpRunIncompleteFlows: a run whose tensor flows do not complete
// exits with 3, naming how many and why.
func TestExpRunIncompleteFlows(t *testing.T) {
	spec := writeSpec(t, strings.Replace(tinySpec, "seeds: [1, 2]", "seeds: [1]\nstop: {time: 20us}\nsample: {interval: 10us}", 1))
	got, err := execute(t, expCmd, "run", spec, "-q", "--no-plots", "--out", filepath.Join(t.TempDir(), "out"))
	if exitCode(err) != 3 || !strings.Contains(err.Error(), "tensor flows in 2 run(s) did not complete") {
		t.Fatalf("error %v (exit %d), want exit 3 naming the incomplete flows\n%s", err, exitCode(err), got)
	}
	if !strings.Contains(got, "| dcqcn |") {
		t.Errorf("the tables are still printed:\n%s", got)
	}
}

// TestExpRunShadowedSuite: a local directory named like a shipped suite
// is an error that says how to choose, not a silent choice.
func TestExpRunShadowedSuite(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.Mkdir("incast", 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := execute(t, expCmd, "run", "--dry-run", "incast")
	if !isUsage(err) || !strings.Contains(err.Error(), "both a shipped suite and a local directory; write ./incast") {
		t.Fatalf("error %v, want bad input explaining the ambiguity", err)
	}
	if err := os.WriteFile(filepath.Join("incast", "x.yaml"), []byte(tinySpec), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := execute(t, expCmd, "run", "--dry-run", "./incast"); err != nil || !strings.Contains(out, "tiny") {
		t.Errorf("./incast: %v\n%s", err, out)
	}
}

// TestExpReport: exp report rewrites report.html from saved runs.
func TestExpReport(t *testing.T) {
	spec := writeSpec(t, tinySpec)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := execute(t, expCmd, "run", spec, "-q", "--no-plots", "--out", out); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(out, "report.html")); err != nil {
		t.Fatal(err)
	}
	got, err := execute(t, expCmd, "report", "--no-plots", out)
	if err != nil || !strings.Contains(got, "report of 4 runs") {
		t.Fatalf("exp report: %v\n%s", err, got)
	}
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil || !bytes.Contains(html, []byte(`<table class="sortable results"`)) || !bytes.Contains(html, []byte("runs/")) {
		t.Errorf("report.html missing or without its tables: %v", err)
	}
}
