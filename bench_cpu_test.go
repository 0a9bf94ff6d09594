package mptx_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// CPU per byte. Each case ships cpuBytes (1 GiB) and reports the CPU time,
// user + system from getrusage(2), that each end spent around the transfer,
// per 10^9 bytes shipped: s/GB. A process's rusage counts all its threads
// (the driver loop, the TCP backend's socket goroutines, the Go runtime),
// so the sender and the receiver run in separate processes where the
// backend allows: the benchmark re-executes its own test binary as the
// receiver (TestCPUChild). Wall-clock throughput is reported too, but on a
// shared machine only the CPU figures are comparable between runs.
//
//	go test -run '^$' -bench CPUPerGB -benchtime 1x .

const cpuBytes = 1 * units.GiB

// cpuUsage returns the CPU time, user and system, of the calling process
// (who = RUSAGE_SELF).
func cpuUsage(who int) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// threadCPU returns the calling thread's CPU time in nanoseconds
// (clock_gettime(CLOCK_THREAD_CPUTIME_ID), finer than getrusage's
// microseconds): the in-process split of the mem case.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic(e)
	}
	return time.Duration(ts.Nano())
}

// threadCPUCost is the CPU time one interval measured with threadCPU
// includes for the clock reads themselves (half of each of its two
// syscalls), estimated from back-to-back reads.
func threadCPUCost() time.Duration {
	const k = 2000
	t0 := threadCPU()
	for range k {
		threadCPU()
	}
	return (threadCPU() - t0) / (k + 1)
}

// perGB converts a CPU time for n bytes to seconds per 10^9 bytes.
func perGB(d time.Duration, n units.Bytes) float64 { return d.Seconds() / (float64(n) / 1e9) }

func gbps(n units.Bytes, d time.Duration) float64 { return float64(n) * 8 / d.Seconds() / 1e9 }

func BenchmarkCPUPerGB(b *testing.B) {
	b.Run("mem", benchCPUMem)
	b.Run("tcp-session", func(b *testing.B) { benchCPUTwoProcs(b, "session") })
	b.Run("tcp-session-nocrc", func(b *testing.B) { benchCPUTwoProcs(b, "session-nocrc") })
	b.Run("tcp-plain", func(b *testing.B) { benchCPUTwoProcs(b, "plain") })
}

