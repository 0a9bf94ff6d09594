package experiments

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// hostileSpecs are the broken or hostile spec files of issue 14, each of
// which must get one error line, within bounded memory, never a panic.
func hostileSpecs() map[string][]byte {
	head := "name: x\ntopology: {kind: star, hosts: 3}\n"
	work := "workloads: [{kind: incast, senders: [1, 2], receiver: 0, size: 1MiB}]\n"
	return map[string][]byte{
		"flow-nesting-100k":  []byte(head + "workloads: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n"),
		"map-nesting-40k":    []byte(head + "switch: " + strings.Repeat("{a: ", 40000) + "1" + strings.Repeat("}", 40000) + "\n"),
		"dash-nesting-50k":   []byte(head + "workloads:\n" + strings.Repeat("- ", 50000) + "a\n"),
		"indent-nesting-600": []byte(head + "switch:\n" + indentChain(600)),
		"value-50MB":         []byte(head + work + "description: " + strings.Repeat("x", 50<<20) + "\n"),
		"value-900KB":        []byte(head + work + "matrix: {cc: [" + strings.Repeat("y", 900<<10) + "]}\n"),
		"host-rate-zero":     []byte("name: x\ntopology: {kind: star, hosts: 3, host_rate: 0bps}\n" + work),
		"chunk-unaligned":    []byte(head + work + "matrix: {chunk: [66KiB]}\n"),
		"chunk-too-big":      []byte(head + work + "matrix: {chunk: [128MiB]}\n"),
	}
}

func indentChain(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(" ", i+1) + "a:\n")
	}
	return b.String()
}

// TestHostileSpecs: each hostile spec fails with one *SpecError line of
// bounded length, allocating a bounded amount (the 100k-deep file once
// took 2.4 GB and the process).
func TestHostileSpecs(t *testing.T) {
	for name, data := range hostileSpecs() {
		t.Run(name, func(t *testing.T) {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			_, err := Parse(name+".yaml", data, os.ReadFile)
			runtime.ReadMemStats(&m1)
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("Parse = %v, want a *SpecError", err)
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") || len(msg) > 2048 || !strings.HasPrefix(msg, name+".yaml") {
				t.Errorf("error is not one short line naming the file (%d bytes): %.300q", len(msg), msg)
			}
			if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 512<<20 && !strings.HasPrefix(name, "value-50MB") {
				t.Errorf("Parse allocated %d MiB", alloc>>20)
			}
			t.Logf("%s", clip(msg, 200))
		})
	}
}

// TestHostileResultFiles: merge and plot of result files whose scenario
// or hash holds "../" (or whose series are inconsistent) fail with an
// error naming the file and write nothing outside the output directory.
func TestHostileResultFiles(t *testing.T) {
	for _, name := range []string{"bad-scenario", "bad-hash", "bad-series"} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			in := filepath.Join(root, "a", "b", "in")
			if err := os.MkdirAll(filepath.Join(in, "runs"), 0o755); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join("testdata", "results", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(in, "runs", "0123456789abcdef.json"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(root, "a", "b", "out")
			_, _, err = Merge(out, []string{in}, true)
			if err == nil || !strings.Contains(err.Error(), "not a run result") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Merge = %v, want one line rejecting the file", err)
			}
			filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if rel, _ := filepath.Rel(in, p); err == nil && !d.IsDir() && strings.HasPrefix(rel, "..") {
					t.Errorf("wrote %s outside the input directory", p)
				}
				return nil
			})
			t.Logf("%v", err)
		})
	}
}
