//go:build linux

package main

// `mptx send` and `mptx recv` in two network namespaces joined by four veth
// pairs, one TCP path per pair, each shaped by an htb qdisc: a path killed
// mid-transfer (its link set down) and Ctrl-C mid-transfer. Root only (CI
// runs as root); elsewhere the tests skip and say why.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testbed is two namespaces, snd and rcv, joined by veth pairs. Pair i is
// 198.18.(20+i).0/24 (RFC 2544's benchmark range): .1 in snd on vs<i>, .2
// in rcv on vr<i>. The receiver listens on a service address on its
// loopback, 198.18.99.2, reachable over every pair: in snd each pair's
// source address has its own routing table (ip rule from ...) with a route
// to it over that pair, and the main table routes the control connection
// over pair 0. Each path binds its source address and its interface
// (SO_BINDTODEVICE), so a path whose link is down has no other way out.
type testbed struct {
	t        *testing.T
	snd, rcv string
	links    []string // snd's end of each pair
}

const serviceAddr = "198.18.99.2"

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newTestbed builds the namespaces with pairs veth pairs shaped to rate
// (tc-htb(8) on the sender's ends), or skips the test where it cannot.
func newTestbed(t *testing.T, pairs int, rate string) *testbed {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces (CI runs as root): run `sudo go test -run Netns ./cmd/mptx`")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s(8) not found (iproute2; scripts/deps.sh installs it): %v", tool, err)
		}
	}
	id := os.Getpid() % 100000
	b := &testbed{t: t, snd: fmt.Sprintf("mptx-cli-s%d", id), rcv: fmt.Sprintf("mptx-cli-r%d", id)}
	for _, ns := range []string{b.snd, b.rcv} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Skipf("cannot create a network namespace: %v: %s", err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Errorf("ip netns del %s: %v: %s", ns, err, out)
			}
		})
		ipCmd(t, "-n", ns, "link", "set", "lo", "up")
	}
	ipCmd(t, "-n", b.rcv, "addr", "add", serviceAddr+"/32", "dev", "lo")
	for i := 0; i < pairs; i++ {
		vs, vr := fmt.Sprintf("vs%d", i), fmt.Sprintf("vr%d", i)
		b.links = append(b.links, vs)
		ipCmd(t, "-n", b.snd, "link", "add", vs, "type", "veth", "peer", "name", vr, "netns", b.rcv)
		ipCmd(t, "-n", b.snd, "addr", "add", b.local(i)+"/24", "dev", vs)
		ipCmd(t, "-n", b.rcv, "addr", "add", fmt.Sprintf("198.18.%d.2/24", 20+i), "dev", vr)
		ipCmd(t, "-n", b.snd, "link", "set", vs, "up")
		ipCmd(t, "-n", b.rcv, "link", "set", vr, "up")
		table := strconv.Itoa(100 + i)
		ipCmd(t, "-n", b.snd, "rule", "add", "from", b.local(i), "table", table)
		ipCmd(t, "-n", b.snd, "route", "add", serviceAddr+"/32", "via", fmt.Sprintf("198.18.%d.2", 20+i), "dev", vs, "table", table)
		for _, args := range [][]string{
			{"-n", b.snd, "qdisc", "add", "dev", vs, "root", "handle", "1:", "htb", "default", "10"},
			{"-n", b.snd, "class", "add", "dev", vs, "parent", "1:", "classid", "1:10", "htb", "rate", rate, "ceil", rate, "quantum", "60000"},
		} {
			if out, err := exec.Command("tc", args...).CombinedOutput(); err != nil {
				t.Skipf("tc htb unavailable: tc %s: %v: %s", strings.Join(args, " "), err, out)
			}
		}
	}
	ipCmd(t, "-n", b.snd, "route", "add", serviceAddr+"/32", "via", "198.18.20.2", "dev", b.links[0])
	return b
}

func (b *testbed) local(i int) string { return fmt.Sprintf("198.18.%d.1", 20+i) }

// pathFlags are send's --path flags: one path per pair.
func (b *testbed) pathFlags() []string {
	var f []string
	for i, l := range b.links {
		f = append(f, "--path", fmt.Sprintf("local=%s,remote=%s,dev=%s", b.local(i), serviceAddr, l))
	}
	return f
}

// txBytes reads the bytes sent on the sender's end of pair i.
func (b *testbed) txBytes(i int) int64 {
	b.t.Helper()
	out, err := exec.Command("ip", "netns", "exec", b.snd, "cat", "/sys/class/net/"+b.links[i]+"/statistics/tx_bytes").Output()
	if err != nil {
		b.t.Fatalf("tx_bytes of %s: %v", b.links[i], err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		b.t.Fatal(err)
	}
	return n
}

// mptx runs the mptx binary in namespace ns.
func (b *testbed) mptx(ns string, args ...string) *proc {
	b.t.Helper()
	return startProc(b.t, []string{"MPTX_SECRET=" + testSecret}, append([]string{"ip", "netns", "exec", ns, mptxBinary(b.t)}, args...)...)
}

// whenCarried waits until pair i has sent at least n more bytes than
// base, then runs f; it fails the test if send exits first.
func (b *testbed) whenCarried(i int, base, n int64, send *proc, f func(carried int64)) {
	b.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c := b.txBytes(i) - base
		if c >= n {
			f(c)
			return
		}
		select {
		case <-send.done:
			b.t.Fatalf("send ended (%v) before %s carried %d bytes (%d)\nstdout:\n%s\nstderr:\n%s", send.err, b.links[i], n, c, send.stdout.String(), send.stderr.String())
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s carried %d bytes in a minute; want %d", b.links[i], c, n)
		}
	}
}

