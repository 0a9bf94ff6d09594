package main

// End-to-end tests of `mptx send` and `mptx recv` as processes: the test
// builds the binary once and runs the two ends over loopback TCP.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp/verbs"
)

const testSecret = "0123456789abcdef-cli-test-secret"

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// goTool finds the go command that runs this test.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// mptxBinary builds cmd/mptx once per test binary.
func mptxBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "mptx-cli-test-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "mptx")
		out, err := exec.Command(goTool(), "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a running mptx process.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{}
	err            error
}

// startProc runs argv (a command and its arguments) with env added to
// this process's environment; the test's cleanup kills it if it still
// runs.
func startProc(t *testing.T, env []string, argv ...string) *proc {
	t.Helper()
	p := &proc{name: strings.Join(argv, " "), cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", p.name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func startMPTX(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startProc(t, env, append([]string{mptxBinary(t)}, args...)...)
}

// exitCode waits up to d for the process and returns its exit status.
func (p *proc) exitCode(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s did not exit within %v\nstdout:\n%s\nstderr:\n%s", p.name, d, p.stdout.String(), p.stderr.String())
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("%s: %v", p.name, p.err)
	return -1
}

// waitStderr waits up to d for re to match the process's stderr and
// returns the first submatch (or the match).
func (p *proc) waitStderr(t *testing.T, re *regexp.Regexp, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if m := re.FindStringSubmatch(p.stderr.String()); m != nil {
			return m[len(m)-1]
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before its stderr matched %q\nstderr:\n%s", p.name, p.err, re, p.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: stderr did not match %q within %v:\n%s", p.name, re, d, p.stderr.String())
		}
	}
}

var listeningRE = regexp.MustCompile(`listening on (\S+) `)

// startRecv starts `mptx recv` on a free loopback port and returns it and
// its address.
func startRecv(t *testing.T, args ...string) (*proc, string) {
	t.Helper()
	r := startMPTX(t, []string{"MPTX_SECRET=" + testSecret}, append([]string{"recv", "--listen", "127.0.0.1:0"}, args...)...)
	return r, r.waitStderr(t, listeningRE, 30*time.Second)
}

func randomFile(t *testing.T, dir, name string, size int, seed uint64) string {
	t.Helper()
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func sameFile(t *testing.T, want, got string) {
	t.Helper()
	a, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatalf("the received file: %v", err)
	}
	if !bytes.Equal(a, b) {
		i := 0
		for i < min(len(a), len(b)) && a[i] == b[i] {
			i++
		}
		t.Fatalf("%s (%d bytes) differs from %s (%d bytes) from byte %d on", got, len(b), want, len(a), i)
	}
}

// noCarriageReturns checks that output meant for a pipe has no progress
// bar debris.
func noCarriageReturns(t *testing.T, what, s string) {
	t.Helper()
	if strings.ContainsAny(s, "\r\x1b") {
		t.Errorf("%s has carriage returns or escape sequences though it is not a terminal: %q", what, s)
	}
}

