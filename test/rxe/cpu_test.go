package rxe_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/verbs"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// CPU per byte on real verbs (issue 15): mptx over one Soft-RoCE path next
// to perftest's ib_write_bw on the same path, in the same VM run.
//
// mptx: a sender and a receiver process (this test binary re-executed as
// TestCPUChildVerbs) ship cpuTotal bytes as cpuTransfers tensors, one
// connection each, with the engine settings the other tests use under TCG
// (slowLink). Each process reports its user + system time from
// getrusage(2) around its driver loops only (device, pool and connection
// setup excluded). The parent also reads /proc/stat around the sending,
// from when the sender's buffer is filled to its last receipt, which counts
// every CPU of the VM: both processes (connection setup included) and
// rdma_rxe's kernel work (its requester runs in the poster's context, its
// responder and completer in softirqs), the way perftest's --cpu_util
// does.
//
// ib_write_bw: 1 MiB WRITEs for cpuRefSeconds with --cpu_util, whose
// figure is the VM-wide utilisation (/proc/stat) over the run; and each
// ib_write_bw process's own user + system time (setup included: it is
// small next to the run).
//
// Everything is per 10^9 bytes. Under TCG the absolute figures are those
// of an emulated CPU; the comparison is what the test is for.

const (
	cpuTransfers  = 4
	cpuTensorSize = 256 * units.MiB
	cpuTotal      = cpuTransfers * cpuTensorSize // 1 GiB
	cpuRefSeconds = 10
)

func TestCPUPerGBVerbs(t *testing.T) {
	e := needVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ncpu := runtime.NumCPU()

	ref := ibWriteBWCPU(t, ctx, e.sender[0], e.receiver[0], 18600)
	t.Logf("ib_write_bw: %.3f Gbit/s, CPU_Util %.1f%% of %d CPUs; client %+v, server %+v over %v",
		ref.gbps, ref.util, ncpu, ref.client, ref.server, ref.wall)

	recv := startCPUChild(t, ctx, "recv", e.receiver[0], "")
	addr := recv.field(t, "ADDR", 60*time.Second)
	send := startCPUChild(t, ctx, "send", e.sender[0], addr[0])
	send.field(t, "GO", 2*time.Minute) // the sender's buffer is filled
	stat0 := procStat(t)
	sres := send.field(t, "CPU", 8*time.Minute)
	stat1 := procStat(t)
	rres := recv.field(t, "CPU", time.Minute)
	ns := func(f []string, i int) float64 { v, _ := strconv.ParseInt(f[i], 10, 64); return float64(v) / 1e9 }
	send.wait(t)
	recv.wait(t)

	gb := float64(cpuTotal) / 1e9
	sys := stat1.busy(stat0) // CPU-seconds of the whole VM, all CPUs
	mptxGbps := float64(cpuTotal) * 8 / ns(sres, 2) / 1e9
	refGB := ref.gbps * ref.wall.Seconds() / 8 // GB the reference moved
	split := func(user, sys, gb float64) string {
		return fmt.Sprintf("%.1f (user %.1f + sys %.1f)", (user+sys)/gb, user/gb, sys/gb)
	}
	e.report(t, "CPU s/GB, one path %s->%s (VM-wide: every CPU of the VM, rxe's kernel work included; sys: mostly rxe's): "+
		"ib_write_bw %.3f Gbit/s: VM-wide %.1f (--cpu_util %.1f%% x %d CPUs), client %s, server %s; "+
		"mptx %.3f Gbit/s (%d x %v): VM-wide %.1f, sender %s, receiver %s",
		e.sender[0], e.receiver[0],
		ref.gbps, ref.util/100*float64(ncpu)*8/ref.gbps, ref.util, ncpu,
		split(ref.client.user.Seconds(), ref.client.sys.Seconds(), refGB), split(ref.server.user.Seconds(), ref.server.sys.Seconds(), refGB),
		mptxGbps, cpuTransfers, cpuTensorSize, sys/gb, split(ns(sres, 0), ns(sres, 1), gb), split(ns(rres, 0), ns(rres, 1), gb))
	if ref.gbps <= 0 || mptxGbps <= 0 {
		t.Fatal("a transfer moved nothing")
	}
}

// ibRef is one ib_write_bw run with --cpu_util.
type ibRef struct {
	gbps, util     float64 // BW average, CPU_Util[%]
	client, server cpuTime
	wall           time.Duration
}

// bwCPULine matches the report line of 1 MiB messages with --cpu_util:
// #bytes #iterations BW-peak BW-average MsgRate CPU_Util.
var bwCPULine = regexp.MustCompile(`(?m)^\s*1048576\s+\d+\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+([\d.]+)`)

