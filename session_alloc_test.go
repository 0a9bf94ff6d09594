package mptx_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/units"
)

// recvAll receives n tensors and checks each against want(name).
func recvAll(t *testing.T, rcv *mptx.Session, n int, want func(name string) []byte) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for i := range n {
			tn, err := rcv.Recv(ctx)
			if err != nil {
				errc <- fmt.Errorf("Recv %d: %w", i, err)
				return
			}
			if w := want(tn.Name); !bytes.Equal(tn.Data, w) {
				errc <- fmt.Errorf("tensor %q: %d bytes received, content differs from the %d sent", tn.Name, len(tn.Data), len(w))
				return
			}
			tn.Release()
		}
		errc <- nil
	}()
	return errc
}

// TestAllocSendInPlace: a tensor allocated from the pool is sent from
// where it lies. The staging buffer here is one page, so a 24 MiB tensor
// can only go in place; it arrives intact, and the pool is empty again
// after Free.
func TestAllocSendInPlace(t *testing.T) {
	snd, rcv := pair(t, mptx.Config{Paths: 2, SendBuffer: 4 * units.KiB, Pool: 64 * units.MiB}, mptx.Config{RegionSize: 64 * units.MiB})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	big := tensor(1, 24<<20)
	small := tensor(2, 2<<20+5)
	errc := recvAll(t, rcv, 4, func(name string) []byte {
		switch name {
		case "big":
			return big
		case "big-prefix":
			return big[:1<<20]
		case "small":
			return small
		}
		return tensor(3, 100) // "staged"
	})
	b, err := snd.Alloc(units.Bytes(len(big)))
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != 24*units.MiB || b.Cap() != 24*units.MiB || len(b.Bytes()) != len(big) || b.Offset()%(4*units.KiB) != 0 {
		t.Fatalf("Alloc(24MiB) = Len %v Cap %v Offset %v", b.Len(), b.Cap(), b.Offset())
	}
	copy(b.Bytes(), big)
	if _, err := os.Stat("/sys/devices/system/node/node1"); runtime.GOOS == "linux" && os.IsNotExist(err) {
		if n := b.NUMANode(); n != 0 {
			t.Errorf("NUMANode() = %d on a host with one node, want 0", n)
		}
	}
	if err := snd.SendBuffer(ctx, "big", b, 0); err != nil {
		t.Fatal(err)
	}
	if err := snd.SendBuffer(ctx, "big-prefix", b, units.MiB); err != nil {
		t.Fatal(err)
	}
	// Send of a slice that starts where a Buffer does goes in place too.
	sb, err := snd.Alloc(units.Bytes(len(small)))
	if err != nil {
		t.Fatal(err)
	}
	copy(sb.Bytes(), small)
	if err := snd.Send(ctx, "small", sb.Bytes()); err != nil {
		t.Fatal(err)
	}
	// Ordinary memory goes as SendAsync says (over TCP: registered).
	if err := snd.Send(ctx, "staged", tensor(3, 100)); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	st, ok := snd.PoolStats()
	if !ok || st.Live != 2 || st.InUse != 24*units.MiB+sb.Cap() || st.Requested != units.Bytes(len(big)+len(small)) {
		t.Fatalf("PoolStats = %+v, %v; want the two buffers live", st, ok)
	}
	b.Free()
	b.Free() // idempotent
	sb.Free()
	if st, _ := snd.PoolStats(); st.Live != 0 || st.InUse != 0 || st.HighWater != 24*units.MiB+sb.Cap() {
		t.Fatalf("after Free: PoolStats = Live %d InUse %v HighWater %v", st.Live, st.InUse, st.HighWater)
	}
	// A sub-slice that does not start at a Buffer is sent like any other
	// memory: over TCP registered with the connection (qp.SendRegions),
	// not staged, so the small staging buffer does not limit it.
	c, _ := snd.Alloc(64 * units.KiB)
	if err := snd.Send(ctx, "mid", c.Bytes()[4096:]); err != nil {
		t.Errorf("Send of a slice from the middle of a Buffer = %v, want it sent from where it lies", err)
	}
	c.Free()
}

