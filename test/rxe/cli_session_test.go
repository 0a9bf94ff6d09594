package rxe_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sessionSendSummary / sessionRecvLine mirror cmd/mptx's SessionSummary and
// the JSON line recv prints per tensor.
type sessionSendSummary struct {
	Transport string  `json:"transport"`
	Bytes     int64   `json:"bytes"`
	Gbps      float64 `json:"gbps"`
	Requeues  int     `json:"requeues"`
	Paths     []struct {
		Via   string `json:"via"`
		Bytes int64  `json:"bytes"`
	} `json:"paths"`
	OK bool `json:"ok"`
}

type sessionRecvLine struct {
	Name   string `json:"name"`
	File   string `json:"file"`
	Bytes  int64  `json:"bytes"`
	CRC32C string `json:"crc32c"`
	Error  string `json:"error"`
}

// TestCLISessionsOverVerbs: `mptx recv --transport verbs` serves senders
// in turn over verbs sessions, as it does over TCP: one sender ships two
// files over two rxe paths (RC queue pairs on both wires), a second sender
// then ships a third; recv writes all three (--count 3) and exits, and
// every file is byte-identical to the one sent, checked by CRC-32C on the
// way too. Both senders' summaries name verbs and show both paths used.
func TestCLISessionsOverVerbs(t *testing.T) {
	e := needVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := t.TempDir()
	files := map[string][]byte{}
	var paths []string
	for i, n := range []int{24 << 20, 5<<20 + 12345, 16 << 20} {
		name := fmt.Sprintf("kv-%d.bin", i)
		data := pattern(300+i, n)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = data
		paths = append(paths, p)
	}
	sec := secretFile(t, goodSecret)
	out := filepath.Join(dir, "in")
	rxe := []string{"--qp-timeout", "500ms", "--retry", "3", "--timeout", "3m"}
	recv := start(t, ctx, e.bin, append([]string{"recv", "--transport", "verbs", "--listen", "127.0.0.1:7478", "--devices", strings.Join(e.receiver[:2], ","),
		"--secret-file", sec, "--out", out, "--count", "3", "--max-size", "64MiB", "--json", "--no-progress"}, rxe...)...)
	recv.waitLine(t, "listening on", time.Minute)
	send := func(files ...string) sessionSendSummary {
		t.Helper()
		args := []string{"send", "--transport", "verbs", "--devices", strings.Join(e.sender[:2], ","), "--paths", "2",
			"--secret-file", sec, "--json", "--no-progress", "--send-buffer", "64MiB"}
		args = append(append(append(args, slowLink...), "127.0.0.1:7478"), files...)
		s := start(t, ctx, e.bin, args...)
		if err := s.wait(t, 4*time.Minute); err != nil {
			t.Fatalf("mptx send %v: %v\nstdout:\n%s\nstderr:\n%s\nrecv stderr:\n%s", files, err, s.stdout.String(), s.errText(), recv.errText())
		}
		var sum sessionSendSummary
		if err := json.Unmarshal(s.stdout.Bytes(), &sum); err != nil {
			t.Fatalf("send summary %q: %v", s.stdout.String(), err)
		}
		if !sum.OK || sum.Transport != "verbs" || len(sum.Paths) != 2 || sum.Paths[0].Bytes == 0 || sum.Paths[1].Bytes == 0 {
			t.Errorf("send %v: summary %+v; want ok over verbs with both paths used", files, sum)
		}
		return sum
	}
	first := send(paths[0], paths[1])
	second := send(paths[2])
	if err := recv.wait(t, time.Minute); err != nil {
		t.Fatalf("mptx recv: %v\n%s", err, recv.errText())
	}
	sc := bufio.NewScanner(bytes.NewReader(recv.stdout.Bytes()))
	got := 0
	for sc.Scan() {
		var l sessionRecvLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("recv line %q: %v", sc.Text(), err)
		}
		want, ok := files[l.Name]
		if !ok || l.Error != "" || l.Bytes != int64(len(want)) || l.CRC32C == "" {
			t.Errorf("recv: %+v; want one of the files sent, checked", l)
			continue
		}
		data, err := os.ReadFile(filepath.Join(out, l.Name))
		if err != nil || !bytes.Equal(data, want) {
			t.Errorf("%s as written by recv differs from the file sent (%v)", l.Name, err)
		}
		got++
	}
	if got != 3 {
		t.Fatalf("recv reported %d tensors, want 3:\n%s", got, recv.stdout.String())
	}
	e.report(t, "CLI sessions over verbs: recv served two senders in turn (2 files, then 1) over 2 rxe paths, all 3 byte-identical; %.3f and %.3f Gbit/s; bytes by path %d/%d and %d/%d; requeues %d, %d",
		first.Gbps, second.Gbps, first.Paths[0].Bytes, first.Paths[1].Bytes, second.Paths[0].Bytes, second.Paths[1].Bytes, first.Requeues, second.Requeues)
}