// TestCLIFilesOverLoopback ships two files between two mptx processes over
// loopback TCP (4 paths) and compares the bytes; the second run sends a
// file of the same name and one whose tensor name tries to escape --out:
// the first becomes NAME.1, the second stays inside --out.
func TestCLIFilesOverLoopback(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	big := randomFile(t, src, "weights.bin", 24<<20+12345, 1)
	small := randomFile(t, src, "bias.bin", 4099, 2)
	recv, addr := startRecv(t, "--out", out, "--count", "4")
	env := []string{"MPTX_SECRET=" + testSecret}

	send := startMPTX(t, env, "send", "--transport", "tcp", "--paths", "4", addr, big, small)
	if code := send.exitCode(t, 2*time.Minute); code != 0 {
		t.Fatalf("mptx send exited %d\nstdout:\n%s\nstderr:\n%s", code, send.stdout.String(), send.stderr.String())
	}
	sum := send.stdout.String()
	for _, want := range []string{"sent 2 of 2 tensors to " + addr + " over tcp", "requeues", "resets", "share", "weights.bin", "bias.bin"} {
		if !strings.Contains(sum, want) {
			t.Errorf("send's summary lacks %q:\n%s", want, sum)
		}
	}
	if n := strings.Count(sum, "\n"); n < 8 { // headline, tensor table (3), path table (5)
		t.Errorf("send's summary has %d lines; want the headline, a tensor table and a row per path:\n%s", n, sum)
	}
	noCarriageReturns(t, "send's stderr", send.stderr.String())

	// The same name again, and a hostile name, in JSON.
	send2 := startMPTX(t, env, "send", "--json", "--name", "../../escaped", addr, small)
	if code := send2.exitCode(t, time.Minute); code != 0 {
		t.Fatalf("second send exited %d: %s", code, send2.stderr.String())
	}
	send3 := startMPTX(t, env, "send", "--json", addr, small)
	if code := send3.exitCode(t, time.Minute); code != 0 {
		t.Fatalf("third send exited %d: %s", code, send3.stderr.String())
	}
	var js SessionSendSummary
	if err := json.Unmarshal([]byte(send3.stdout.String()), &js); err != nil {
		t.Fatalf("send --json: %v\n%s", err, send3.stdout.String())
	}
	if !js.OK || len(js.Tensors) != 1 || js.Tensors[0].Bytes != 4099 || len(js.Paths) != 4 || js.Transport != "tcp" {
		t.Errorf("send --json = %+v; want ok, one tensor of 4099 bytes, 4 paths, tcp", js)
	}

	if code := recv.exitCode(t, time.Minute); code != 0 {
		t.Fatalf("mptx recv exited %d\nstdout:\n%s\nstderr:\n%s", code, recv.stdout.String(), recv.stderr.String())
	}
	noCarriageReturns(t, "recv's stderr", recv.stderr.String())
	sameFile(t, big, filepath.Join(out, "weights.bin"))
	sameFile(t, small, filepath.Join(out, "bias.bin"))
	sameFile(t, small, filepath.Join(out, "bias.bin.1"))
	sameFile(t, small, filepath.Join(out, "_._.._escaped"))
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("--out holds %v; want exactly the 4 tensors (no partial files)", names)
	}
	if fileExists(filepath.Join(filepath.Dir(filepath.Dir(out)), "escaped")) {
		t.Errorf("a tensor named ../../escaped was written outside --out")
	}
	if got := strings.Count(recv.stdout.String(), "received "); got != 4 {
		t.Errorf("recv printed %d 'received' lines; want 4:\n%s", got, recv.stdout.String())
	}
}

// TestCLIWrongSecret: a sender with another secret is refused with one
// line and exit status 1; the receiver serves the next sender.
func TestCLIWrongSecret(t *testing.T) {
	dir := t.TempDir()
	f := randomFile(t, dir, "t.bin", 100000, 3)
	recv, addr := startRecv(t, "--count", "1")
	bad := startMPTX(t, []string{"MPTX_SECRET=an-impostor's-secret-of-32-bytes"}, "send", addr, f)
	if code := bad.exitCode(t, time.Minute); code != 1 {
		t.Errorf("send with the wrong secret exited %d; want 1", code)
	}
	msg := bad.stderr.String()
	if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "authentication failed: the receiver does not share our secret") || bad.stdout.String() != "" {
		t.Errorf("send with the wrong secret said %q on stderr, %q on stdout; want one line saying the secrets differ", msg, bad.stdout.String())
	}
	good := startMPTX(t, []string{"MPTX_SECRET=" + testSecret}, "send", addr, f)
	if code := good.exitCode(t, time.Minute); code != 0 {
		t.Fatalf("send with the right secret after a refused one exited %d: %s", code, good.stderr.String())
	}
	if code := recv.exitCode(t, time.Minute); code != 0 {
		t.Fatalf("recv exited %d: %s", code, recv.stderr.String())
	}
	t.Logf("wrong secret: %s", strings.TrimSpace(msg))
}

