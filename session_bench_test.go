package mptx_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
)

// benchTensor is the tensor size of the TCP benchmarks.
const benchTensor = 64 << 20

// plainStream is the yardstick of BenchmarkTCPLoopback: one Go TCP
// connection over loopback, 1 MiB writes on one end, 1 MiB reads on the
// other, and a one-byte receipt per tensor.
type plainStream struct {
	ln   net.Listener
	c    net.Conn
	done chan error
	ack  []byte
}

func newPlainStream(tb testing.TB, size int) *plainStream { return newStream(tb, size, false) }

// newStream is newPlainStream; with whole, the receiving end reads each
// tensor into a buffer of its own size (where an application wants it)
// rather than through one 1 MiB buffer that stays in the CPU's cache.
func newStream(tb testing.TB, size int, whole bool) *plainStream {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &plainStream{ln: ln, done: make(chan error, 1), ack: make([]byte, 1)}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			p.done <- err
			return
		}
		defer c.Close()
		buf := make([]byte, 1<<20)
		var dst []byte
		if whole {
			dst = make([]byte, size)
		}
		for {
			// Read a whole tensor, then acknowledge it (the receipt).
			got := 0
			for got < size {
				b := buf[:min(len(buf), size-got)]
				if whole {
					b = dst[got:min(got+1<<20, size)]
				}
				n, err := c.Read(b)
				if err != nil {
					p.done <- nil
					return
				}
				got += n
			}
			if _, err := c.Write([]byte{1}); err != nil {
				p.done <- err
				return
			}
		}
	}()
	if p.c, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.close)
	return p
}