func ibWriteBWCPU(t testing.TB, ctx context.Context, sdev, rdev string, port int) ibRef {
	t.Helper()
	args := func(dev string) []string {
		return []string{"-d", dev, "-x", "1", "-F", "-s", "1048576", "-D", strconv.Itoa(cpuRefSeconds), "--report_gbits", "--cpu_util", "-p", strconv.Itoa(port)}
	}
	srv := exec.CommandContext(ctx, "ib_write_bw", args(rdev)...)
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatalf("ib_write_bw (perftest) server: %v", err)
	}
	defer func() {
		if srv.ProcessState == nil {
			_ = srv.Process.Kill()
			_ = srv.Wait()
		}
	}()
	var out []byte
	var cli *exec.Cmd
	var err error
	var start time.Time
	for i := 0; i < 50; i++ { // the server needs a moment to listen
		time.Sleep(200 * time.Millisecond)
		cli = exec.CommandContext(ctx, "ib_write_bw", append(args(sdev), "127.0.0.1")...)
		start = time.Now()
		out, err = cli.CombinedOutput()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("ib_write_bw client: %v\n%s\nserver:\n%s", err, out, srvOut.String())
	}
	wall := time.Since(start)
	if err := srv.Wait(); err != nil {
		t.Fatalf("ib_write_bw server: %v\n%s", err, srvOut.String())
	}
	m := bwCPULine.FindSubmatch(out)
	if m == nil {
		m = bwCPULine.FindSubmatch(srvOut.Bytes())
	}
	if m == nil {
		t.Fatalf("no BW line with CPU_Util in ib_write_bw output:\nclient:\n%s\nserver:\n%s", out, srvOut.String())
	}
	r := ibRef{client: cpuOf(cli.ProcessState), server: cpuOf(srv.ProcessState), wall: wall}
	r.gbps, _ = strconv.ParseFloat(string(m[1]), 64)
	r.util, _ = strconv.ParseFloat(string(m[2]), 64)
	return r
}

func cpuOf(ps *os.ProcessState) cpuTime { return cpuTime{ps.UserTime(), ps.SystemTime()} }

// cpuStat is one reading of /proc/stat's aggregate cpu line, in clock ticks.
type cpuStat struct{ busyTicks, allTicks uint64 }

func procStat(t testing.TB) cpuStat {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		t.Fatalf("/proc/stat: unexpected first line %q", line)
	}
	var s cpuStat
	for i, x := range f[1:] {
		v, _ := strconv.ParseUint(x, 10, 64)
		if i >= 8 { // guest and guest_nice are already counted in user and nice
			break
		}
		s.allTicks += v
		if i != 3 && i != 4 { // idle, iowait
			s.busyTicks += v
		}
	}
	return s
}

// busy returns the CPU-seconds spent, on all CPUs, since an earlier
// reading (USER_HZ is 100 on Linux).
func (s cpuStat) busy(earlier cpuStat) float64 { return float64(s.busyTicks-earlier.busyTicks) / 100 }

// cpuChild is a running TestCPUChildVerbs process.
type cpuChild struct {
	role  string
	cmd   *exec.Cmd
	lines *bufio.Scanner
	errb  strings.Builder
}

func startCPUChild(t testing.TB, ctx context.Context, role, dev, addr string) *cpuChild {
	t.Helper()
	c := &cpuChild{role: role, cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCPUChildVerbs$", "-test.count=1")}
	c.cmd.Env = append(os.Environ(), "MPTX_RXE_CPU_ROLE="+role, "MPTX_RXE_CPU_DEV="+dev, "MPTX_RXE_CPU_ADDR="+addr)
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = &c.errb
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	c.lines = bufio.NewScanner(out)
	return c
}

// field waits for a stdout line "key fields..." and returns the fields.
func (c *cpuChild) field(t testing.TB, key string, d time.Duration) []string {
	t.Helper()
	got := make(chan []string, 1)
	go func() {
		for c.lines.Scan() {
			if f := strings.Fields(c.lines.Text()); len(f) > 0 && f[0] == key {
				got <- f[1:]
				return
			}
		}
		got <- nil
	}()
	select {
	case f := <-got:
		if f == nil {
			t.Fatalf("%s child ended before printing %s; stderr:\n%s", c.role, key, c.errb.String())
		}
		return f
	case <-time.After(d):
		t.Fatalf("no %s from the %s child within %v", key, c.role, d)
		return nil
	}
}

func (c *cpuChild) wait(t testing.TB) {
	t.Helper()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("%s child: %v\n%s", c.role, err, c.errb.String())
	}
}

// cpuEngine is slowLink (e2e_test.go) as an engine configuration.
var cpuEngine = multipath.Config{ChunkSize: units.MiB, Segment: units.MiB, MaxInFlight: 16 * units.MiB, MinTimeout: 3 * time.Second,
	Pacing: multipath.PacingConfig{PFCXoff: 16 * units.MiB}}

var cpuQP = verbs.QPConfig{Timeout: 500 * time.Millisecond, RetryCount: 3}

// cpuTime is user and system CPU time.
type cpuTime struct{ user, sys time.Duration }

func (c cpuTime) add(d cpuTime) cpuTime { return cpuTime{c.user + d.user, c.sys + d.sys} }
func (c cpuTime) sub(d cpuTime) cpuTime { return cpuTime{c.user - d.user, c.sys - d.sys} }

func rusageNow() cpuTime {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return cpuTime{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

// loopLocked runs the driver loop on a locked OS thread, as cmd/mptx does.
func loopLocked(ctx context.Context, cfg mptx.LoopConfig, s mptx.Stepper) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		errc <- mptx.Loop(ctx, cfg, s)
	}()
	return <-errc
}