// TestCLIBadInput: usage errors exit 2 with one line and start nothing.
func TestCLIBadInput(t *testing.T) {
	dir := t.TempDir()
	f := randomFile(t, dir, "t.bin", 10, 4)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	env := []string{"MPTX_SECRET=" + testSecret}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"send"}, "address is required"},
		{[]string{"send", "localhost"}, "want HOST:PORT"},
		{[]string{"send", "--transport", "carrier-pigeon", "127.0.0.1:1", f}, `--transport "carrier-pigeon"`},
		{[]string{"send", "--transport", "tcp", "--devices", "mlx5_0", "127.0.0.1:1", f}, "--devices applies to verbs only"},
		{[]string{"send", "--transport", "tcp", "--direct", "127.0.0.1:1", f}, "--direct is a verbs path"},
		{[]string{"send", "--direct", "127.0.0.1:1", f}, "--direct is a verbs path"},
		{[]string{"send", "--transport", "verbs", "--direct", "--paths", "2", "127.0.0.1:1", f}, "--paths needs a session"},
		{[]string{"send", "--transport", "verbs", "--direct", "127.0.0.1:1", f, f}, "one tensor per run"},
		{[]string{"send", "--transport", "verbs", "--pool", "1GiB", "127.0.0.1:1", f}, "--pool applies to the direct verbs path only"},
		{[]string{"send", "--busy-poll", "1ms", "127.0.0.1:1", f}, "--busy-poll applies to the direct verbs path only"},
		{[]string{"send", "--transport", "verbs", "--path", "local=127.0.0.1", "127.0.0.1:1", f}, "--path describes TCP paths"},
		{[]string{"send", "--transport", "verbs", "--qps-per-nic", "99", "127.0.0.1:1", f}, "--qps-per-nic 99"},
		{[]string{"send", "127.0.0.1:1", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"send", "127.0.0.1:1", empty}, "is empty"},
		{[]string{"send", "--path", "local=10.0.0.1,colour=blue", "127.0.0.1:1", f}, `unknown key "colour"`},
		{[]string{"send", "--send-buffer", "4B", "127.0.0.1:1", f}, "smaller than the largest tensor"},
		{[]string{"recv", "--count", "-1"}, "--count -1"},
		{[]string{"recv", "--transport", "verbs", "--direct", "--count", "1"}, "--count needs a session"},
		{[]string{"recv", "--transport", "tcp", "--qp-timeout", "1s"}, "--qp-timeout applies to verbs only"},
		{[]string{"recv", "--max-size", "lots"}, `--max-size "lots"`},
	} {
		p := startMPTX(t, env, c.args...)
		code := p.exitCode(t, 30*time.Second)
		if msg := p.stderr.String(); code != 2 || !strings.Contains(msg, c.want) || strings.Count(msg, "\n") != 1 {
			t.Errorf("mptx %s: exit %d, stderr %q; want 2 and one line containing %q", strings.Join(c.args, " "), code, msg, c.want)
		}
	}
	p := startMPTX(t, []string{"MPTX_SECRET="}, "send", "127.0.0.1:1", f)
	if code := p.exitCode(t, 30*time.Second); code != 2 || !strings.Contains(p.stderr.String(), "no shared secret") {
		t.Errorf("send without a secret: exit %d, %q; want 2 naming the missing secret", code, p.stderr.String())
	}
}

// TestCLIRecvInterrupted: Ctrl-C stops a serving recv with status 130.
func TestCLIRecvInterrupted(t *testing.T) {
	recv, _ := startRecv(t)
	if err := recv.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := recv.exitCode(t, 30*time.Second); code != 130 {
		t.Fatalf("recv after SIGINT exited %d; want 130\nstderr:\n%s", code, recv.stderr.String())
	}
}