// TestFreeWhileInFlight: Free during a transfer defers the release until
// the transfer ends; the memory is not handed out again before that.
func TestFreeWhileInFlight(t *testing.T) {
	snd, rcv := pair(t, mptx.Config{Paths: 2, SendBuffer: 4 * units.KiB, Pool: 32 * units.MiB}, mptx.Config{RegionSize: 32 * units.MiB})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := tensor(5, 16<<20)
	errc := recvAll(t, rcv, 1, func(string) []byte { return data })
	b, err := snd.Alloc(units.Bytes(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	copy(b.Bytes(), data)
	tr, err := snd.SendBufferAsync(ctx, "x", b, 0)
	if err != nil {
		t.Fatal(err)
	}
	b.Free()
	// Until the transfer ends, the 16 MiB are still taken: a request for
	// the whole pool fails, one for the other half fits.
	select {
	case <-tr.Done():
	default:
		if _, err := snd.Alloc(32 * units.MiB); !errors.Is(err, mptx.ErrPoolFull) {
			t.Errorf("Alloc(whole pool) while a freed buffer is in flight = %v, want ErrPoolFull", err)
		}
	}
	if err := tr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if st, _ := snd.PoolStats(); st.Live != 0 || st.InUse != 0 {
		t.Fatalf("after the transfer of a freed buffer: Live %d InUse %v, want 0", st.Live, st.InUse)
	}
	whole, err := snd.Alloc(32 * units.MiB)
	if err != nil {
		t.Fatalf("Alloc(whole pool) after the transfer ended: %v", err)
	}
	whole.Free()
}

func TestAllocErrors(t *testing.T) {
	snd, rcv := pair(t, mptx.Config{Pool: 8 * units.MiB}, mptx.Config{})
	for _, tc := range []struct {
		s    *mptx.Session
		n    units.Bytes
		want string
	}{
		{rcv, units.MiB, "receiving end"},
		{snd, 0, "Alloc(0 bytes): size out of range (valid: 1 byte to the pool's 8MiB, Config.Pool)"},
		{snd, 8*units.MiB + 1, "size out of range"},
	} {
		if _, err := tc.s.Alloc(tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Alloc(%d) = %v, want an error containing %q", tc.n, err, tc.want)
		}
	}
	a, err := snd.Alloc(6 * units.MiB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snd.Alloc(4 * units.MiB); !errors.Is(err, mptx.ErrPoolFull) || !strings.Contains(err.Error(), "largest free range 2MiB") {
		t.Errorf("Alloc beyond the pool = %v, want ErrPoolFull naming the largest free range", err)
	}
	ctx := context.Background()
	a.Free()
	if err := snd.SendBuffer(ctx, "x", a, 0); err == nil || !strings.Contains(err.Error(), "freed Buffer") {
		t.Errorf("SendBuffer of a freed buffer = %v", err)
	}
	b, _ := snd.Alloc(units.MiB)
	if err := snd.SendBuffer(ctx, "x", b, 2*units.MiB); err == nil || !strings.Contains(err.Error(), "n = 2097152 bytes (valid: 0 for all, or 1 to the buffer's 1048576)") {
		t.Errorf("SendBuffer beyond the buffer = %v", err)
	}
	other, _ := pair(t, mptx.Config{Pool: units.MiB}, mptx.Config{})
	if err := other.SendBuffer(ctx, "x", b, 0); err == nil || !strings.Contains(err.Error(), "another session") {
		t.Errorf("SendBuffer of another session's buffer = %v", err)
	}
	if err := snd.SendBuffer(ctx, "x", nil, 0); err == nil {
		t.Errorf("SendBuffer(nil) succeeded")
	}
	nopool, _ := pair(t, mptx.Config{}, mptx.Config{})
	if _, err := nopool.Alloc(units.MiB); err == nil || !strings.Contains(err.Error(), "Config.Pool = 0") {
		t.Errorf("Alloc without a pool = %v", err)
	}
	if _, ok := nopool.PoolStats(); ok {
		t.Errorf("PoolStats on a session without a pool: ok")
	}
	if _, err := mptx.Dial(ctx, "127.0.0.1:1", mptx.Config{Secret: testSecret, Pool: -1}); err == nil || !strings.Contains(err.Error(), "Config.Pool = -1 bytes") {
		t.Errorf("Dial with Pool -1 = %v", err)
	}
	snd.Close()
	// The session's error: ErrSessionClosed, or the control channel's
	// EOF when the peer's reaction to the Bye wins the race to end it.
	if _, err := snd.Alloc(units.MiB); err == nil || err.Error() != snd.Err().Error() {
		t.Errorf("Alloc after Close = %v, want the session's error %v", err, snd.Err())
	}
	b.Free()
}

// TestAllocConcurrent: goroutines allocate KV-cache-like blocks, fill,
// send and free them concurrently (run it with -race); every tensor
// arrives intact and the pool ends empty: nothing leaked.
func TestAllocConcurrent(t *testing.T) {
	const workers, each = 6, 8
	snd, rcv := pair(t, mptx.Config{Paths: 3, SendBuffer: 4 * units.KiB, Pool: 16 * units.MiB}, mptx.Config{RegionSize: 32 * units.MiB})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	size := func(w, k int) int { return 1<<20 - (w*each+k)*4093 }
	errc := recvAll(t, rcv, workers*each, func(name string) []byte {
		var w, k int
		fmt.Sscanf(name, "w%d/%d", &w, &k)
		return tensor(w*each+k, size(w, k))
	})
	var wg sync.WaitGroup
	fail := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var inflight []*mptx.Transfer
			for k := range each {
				var b *mptx.Buffer
				var err error
				for {
					if b, err = snd.Alloc(units.Bytes(size(w, k))); !errors.Is(err, mptx.ErrPoolFull) {
						break
					}
					// Full: wait for one of ours, as a KV cache would evict.
					if len(inflight) == 0 {
						time.Sleep(time.Millisecond)
						continue
					}
					inflight[0].Wait(ctx)
					inflight = inflight[1:]
				}
				if err != nil {
					fail <- err
					return
				}
				copy(b.Bytes(), tensor(w*each+k, size(w, k)))
				tr, err := snd.SendBufferAsync(ctx, fmt.Sprintf("w%d/%d", w, k), b, 0)
				if err != nil {
					fail <- err
					return
				}
				b.Free() // released when the transfer ends
				inflight = append(inflight, tr)
			}
			for _, tr := range inflight {
				if err := tr.Wait(ctx); err != nil {
					fail <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	st, _ := snd.PoolStats()
	if st.Live != 0 || st.InUse != 0 || st.Requested != 0 {
		t.Fatalf("after every transfer: PoolStats Live %d InUse %v Requested %v, want all 0", st.Live, st.InUse, st.Requested)
	}
	t.Logf("pool high water %v of %v, %d allocations refused for room", st.HighWater, st.Size, st.Failures)
}

var sinkBuf *mptx.Buffer

// BenchmarkSessionAllocParallel: Session.Alloc and Buffer.Free of 2 MiB
// from GOMAXPROCS goroutines (the pool's mutex, the Buffer and the
// session's map of live Buffers included).
func BenchmarkSessionAllocParallel(b *testing.B) {
	ln, err := mptx.Listen("127.0.0.1:0", mptx.Config{Secret: testSecret})
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if s, err := ln.Accept(context.Background()); err == nil {
			defer s.Close()
			<-s.Done()
		}
	}()
	s, err := mptx.Dial(context.Background(), ln.Addr().String(), mptx.Config{Secret: testSecret, Pool: 256 * units.MiB, SendBuffer: 4 * units.KiB})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			buf, err := s.Alloc(2 * units.MiB)
			if err != nil {
				panic(err)
			}
			sinkBuf = buf
			buf.Free()
		}
	})
}

// BenchmarkSendFromPool: 64 MiB tensors over a 4-path TCP loopback
// session, sent from a pool Buffer (in place) and from ordinary memory
// (copied into the registered send buffer first), side by side; GB/s
// from Send to the receiver's Receipt, CRC32C on both ends included.
func BenchmarkSendFromPool(b *testing.B) {
	for _, size := range []int{4 << 20, 64 << 20} {
		for _, from := range []string{"pool", "unregistered"} {
			b.Run(fmt.Sprintf("%dMiB/%s", size>>20, from), func(b *testing.B) {
				ln, err := mptx.Listen("127.0.0.1:0", mptx.Config{Secret: testSecret, RegionSize: 4 * 64 << 20})
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
				s, err := mptx.Dial(ctx, ln.Addr().String(), mptx.Config{Secret: testSecret, Paths: 4, SendBuffer: 4 * 64 << 20, Pool: 4 * 64 << 20})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				data := tensor(7, size)
				if from == "pool" {
					buf, err := s.Alloc(units.Bytes(size))
					if err != nil {
						b.Fatal(err)
					}
					defer buf.Free()
					copy(buf.Bytes(), data)
					data = buf.Bytes()
				}
				for range 5 { // page faults of the region and the buffers
					if err := s.Send(ctx, "warm-up", data); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(size))
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
}

// BenchmarkStagingCopy is what a send of memory from outside the pool
// costs on top of one from the pool on TCP: the copy into the registered
// send buffer (the CRC32C pass both make is not in it).
func BenchmarkStagingCopy(b *testing.B) {
	for _, size := range []int{4 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			src, dst := tensor(1, size), make([]byte, size)
			copy(dst, src) // fault the pages in
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				copy(dst, src)
			}
		})
	}
}