func (p *plainStream) send(tb testing.TB, data []byte) {
	for off := 0; off < len(data); off += 1 << 20 {
		if _, err := p.c.Write(data[off:min(off+1<<20, len(data))]); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := io.ReadFull(p.c, p.ack); err != nil {
		tb.Fatal(err)
	}
}

func (p *plainStream) close() {
	if p.c != nil {
		p.c.Close()
		p.c = nil
		<-p.done
	}
	p.ln.Close()
}

// sessionPair is a sending and a receiving session over loopback TCP; the
// receiver releases every tensor as it arrives.
type sessionPair struct {
	s *mptx.Session
}

func newSessionPair(tb testing.TB, paths int, cfg mptx.Config) *sessionPair {
	tb.Helper()
	cfg.Secret = testSecret
	rcfg := cfg
	rcfg.RegionSize = 4 * benchTensor
	ln, err := mptx.Listen("127.0.0.1:0", rcfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	ctx := context.Background()
	go func() {
		s, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		defer s.Close()
		for {
			t, err := s.Recv(ctx)
			if err != nil {
				return
			}
			t.Release()
		}
	}()
	scfg := cfg
	scfg.Paths = paths
	s, err := mptx.Dial(ctx, ln.Addr().String(), scfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return &sessionPair{s: s}
}

func (p *sessionPair) send(tb testing.TB, data []byte) {
	if err := p.s.Send(context.Background(), "t", data); err != nil {
		tb.Fatal(err)
	}
}

// warm sends a few tensors outside the timer: the first passes over the
// buffers take their page faults and grow the socket buffers (a one-time
// cost per connection).
func warm(tb testing.TB, send func(testing.TB, []byte), data []byte) {
	for range 3 {
		send(tb, data)
	}
}

// meter measures one side of a benchmark: wall time and the process's CPU
// time (getrusage: both ends of the loopback, user and kernel) per byte.
type meter struct {
	bytes    float64
	wall     time.Duration
	cpu      time.Duration
	t0, c0   time.Time
	cpuStart time.Duration
}

func (m *meter) start() { m.t0, m.cpuStart = time.Now(), cpuTime() }

func (m *meter) stop(n int) {
	m.wall += time.Since(m.t0)
	m.cpu += cpuTime() - m.cpuStart
	m.bytes += float64(n)
}

func (m *meter) gbps() float64 { return m.bytes / m.wall.Seconds() / 1e9 }

// cpuPerGB is CPU seconds per GB (10^9 bytes) moved.
func (m *meter) cpuPerGB() float64 { return m.cpu.Seconds() / (m.bytes / 1e9) }

// BenchmarkTCPLoopback moves 64 MiB tensors over loopback and reports GB/s
// and CPU seconds per GB (cpu-s/GB: the whole process, both ends, user and
// kernel time, from getrusage; a view of the cost that a loaded machine
// does not distort as much as the rate): a plain Go TCP stream (the
// yardstick: one connection, 1 MiB writes and reads, a one-byte receipt),
// and an mptx session over qp/tcp with 1 and with 4 paths (Send to the
// receiver's Receipt, CRC32C on both ends included).
//
// The paired sub-benchmarks are the ones to compare with issue 9's
// targets (one path ≥ 0.9× the plain stream, several paths ≥ 1.0×): each
// iteration sends one tensor over the plain stream and one over the
// session, back to back, so that both see the same load; they report the
// ratio of the session's rate to the plain stream's over the run, the
// spread of the per-iteration ratios (ratio-min, ratio-max), both rates
// and both CPU costs. The nocrc variants turn the CRC32C off on both ends
// (Config.NoChecksum), which shows what the checksum costs and what the
// transport alone does.
func BenchmarkTCPLoopback(b *testing.B) {
	data := tensor(7, benchTensor)
	b.Run("plain-stream", func(b *testing.B) {
		p := newPlainStream(b, benchTensor)
		warm(b, p.send, data)
		b.ReportAllocs()
		b.SetBytes(benchTensor)
		var m meter
		b.ResetTimer()
		m.start()
		for range b.N {
			p.send(b, data)
		}
		m.stop(b.N * benchTensor)
		b.ReportMetric(m.gbps(), "GB/s")
		b.ReportMetric(m.cpuPerGB(), "cpu-s/GB")
	})
	// The same stream, the receiver reading each tensor into memory of
	// its own size, as a session's region holds it: not the issue's
	// yardstick, but what a receiver that keeps the tensor pays.
	b.Run("plain-stream/whole", func(b *testing.B) {
		p := newStream(b, benchTensor, true)
		warm(b, p.send, data)
		b.ReportAllocs()
		b.SetBytes(benchTensor)
		var m meter
		b.ResetTimer()
		m.start()
		for range b.N {
			p.send(b, data)
		}
		m.stop(b.N * benchTensor)
		b.ReportMetric(m.gbps(), "GB/s")
		b.ReportMetric(m.cpuPerGB(), "cpu-s/GB")
	})
	for _, paths := range []int{1, 4} {
		b.Run(fmt.Sprintf("session/paths=%d", paths), func(b *testing.B) {
			p := newSessionPair(b, paths, mptx.Config{})
			warm(b, p.send, data)
			b.ReportAllocs()
			b.SetBytes(benchTensor)
			var m meter
			b.ResetTimer()
			m.start()
			for range b.N {
				p.send(b, data)
			}
			m.stop(b.N * benchTensor)
			b.ReportMetric(m.gbps(), "GB/s")
			b.ReportMetric(m.cpuPerGB(), "cpu-s/GB")
		})
	}
	for _, c := range []struct {
		name  string
		paths int
		cfg   mptx.Config
	}{
		{"paths=1", 1, mptx.Config{}},
		{"paths=4", 4, mptx.Config{}},
		{"paths=1/nocrc", 1, mptx.Config{NoChecksum: true}},
		{"paths=4/nocrc", 4, mptx.Config{NoChecksum: true}},
	} {
		paths := c.paths
		b.Run("paired/"+c.name, func(b *testing.B) {
			plain := newPlainStream(b, benchTensor)
			sess := newSessionPair(b, paths, c.cfg)
			warm(b, plain.send, data)
			warm(b, sess.send, data)
			b.ReportAllocs()
			b.SetBytes(2 * benchTensor)
			var mp, ms meter
			lo, hi := math.Inf(1), math.Inf(-1)
			b.ResetTimer()
			for range b.N {
				mp.start()
				plain.send(b, data)
				t := time.Since(mp.t0)
				mp.stop(benchTensor)
				ms.start()
				sess.send(b, data)
				r := t.Seconds() / time.Since(ms.t0).Seconds()
				ms.stop(benchTensor)
				lo, hi = min(lo, r), max(hi, r)
			}
			b.ReportMetric(ms.gbps()/mp.gbps(), "ratio")
			b.ReportMetric(lo, "ratio-min")
			b.ReportMetric(hi, "ratio-max")
			b.ReportMetric(mp.gbps(), "plain-GB/s")
			b.ReportMetric(ms.gbps(), "sess-GB/s")
			b.ReportMetric(mp.cpuPerGB(), "plain-cpu-s/GB")
			b.ReportMetric(ms.cpuPerGB(), "sess-cpu-s/GB")
		})
	}
}
