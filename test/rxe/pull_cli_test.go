package rxe_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pullResult mirrors cmd/mptx's PullResult.
type pullResult struct {
	Name      string  `json:"name"`
	File      string  `json:"file"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
	Gbps      float64 `json:"gbps"`
	CRC32C    string  `json:"crc32c"`
	PathBytes []int64 `json:"path_bytes"`
	Requeues  int     `json:"requeues"`
	Error     string  `json:"error"`
}

// TestPullTwoProcesses is the two-process pull: `mptx expose` maps a 48
// MiB file and exposes it read-only over a session on the receiver-side
// rxe devices; `mptx pull`, another process, reads it with RDMA READs over
// two rxe paths and writes it out. The file pulled has the original's
// CRC32C and bytes, and both paths carried a share.
func TestPullTwoProcesses(t *testing.T) {
	e := needVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	src := filepath.Join(dir, "kv-block.bin")
	data := pattern(42, 48<<20)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sec := secretFile(t, goodSecret)
	rxe := []string{"--qp-timeout", "500ms", "--retry", "3", "--timeout", "1m"}
	exp := start(t, ctx, e.bin, append([]string{"expose", "--transport", "verbs", "--listen", "127.0.0.1:7476", "--devices", strings.Join(e.receiver[:2], ","),
		"--secret-file", sec, "--count", "1", src}, rxe...)...)
	exp.waitLine(t, "listening on", time.Minute)
	out := filepath.Join(dir, "pulled")
	pull := start(t, ctx, e.bin, append([]string{"pull", "--transport", "verbs", "--devices", strings.Join(e.sender[:2], ","), "--paths", "2",
		"--secret-file", sec, "--json", "--out", out, "--stall-timeout", "3s", "127.0.0.1:7476"}, rxe...)...)
	if err := pull.wait(t, 4*time.Minute); err != nil {
		t.Fatalf("mptx pull: %v\nstdout:\n%s\nstderr:\n%s\nexpose stderr:\n%s", err, pull.stdout.String(), pull.errText(), exp.errText())
	}
	if err := exp.wait(t, time.Minute); err != nil {
		t.Fatalf("mptx expose: %v\n%s", err, exp.errText())
	}
	var r pullResult
	sc := bufio.NewScanner(bytes.NewReader(pull.stdout.Bytes()))
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &r) != nil {
		t.Fatalf("pull output: %q", pull.stdout.String())
	}
	want := fmt.Sprintf("%08x", crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	if r.Error != "" || r.Bytes != int64(len(data)) || r.CRC32C != want {
		t.Fatalf("pull result %+v; want %d bytes, CRC32C %s", r, len(data), want)
	}
	got, err := os.ReadFile(filepath.Join(out, "kv-block.bin"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the pulled file differs from the exposed one (%v)", err)
	}
	if len(r.PathBytes) != 2 || r.PathBytes[0] == 0 || r.PathBytes[1] == 0 {
		t.Errorf("bytes by path %v: want both paths used", r.PathBytes)
	}
	e.report(t, "two-process pull (mptx expose | mptx pull, verbs RDMA READ over 2 rxe paths): 48 MiB in %.2f s (%.3f Gbit/s), CRC32C %s intact; bytes by path %v",
		r.Seconds, r.Gbps, r.CRC32C, r.PathBytes)
}