// TestCPUChildVerbs is one end of TestCPUPerGBVerbs's mptx transfer; it
// skips unless that test started it. It prints "ADDR addr" (the receiver,
// once listening) and "CPU user-ns sys-ns wall-ns" when done: its CPU time
// around its driver loops and, for the sender, the wall time of the
// transfers.
func TestCPUChildVerbs(t *testing.T) {
	role := os.Getenv("MPTX_RXE_CPU_ROLE")
	if role == "" {
		t.Skip("one end of TestCPUPerGBVerbs; run that test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	h, err := verbs.OpenHost(verbs.HostConfig{Devices: []string{os.Getenv("MPTX_RXE_CPU_DEV")}, PoolSize: cpuTensorSize + 4*units.MiB})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var used cpuTime
	var wall time.Duration
	if role == "recv" {
		used = cpuRecv(t, ctx, h)
	} else {
		used, wall = cpuSend(t, ctx, h, os.Getenv("MPTX_RXE_CPU_ADDR"))
	}
	fmt.Printf("CPU %d %d %d\n", used.user.Nanoseconds(), used.sys.Nanoseconds(), wall.Nanoseconds())
}

func cpuSend(t testing.TB, ctx context.Context, h *verbs.Host, addr string) (used cpuTime, wall time.Duration) {
	buf, err := h.Alloc(cpuTensorSize)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	for i, b := 0, buf.Bytes(); i < len(b); i++ {
		b[i] = byte(i * 131)
	}
	fmt.Println("GO")
	for k := range cpuTransfers {
		clock := vtime.NewMonotonic()
		conn, err := h.Dial(ctx, addr, verbs.DialConfig{Secret: []byte(goodSecret), Send: buf, Size: cpuTensorSize, ChunkSize: units.MiB,
			Name: fmt.Sprintf("cpu%d", k), QP: cpuQP, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		var done bool
		var doneErr error
		snd, err := mptx.NewSender(conn, mptx.SenderConfig{Engine: cpuEngine, OnDone: func(_ multipath.TransferID, _ vtime.Time, err error) {
			done, doneErr = true, err
		}})
		if err != nil {
			t.Fatal(err)
		}
		slot, plan, err := snd.Submit(clock.Now(), multipath.TransferSpec{ID: 1, Size: cpuTensorSize})
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Announce(ctx, &verbs.Transfer{ID: 1, Slot: uint32(slot), Size: uint64(cpuTensorSize), ChunkSize: uint64(plan.ChunkSize), Count: uint32(plan.Count)}); err != nil {
			t.Fatal(err)
		}
		u0, w0 := rusageNow(), time.Now()
		err = loopLocked(ctx, mptx.LoopConfig{Clock: clock, Wake: conn.Notify(), Done: func() bool { return done }}, snd)
		used, wall = used.add(rusageNow().sub(u0)), wall+time.Since(w0)
		if err != nil || doneErr != nil {
			t.Fatalf("transfer %d: loop %v, transfer %v", k, err, doneErr)
		}
		rc, err := conn.AwaitReceipt(ctx)
		if err != nil || !rc.OK {
			t.Fatalf("transfer %d: receipt %+v, %v", k, rc, err)
		}
		conn.Close()
	}
	return used, wall
}

func cpuRecv(t testing.TB, ctx context.Context, h *verbs.Host) (used cpuTime) {
	ln, err := h.Listen("127.0.0.1:0", verbs.ListenConfig{Secret: []byte(goodSecret), MaxSize: cpuTensorSize, QP: cpuQP})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fmt.Printf("ADDR %s\n", ln.Addr())
	for k := range cpuTransfers {
		r, err := ln.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := r.AwaitTransfer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		plan := chunk.Plan{Size: units.Bytes(tr.Size), ChunkSize: units.Bytes(tr.ChunkSize), Count: int(tr.Count)}
		var done bool
		var doneErr error
		rcv, err := mptx.NewReceiver(r, mptx.ReceiverConfig{OnDone: func(_ multipath.TransferID, _ vtime.Time, err error) {
			done, doneErr = true, err
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := rcv.Expect(int(tr.Slot), multipath.TransferID(tr.ID), plan, units.Bytes(tr.Remote)); err != nil {
			t.Fatal(err)
		}
		clock := vtime.NewMonotonic()
		if err := r.AckTransfer(ctx, tr); err != nil {
			t.Fatal(err)
		}
		u0 := rusageNow()
		err = loopLocked(ctx, mptx.LoopConfig{Clock: clock, Wake: r.Notify(), Done: func() bool { return done }}, rcv)
		used = used.add(rusageNow().sub(u0))
		if err != nil || doneErr != nil {
			t.Fatalf("transfer %d: loop %v, transfer %v", k, err, doneErr)
		}
		if err := r.Revoke(); err != nil {
			t.Fatal(err)
		}
		if err := r.SendReceipt(ctx, &verbs.Receipt{ID: tr.ID, OK: true, Bytes: tr.Size, Message: "cpu benchmark"}); err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	return used
}