// benchCPUMem ships cpuBytes over qp/mem with the low-level driver (a
// Sender and a Receiver on one goroutine, in virtual time: 4 paths of
// 100 Gb/s), as 256 MiB tensors through 256 MiB regions. Everything runs
// on one locked OS thread, so its CPU clock, read around each call, splits
// the time between the sender (Sender.Step), the receiver (Receiver.Step)
// and the "wire": qp/mem's event list and its copy of every byte from the
// send region into the receive region, which a NIC's DMA does on
// hardware.
func benchCPUMem(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const region = 256 * units.MiB
	send, recv := make([]byte, region), make([]byte, region)
	for i := range send {
		send[i] = byte(i * 131)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var snd, rcv, wire, total, wall time.Duration
	var steps int64 // intervals timed per category (the sender's has a few more)
	for range b.N {
		paths := make([]mem.PathConfig, 4)
		for i := range paths {
			paths[i] = mem.PathConfig{Rate: 100 * units.Gbps, Delay: 5*time.Microsecond + time.Duration(i)*16*time.Nanosecond, NIC: i}
		}
		net, err := mem.New(mem.Config{Paths: paths, SendRegion: send, RecvRegion: recv})
		if err != nil {
			b.Fatal(err)
		}
		var sent, got units.Bytes
		s, err := mptx.NewSender(net.Conn(), mptx.SenderConfig{OnDone: func(_ multipath.TransferID, _ vtime.Time, err error) {
			if err != nil {
				b.Fatal(err)
			}
			sent += region
		}})
		if err != nil {
			b.Fatal(err)
		}
		r, err := mptx.NewReceiver(net.Receiver(), mptx.ReceiverConfig{OnDone: func(_ multipath.TransferID, _ vtime.Time, err error) {
			if err != nil {
				b.Fatal(err)
			}
			got += region
		}})
		if err != nil {
			b.Fatal(err)
		}
		u0, s0 := cpuUsage(syscall.RUSAGE_SELF)
		w0 := time.Now()
		for id := multipath.TransferID(1); units.Bytes(id-1)*region < cpuBytes; id++ {
			slot, plan, err := s.Submit(net.Now(), multipath.TransferSpec{ID: id, Size: region})
			if err != nil {
				b.Fatal(err)
			}
			if err := r.Expect(slot, id, plan, 0); err != nil {
				b.Fatal(err)
			}
			t0 := threadCPU()
			next := s.Step(net.Now())
			t1 := threadCPU()
			snd += t1 - t0
			for got < units.Bytes(id)*region || sent < units.Bytes(id)*region {
				t := vtime.Earliest(net.Next(), next)
				if t == 0 {
					b.Fatalf("stuck at %v", net.Now())
				}
				t0 := threadCPU()
				net.AdvanceTo(t)
				t1 := threadCPU()
				r.Step(net.Now())
				t2 := threadCPU()
				next = s.Step(net.Now())
				t3 := threadCPU()
				wire += t1 - t0
				rcv += t2 - t1
				snd += t3 - t2
				steps++
			}
		}
		wall += time.Since(w0)
		u1, s1 := cpuUsage(syscall.RUSAGE_SELF)
		total += u1 - u0 + s1 - s0
	}
	// Take out what the clock reads themselves cost.
	c := threadCPUCost() * time.Duration(steps)
	snd, rcv, wire = max(snd-c, 0), max(rcv-c, 0), max(wire-c, 0)
	n := units.Bytes(b.N) * cpuBytes
	b.ReportMetric(perGB(snd, n), "sender-s/GB")
	b.ReportMetric(perGB(rcv, n), "receiver-s/GB")
	b.ReportMetric(perGB(wire, n), "wire-s/GB")
	b.ReportMetric(float64(steps)/float64(n/(4*units.MiB)), "steps/chunk")
	b.ReportMetric(perGB(total, n), "process-s/GB")
	b.ReportMetric(gbps(n, wall), "Gbit/s")
}

// benchCPUTwoProcs ships cpuBytes between this process (the sender) and a
// child process (the receiver, TestCPUChild) over loopback TCP: "session"
// is an mptx session (mptx.Dial / Listen over qp/tcp: 4 paths, 64 MiB
// tensors, at most 4 in flight, CRC-32C on both ends as by default),
// "session-nocrc" the same without the checksums, "plain" one Go TCP
// stream (net.Conn writes of 4 MiB from one buffer, reads into one).
func benchCPUTwoProcs(b *testing.B, mode string) {
	var sndCPU, rcvCPU, wall time.Duration
	for range b.N {
		child := exec.Command(os.Args[0], "-test.run=^TestCPUChild$", "-test.count=1")
		child.Env = append(os.Environ(), "MPTX_CPU_CHILD="+mode)
		out, err := child.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		child.Stderr = os.Stderr
		if err := child.Start(); err != nil {
			b.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		addr := childLine(b, lines, "ADDR")
		var d time.Duration
		var used time.Duration
		switch mode {
		case "plain":
			d, used = sendPlain(b, addr[0])
		default:
			d, used = sendSession(b, addr[0], mode == "session-nocrc")
		}
		res := childLine(b, lines, "CPU")
		ns, _ := strconv.ParseInt(res[0], 10, 64)
		if err := child.Wait(); err != nil {
			b.Fatalf("receiver process: %v", err)
		}
		sndCPU += used
		rcvCPU += time.Duration(ns)
		wall += d
	}
	n := units.Bytes(b.N) * cpuBytes
	b.ReportMetric(perGB(sndCPU, n), "sender-s/GB")
	b.ReportMetric(perGB(rcvCPU, n), "receiver-s/GB")
	b.ReportMetric(gbps(n, wall), "Gbit/s")
}

// childLine reads the child's stdout up to a line "key fields...".
func childLine(b *testing.B, sc *bufio.Scanner, key string) []string {
	b.Helper()
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 && f[0] == key {
			return f[1:]
		}
	}
	b.Fatalf("receiver process ended before printing %s (%v)", key, sc.Err())
	return nil
}

var cpuSecret = []byte("bench-cpu-per-gb shared secret!!")

const cpuTensor = 64 * units.MiB

func sendSession(b *testing.B, addr string, noCRC bool) (wall, cpu time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := mptx.Dial(ctx, addr, mptx.Config{Secret: cpuSecret, NoChecksum: noCRC, SendBuffer: 4 * cpuTensor})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := make([]byte, cpuTensor)
	for i := range data {
		data[i] = byte(i * 131)
	}
	u0, s0 := cpuUsage(syscall.RUSAGE_SELF)
	t0 := time.Now()
	var inflight []*mptx.Transfer
	for i := 0; units.Bytes(i)*cpuTensor < cpuBytes; i++ {
		if len(inflight) == 4 {
			if err := inflight[0].Wait(ctx); err != nil {
				b.Fatal(err)
			}
			inflight = inflight[1:]
		}
		t, err := s.SendAsync(ctx, fmt.Sprintf("t%d", i), data)
		if err != nil {
			b.Fatal(err)
		}
		inflight = append(inflight, t)
	}
	for _, t := range inflight {
		if err := t.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	wall = time.Since(t0)
	u1, s1 := cpuUsage(syscall.RUSAGE_SELF)
	return wall, u1 - u0 + s1 - s0
}

func sendPlain(b *testing.B, addr string) (wall, cpu time.Duration) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4*units.MiB)
	for i := range buf {
		buf[i] = byte(i * 131)
	}
	u0, s0 := cpuUsage(syscall.RUSAGE_SELF)
	t0 := time.Now()
	for sent := units.Bytes(0); sent < cpuBytes; sent += units.Bytes(len(buf)) {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	// The receiver acknowledges the last byte with one of its own.
	if _, err := io.ReadFull(c, buf[:1]); err != nil {
		b.Fatal(err)
	}
	wall = time.Since(t0)
	u1, s1 := cpuUsage(syscall.RUSAGE_SELF)
	return wall, u1 - u0 + s1 - s0
}

// TestCPUChild is the receiving process of BenchmarkCPUPerGB; it skips
// unless the benchmark started it (MPTX_CPU_CHILD). It prints "ADDR addr"
// once listening and "CPU ns" (its user + system time from the first
// accepted byte stream to the last byte received) when done.
func TestCPUChild(t *testing.T) {
	mode := os.Getenv("MPTX_CPU_CHILD")
	if mode == "" {
		t.Skip("the receiving process of BenchmarkCPUPerGB; run that benchmark")
	}
	var used time.Duration
	switch mode {
	case "plain":
		used = recvPlain(t)
	default:
		used = recvSession(t, mode == "session-nocrc")
	}
	fmt.Printf("CPU %d\n", used.Nanoseconds())
}

func recvSession(t *testing.T, noCRC bool) time.Duration {
	ln, err := mptx.Listen("127.0.0.1:0", mptx.Config{Secret: cpuSecret, NoChecksum: noCRC, RegionSize: 4 * cpuTensor})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fmt.Printf("ADDR %s\n", ln.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	u0, s0 := cpuUsage(syscall.RUSAGE_SELF)
	for got := units.Bytes(0); got < cpuBytes; {
		tn, err := s.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got += units.Bytes(len(tn.Data))
		tn.Release()
	}
	u1, s1 := cpuUsage(syscall.RUSAGE_SELF)
	return u1 - u0 + s1 - s0
}

func recvPlain(t *testing.T) time.Duration {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fmt.Printf("ADDR %s\n", ln.Addr())
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4*units.MiB)
	u0, s0 := cpuUsage(syscall.RUSAGE_SELF)
	for got := units.Bytes(0); got < cpuBytes; {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got += units.Bytes(n)
	}
	u1, s1 := cpuUsage(syscall.RUSAGE_SELF)
	if _, err := c.Write(buf[:1]); err != nil {
		t.Fatal(err)
	}
	return u1 - u0 + s1 - s0
}
