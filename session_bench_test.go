package mptx_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
)

// BenchmarkTCPLoopback moves 64 MiB tensors over loopback three ways,
// side by side, and reports GB/s: a plain Go TCP stream (the yardstick:
// one connection, io.Copy-style 1 MiB writes and reads), and an mptx
// session over qp/tcp with 1 and with 4 paths (Send to the receiver's
// Receipt, CRC32C on both ends included). Issue 9's targets: one path ≥
// 0.9× the plain stream, several paths ≥ 1.0×.
func BenchmarkTCPLoopback(b *testing.B) {
	const size = 64 << 20
	data := tensor(7, size)
	b.Run("plain-stream", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		done := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				done <- err
				return
			}
			defer c.Close()
			buf := make([]byte, 1<<20)
			for {
				// Read a whole tensor, then acknowledge it (the receipt).
				got := 0
				for got < size {
					n, err := c.Read(buf[:min(len(buf), size-got)])
					if err != nil {
						done <- nil
						return
					}
					got += n
				}
				if _, err := c.Write([]byte{1}); err != nil {
					done <- err
					return
				}
			}
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		ack := make([]byte, 1)
		b.SetBytes(size)
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			for off := 0; off < size; off += 1 << 20 {
				if _, err := c.Write(data[off : off+1<<20]); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := io.ReadFull(c, ack); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(size)*float64(b.N)/time.Since(start).Seconds()/1e9, "GB/s")
		c.Close()
		<-done
	})
	for _, paths := range []int{1, 4} {
		b.Run(fmt.Sprintf("session/paths=%d", paths), func(b *testing.B) {
			ln, err := mptx.Listen("127.0.0.1:0", mptx.Config{Secret: testSecret, RegionSize: 4 * size})
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
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
			s, err := mptx.Dial(ctx, ln.Addr().String(), mptx.Config{Secret: testSecret, Paths: paths, SendBuffer: 4 * size})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			// Warm up: the first pass over the send buffer and the region
			// takes their page faults (a one-time cost per session).
			for range 5 {
				if err := s.Send(ctx, "warm-up", data); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(size)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if err := s.Send(ctx, "t", data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size)*float64(b.N)/time.Since(start).Seconds()/1e9, "GB/s")
		})
	}
}
