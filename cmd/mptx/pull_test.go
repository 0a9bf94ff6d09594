package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCLIPullOverTCP: `mptx expose` serves two files, `mptx pull` (another
// process) reads both over 3 TCP paths with READ frames and writes them
// out: the same bytes, the CRC-32C it reports is the file's, every path
// carried a share; expose exits after its one session (--count 1).
func TestCLIPullOverTCP(t *testing.T) {
	dir := t.TempDir()
	a := randomFile(t, dir, "kv-a.bin", 6<<20+17, 1)
	b := randomFile(t, dir, "kv-b.bin", 1<<20, 2)
	env := []string{"MPTX_SECRET=" + testSecret}
	exp := startMPTX(t, env, "expose", "--transport", "tcp", "--listen", "127.0.0.1:0", "--count", "1", a, b)
	addr := exp.waitStderr(t, listeningRE, 30*time.Second)
	out := filepath.Join(dir, "out")
	pull := startMPTX(t, env, "pull", "--transport", "tcp", "--paths", "3", "--count", "2", "--json", "--out", out, addr)
	if code := pull.exitCode(t, time.Minute); code != 0 {
		t.Fatalf("mptx pull exited %d\nstdout:\n%s\nstderr:\n%s\nexpose stderr:\n%s", code, pull.stdout.String(), pull.stderr.String(), exp.stderr.String())
	}
	if code := exp.exitCode(t, 30*time.Second); code != 0 {
		t.Fatalf("mptx expose exited %d\n%s", code, exp.stderr.String())
	}
	sc := bufio.NewScanner(strings.NewReader(pull.stdout.String()))
	seen := map[string]bool{}
	for sc.Scan() {
		var r PullResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("pull output line %q: %v", sc.Text(), err)
		}
		src := map[string]string{"kv-a.bin": a, "kv-b.bin": b}[r.Name]
		if src == "" || r.Error != "" {
			t.Fatalf("pull result %+v", r)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%08x", crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))); r.CRC32C != want || r.Bytes != int64(len(data)) {
			t.Errorf("%s: %d bytes, CRC-32C %s; want %d, %s", r.Name, r.Bytes, r.CRC32C, len(data), want)
		}
		sameFile(t, src, filepath.Join(out, r.Name))
		if r.Name == "kv-a.bin" {
			for i, n := range r.PathBytes {
				if n == 0 {
					t.Errorf("%s: path %d carried nothing (%v)", r.Name, i, r.PathBytes)
				}
			}
		}
		seen[r.Name] = true
	}
	if len(seen) != 2 {
		t.Fatalf("pulled %v; want both files\nstdout:\n%s", seen, pull.stdout.String())
	}
}

// TestCLIExposeBadInput: expose refuses an empty file (exit 2), pull a
// --count of 0.
func TestCLIExposeBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"MPTX_SECRET=" + testSecret}
	if code := startMPTX(t, env, "expose", "--listen", "127.0.0.1:0", empty).exitCode(t, 30*time.Second); code != 2 {
		t.Errorf("expose of an empty file exited %d; want 2", code)
	}
	if code := startMPTX(t, env, "pull", "--count", "0", "127.0.0.1:1").exitCode(t, 30*time.Second); code != 2 {
		t.Errorf("pull --count 0 exited %d; want 2", code)
	}
}