// TestCLINetnsFourPaths: recv and send in two namespaces over four TCP
// paths, one per veth pair, each shaped to 100 Mbit/s by htb. PathKilled:
// pair 3's link goes down once it carried 2 MiB of a 96 MiB file; the file
// still arrives identical, over the other three, and the summary shows the
// lost path, its requeued chunks and the reset. Interrupted: SIGINT to
// send mid-transfer cancels the tensor on both ends: send exits 130, recv
// reports the tensor failed (exit 1 with --count 1) and writes nothing.
func TestCLINetnsFourPaths(t *testing.T) {
	mptxBinary(t)
	b := newTestbed(t, 4, "100mbit")
	file := randomFile(t, t.TempDir(), "tensor.bin", 96<<20, 5)
	listen := serviceAddr + ":7471"
	recvArgs := func(out string) []string {
		return []string{"recv", "--transport", "tcp", "--listen", listen, "--out", out, "--count", "1", "--json", "--max-size", "256MiB"}
	}
	sendArgs := append(append([]string{"send", "--transport", "tcp", "--json"}, b.pathFlags()...), listen, file)

	t.Run("PathKilled", func(t *testing.T) {
		b.t = t
		out := t.TempDir()
		recv := b.mptx(b.rcv, recvArgs(out)...)
		recv.waitStderr(t, listeningRE, 30*time.Second)
		base := b.txBytes(3)
		send := b.mptx(b.snd, sendArgs...)
		var downAt int64
		b.whenCarried(3, base, 2<<20, send, func(c int64) {
			downAt = c
			ipCmd(t, "-n", b.snd, "link", "set", b.links[3], "down")
		})
		defer ipCmd(t, "-n", b.snd, "link", "set", b.links[3], "up")
		if code := send.exitCode(t, 3*time.Minute); code != 0 {
			t.Fatalf("send exited %d after pair 3 went down\nstdout:\n%s\nstderr:\n%s", code, send.stdout.String(), send.stderr.String())
		}
		if code := recv.exitCode(t, time.Minute); code != 0 {
			t.Fatalf("recv exited %d\nstdout:\n%s\nstderr:\n%s", code, recv.stdout.String(), recv.stderr.String())
		}
		sameFile(t, file, filepath.Join(out, "tensor.bin"))
		var s SessionSendSummary
		if err := json.Unmarshal([]byte(send.stdout.String()), &s); err != nil {
			t.Fatalf("send --json: %v\n%s", err, send.stdout.String())
		}
		if !s.OK || len(s.Paths) != 4 {
			t.Fatalf("send summary: ok %v, %d paths; want ok and 4", s.OK, len(s.Paths))
		}
		p3 := s.Paths[3]
		if p3.Downs < 1 || s.Requeues < 1 {
			t.Errorf("path 3 after its link went down mid-transfer: %+v, %d requeues in all; want it lost at least once and its chunks requeued", p3, s.Requeues)
		}
		for i, p := range s.Paths[:3] {
			if p.Bytes <= p3.Bytes {
				t.Errorf("path %d carried %d bytes, no more than the killed path 3's %d", i, p.Bytes, p3.Bytes)
			}
		}
		t.Logf("pair 3 down after %.1f MiB; 96 MiB file identical in %.2f s (%.3f Gbit/s); requeues %d, resets %d; path 3 %s (%s), %d downs; shares %.1f%% %.1f%% %.1f%% %.1f%%",
			float64(downAt)/(1<<20), s.Seconds, s.Gbps, s.Requeues, s.Resets, p3.State, p3.Reason, p3.Downs,
			100*s.Paths[0].Share, 100*s.Paths[1].Share, 100*s.Paths[2].Share, 100*p3.Share)
	})

	t.Run("Interrupted", func(t *testing.T) {
		b.t = t
		out := t.TempDir()
		recv := b.mptx(b.rcv, recvArgs(out)...)
		recv.waitStderr(t, listeningRE, 30*time.Second)
		base := b.txBytes(0)
		send := b.mptx(b.snd, sendArgs...)
		b.whenCarried(0, base, 2<<20, send, func(int64) {
			if err := send.cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
		})
		if code := send.exitCode(t, time.Minute); code != 130 {
			t.Fatalf("send exited %d after SIGINT; want 130\nstdout:\n%s\nstderr:\n%s", code, send.stdout.String(), send.stderr.String())
		}
		if code := recv.exitCode(t, time.Minute); code != 1 {
			t.Fatalf("recv exited %d; want 1 (its one tensor failed)\nstdout:\n%s\nstderr:\n%s", code, recv.stdout.String(), recv.stderr.String())
		}
		var r RecvResult
		if err := json.Unmarshal([]byte(recv.stdout.String()), &r); err != nil {
			t.Fatalf("recv --json: %v\n%s", err, recv.stdout.String())
		}
		if r.Name != "tensor.bin" || !regexp.MustCompile(`cancel`).MatchString(r.Error) || r.File != "" {
			t.Errorf("recv's line for the interrupted tensor: %+v; want tensor.bin failed as canceled, no file", r)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Errorf("--out holds %d entries after a cancelled tensor; want none (no partial file)", len(entries))
		}
		t.Logf("send: %s", strings.TrimSpace(send.stderr.String()))
		t.Logf("recv: %s", r.Error)
	})
}
