package mptx

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
)

// TestFusedSenderSum: over TCP with the defaults, a tensor sent from the
// caller's memory gets its CRC32C from qp/tcp's writers, every chunk's
// from the write that carried it (none is checksummed from memory), over
// one path and over several; the receiver checks it against what landed
// and delivers the bytes. With segments smaller than the chunks no write
// carries a whole chunk, so the session checksums on the caller's
// goroutine as before, and the tensor arrives checked all the same.
func TestFusedSenderSum(t *testing.T) {
	var fromMemory atomic.Int64
	testHookSumFromMemory = func(int) { fromMemory.Add(1) }
	defer func() { testHookSumFromMemory = nil }()
	secret := []byte("fused sender sum test: 32 bytes!")
	for _, c := range []struct {
		name  string
		paths int
		seg   units.Bytes
	}{{"paths=1", 1, 0}, {"paths=3", 3, 0}, {"segments", 2, 256 * units.KiB}} {
		t.Run(c.name, func(t *testing.T) {
			fromMemory.Store(0)
			ln, err := Listen("127.0.0.1:0", Config{Secret: secret, RegionSize: 64 * units.MiB})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			acc := make(chan *Session, 1)
			go func() {
				s, err := ln.Accept(ctx)
				if err != nil {
					t.Error(err)
				}
				acc <- s
			}()
			cfg := Config{Secret: secret, Paths: c.paths}
			cfg.Engine.Segment = c.seg
			snd, err := Dial(ctx, ln.Addr().String(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer snd.Close()
			rcv := <-acc
			if rcv == nil {
				t.FailNow()
			}
			defer rcv.Close()
			for i, size := range []int{1, 3<<20 + 12345, 16 << 20} {
				data := make([]byte, size)
				for k := range data {
					data[k] = byte(k*7 + i)
				}
				if err := snd.Send(ctx, "t", data); err != nil {
					t.Fatalf("Send of %d bytes: %v", size, err)
				}
				tn, err := rcv.Recv(ctx)
				if err != nil || !bytes.Equal(tn.Data, data) {
					t.Fatalf("Recv of %d bytes: %v (data equal %v)", size, err, err == nil && bytes.Equal(tn.Data, data))
				}
				tn.Release()
			}
			if n := fromMemory.Load(); n != 0 {
				t.Errorf("%d chunks checksummed from memory, want every chunk's sum from its write", n)
			}
			if fused := snd.snd.sumc != nil; fused != (c.seg == 0) {
				t.Errorf("writers' sums used: %v, want %v (segment %v)", fused, c.seg == 0, c.seg)
			}
		})
	}
}