// TestCLIConcurrentSenders: one recv serves three senders at once, each
// over its own session; every file arrives intact.
func TestCLIConcurrentSenders(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	recv, addr := startRecv(t, "--out", out, "--count", "3", "--max-size", "64MiB")
	var files []string
	var sends []*proc
	for i := 0; i < 3; i++ {
		f := randomFile(t, src, fmt.Sprintf("part%d.bin", i), 6<<20+i*1000, uint64(10+i))
		files = append(files, f)
		sends = append(sends, startMPTX(t, []string{"MPTX_SECRET=" + testSecret}, "send", "--paths", "2", addr, f))
	}
	for i, s := range sends {
		if code := s.exitCode(t, 2*time.Minute); code != 0 {
			t.Errorf("sender %d exited %d: %s", i, code, s.stderr.String())
		}
	}
	if code := recv.exitCode(t, time.Minute); code != 0 {
		t.Fatalf("recv exited %d\nstdout:\n%s\nstderr:\n%s", code, recv.stdout.String(), recv.stderr.String())
	}
	for _, f := range files {
		sameFile(t, f, filepath.Join(out, filepath.Base(f)))
	}
	if n := strings.Count(recv.stderr.String(), ": tcp, 2 paths"); n != 3 {
		t.Errorf("recv logged %d sessions; want 3:\n%s", n, recv.stderr.String())
	}
}

// TestCLITraceBothEnds: mptx send and mptx recv with --trace write one
// file each; mptx trace analyze of the two finds the tensor done with its
// receiver spans joined (one trace, both services).
func TestCLITraceBothEnds(t *testing.T) {
	src, out, dir := t.TempDir(), t.TempDir(), t.TempDir()
	f := randomFile(t, src, "kv.bin", 6<<20, 3)
	rtrace, strace := filepath.Join(dir, "recv.jsonl"), filepath.Join(dir, "send.jsonl")
	recv, addr := startRecv(t, "--out", out, "--count", "1", "--trace", rtrace)
	send := startMPTX(t, []string{"MPTX_SECRET=" + testSecret}, "send", "--transport", "tcp", "--trace", strace, addr, f)
	if code := send.exitCode(t, 2*time.Minute); code != 0 {
		t.Fatalf("mptx send exited %d: %s", code, send.stderr.String())
	}
	if code := recv.exitCode(t, time.Minute); code != 0 {
		t.Fatalf("mptx recv exited %d: %s", code, recv.stderr.String())
	}
	sameFile(t, f, filepath.Join(out, "kv.bin"))
	an := startMPTX(t, nil, "trace", "analyze", strace, rtrace)
	if code := an.exitCode(t, time.Minute); code != 0 {
		t.Fatalf("mptx trace analyze exited %d: %s%s", code, an.stdout.String(), an.stderr.String())
	}
	report := an.stdout.String()
	for _, want := range []string{`"kv.bin"`, "done", "receiver (mptx-recv): done", "service=mptx-send"} {
		if !strings.Contains(report, want) {
			t.Errorf("analyze report lacks %q:\n%s", want, report)
		}
	}
}

// TestCLIVerbsSessionNeedsDevice: on a host without a usable RDMA device
// (CI's, this development host's), a verbs session fails at once with the
// device error, one line and exit 1, at both ends, rather than listening
// and failing every sender's set-up (recv) or connecting first (send).
// Where verbs devices exist (the Soft-RoCE VM runs this package's CLI
// tests through test/rxe instead) there is nothing to show.
func TestCLIVerbsSessionNeedsDevice(t *testing.T) {
	if h, err := verbs.OpenHost(verbs.HostConfig{PoolSize: 4096, HugePages: verbs.HugeNever}); err == nil {
		h.Close()
		t.Skip("this host has a usable RDMA device: test/rxe runs verbs sessions from the CLI")
	}
	dir := t.TempDir()
	f := randomFile(t, dir, "t.bin", 10, 4)
	env := []string{"MPTX_SECRET=" + testSecret}
	for _, args := range [][]string{
		{"recv", "--transport", "verbs", "--listen", "127.0.0.1:0"},
		{"send", "--transport", "verbs", "127.0.0.1:1", f},
	} {
		p := startMPTX(t, env, args...)
		code := p.exitCode(t, 30*time.Second)
		if msg := p.stderr.String(); code != 1 || !strings.Contains(msg, "no usable RDMA device") || strings.Count(msg, "\n") != 1 {
			t.Errorf("mptx %s: exit %d, stderr %q; want 1 and one line naming the missing RDMA device", strings.Join(args, " "), code, msg)
		}
	}
}
