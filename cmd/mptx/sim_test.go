package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimChunkAndExitStatus: --chunk outside the chunk package's bounds is
// bad input (exit status 2) naming them, and a run whose tensor flows do
// not all complete is an error (exit status 1).
func TestSimChunkAndExitStatus(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(spec, []byte(`name: short
topology: {kind: star, hosts: 3}
workloads: [{kind: incast, senders: "1-2", receiver: 0, size: 4MiB}]
stop: {time: 100us}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"16KiB", "100000", "1GiB"} {
		_, err := execute(t, simCmd, spec, "--chunk", c)
		if !isUsage(err) || !strings.Contains(err.Error(), "64KiB") || !strings.Contains(err.Error(), "4KiB") {
			t.Errorf("--chunk %s: %v, want bad input naming the bounds", c, err)
		}
	}
	out, err := execute(t, simCmd, spec)
	if err == nil || isUsage(err) || !strings.Contains(err.Error(), "2 tensor flows in 1 run(s) did not complete") {
		t.Errorf("run stopped at 100us: error %v, want 2 flows incomplete (exit 3)\n%s", err, out)
	}
	if !strings.Contains(out, "link transmissions:") {
		t.Errorf("output lacks the link transmissions line:\n%s", out)
	}
	if err := os.WriteFile(spec, []byte(`name: ok
topology: {kind: star, hosts: 3}
workloads: [{kind: incast, senders: "1-2", receiver: 0, size: 1MiB}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := execute(t, simCmd, spec, "--chunk", "128KiB"); err != nil {
		t.Errorf("a complete run: %v, want success", err)
	}
}
