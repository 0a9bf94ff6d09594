package mptx_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/units"
)

var testSecret = []byte("0123456789abcdef-test-secret")

// pair starts a listener on loopback, dials it and accepts: a sending and
// a receiving session over TCP.
func pair(t *testing.T, scfg, rcfg mptx.Config) (snd, rcv *mptx.Session) {
	t.Helper()
	if rcfg.Secret == nil {
		rcfg.Secret = testSecret
	}
	if scfg.Secret == nil {
		scfg.Secret = testSecret
	}
	ln, err := mptx.Listen("127.0.0.1:0", rcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type res struct {
		s   *mptx.Session
		err error
	}
	acc := make(chan res, 1)
	go func() {
		s, err := ln.Accept(ctx)
		acc <- res{s, err}
	}()
	snd, err = mptx.Dial(ctx, ln.Addr().String(), scfg)
	if err != nil {
		t.Fatal(err)
	}
	r := <-acc
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { snd.Close(); r.s.Close() })
	if snd.Transport() != mptx.TransportTCP || r.s.Transport() != mptx.TransportTCP {
		t.Fatalf("transports %v / %v, want tcp", snd.Transport(), r.s.Transport())
	}
	return snd, r.s
}

func tensor(id, size int) []byte {
	b := make([]byte, size)
	x := uint32(id)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func TestSessionSendRecv(t *testing.T) {
	snd, rcv := pair(t, mptx.Config{Paths: 3, SendBuffer: 32 * units.MiB}, mptx.Config{RegionSize: 32 * units.MiB})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sizes := []int{1, 4095, 4 << 20, 13<<20 + 7}
	errc := make(chan error, 1)
	go func() {
		for i, n := range sizes {
			if err := snd.Send(ctx, fmt.Sprintf("t%d", i), tensor(i, n)); err != nil {
				errc <- fmt.Errorf("Send %d: %w", i, err)
				return
			}
		}
		errc <- nil
	}()
	for i, n := range sizes {
		tn, err := rcv.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv %d: %v", i, err)
		}
		if tn.Name != fmt.Sprintf("t%d", i) || !bytes.Equal(tn.Data, tensor(i, n)) {
			t.Fatalf("tensor %d: name %q, %d bytes, content equal %v", i, tn.Name, len(tn.Data), bytes.Equal(tn.Data, tensor(i, n)))
		}
		tn.Release()
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestSessionConcurrent: 8 goroutines each keep 8 transfers in flight (64
// at once) on one session; every byte of every tensor is checked.
func TestSessionConcurrent(t *testing.T) {
	const senders, each, size = 8, 8, 256 << 10
	snd, rcv := pair(t, mptx.Config{Paths: 4, SendBuffer: 64 * units.MiB}, mptx.Config{RegionSize: 64 * units.MiB})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, senders)
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var ts []*mptx.Transfer
			for k := 0; k < each; k++ {
				id := g*each + k
				tr, err := snd.SendAsync(ctx, fmt.Sprintf("g%d/%d", g, k), tensor(id, size+id))
				if err != nil {
					errc <- err
					return
				}
				ts = append(ts, tr)
			}
			for _, tr := range ts {
				if err := tr.Wait(ctx); err != nil {
					errc <- fmt.Errorf("%s: %w", tr.Name, err)
					return
				}
				if a, n := tr.Progress(); a != n {
					errc <- fmt.Errorf("%s: progress %v of %v after success", tr.Name, a, n)
				}
			}
		}(g)
	}
	seen := map[string]bool{}
	for i := 0; i < senders*each; i++ {
		tn, err := rcv.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		var g, k int
		if _, err := fmt.Sscanf(tn.Name, "g%d/%d", &g, &k); err != nil {
			t.Fatalf("name %q: %v", tn.Name, err)
		}
		id := g*each + k
		if seen[tn.Name] || !bytes.Equal(tn.Data, tensor(id, size+id)) {
			t.Fatalf("tensor %s: duplicate %v or corrupted", tn.Name, seen[tn.Name])
		}
		seen[tn.Name] = true
		tn.Release()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// TestSessionCancel: a canceled Send fails with the context's error, and
// the receiver never delivers the tensor (it reports a TransferError).
func TestSessionCancel(t *testing.T) {
	snd, rcv := pair(t, mptx.Config{Paths: 2, SendBuffer: 64 * units.MiB, TCP: mptx.TCPConfig{Paths: []mptx.TCPPath{{LineRate: units.Gbps}, {LineRate: units.Gbps}}}},
		mptx.Config{RegionSize: 64 * units.MiB})
	ctx, cancel := context.WithCancelCause(context.Background())
	tr, err := snd.SendAsync(ctx, "big", tensor(1, 48<<20))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	cancel(errors.New("user pressed Ctrl-C"))
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	err = tr.Wait(wctx)
	if err == nil || !strings.Contains(err.Error(), "user pressed Ctrl-C") {
		t.Fatalf("canceled transfer ended with %v, want the cancel cause", err)
	}
	_, err = rcv.Recv(wctx)
	var te *mptx.TransferError
	if !errors.As(err, &te) || te.Name != "big" {
		t.Fatalf("receiver: Recv = %v, want a TransferError for \"big\"", err)
	}
	// The session lives on.
	if err := snd.Send(wctx, "after", tensor(2, 1<<20)); err != nil {
		t.Fatal(err)
	}
	tn, err := rcv.Recv(wctx)
	if err != nil || tn.Name != "after" || !bytes.Equal(tn.Data, tensor(2, 1<<20)) {
		t.Fatalf("after the cancel: %v, %v", tn, err)
	}
}

func TestSessionRefusesTooLarge(t *testing.T) {
	snd, rcv := pair(t, mptx.Config{SendBuffer: 8 * units.MiB}, mptx.Config{RegionSize: 4 * units.MiB})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := snd.Send(ctx, "huge", tensor(1, 5<<20))
	if !errors.Is(err, mptx.ErrRefused) || !strings.Contains(err.Error(), "Config.RegionSize") {
		t.Fatalf("Send larger than the region = %v, want ErrRefused naming Config.RegionSize", err)
	}
	if err := snd.Send(ctx, "small", tensor(2, 3<<20)); err != nil {
		t.Fatal(err)
	}
	if tn, err := rcv.Recv(ctx); err != nil || tn.Name != "small" {
		t.Fatalf("Recv = %v, %v", tn, err)
	}
	// TCP sends from the caller's memory: the send buffer does not bound
	// a tensor, the receiver's region does.
	if err := snd.Send(ctx, "larger than the send buffer", tensor(3, 9<<20)); !errors.Is(err, mptx.ErrRefused) || !strings.Contains(err.Error(), "Config.RegionSize") {
		t.Fatalf("Send larger than the send buffer and the region = %v, want ErrRefused naming Config.RegionSize", err)
	}
}

func TestSessionWrongSecret(t *testing.T) {
	ln, err := mptx.Listen("127.0.0.1:0", mptx.Config{Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = mptx.Dial(ctx, ln.Addr().String(), mptx.Config{Secret: []byte("another secret of 24 B..")})
	if err == nil {
		t.Fatal("Dial with a wrong secret succeeded")
	}
	t.Logf("wrong secret: %v", err)
}

// TestSessionCloseFailsTransfers: closing the receiving end fails the
// sender's transfers in flight with a clear error.
func TestSessionCloseFailsTransfers(t *testing.T) {
	snd, rcv := pair(t, mptx.Config{Paths: 2, SendBuffer: 64 * units.MiB, TCP: mptx.TCPConfig{Paths: []mptx.TCPPath{{LineRate: units.Gbps}, {LineRate: units.Gbps}}}},
		mptx.Config{RegionSize: 64 * units.MiB})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr, err := snd.SendAsync(ctx, "x", tensor(1, 48<<20))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	rcv.Close()
	if err := tr.Wait(ctx); err == nil || !errors.Is(err, mptx.ErrSessionClosed) {
		t.Fatalf("transfer after the peer closed: %v, want ErrSessionClosed", err)
	}
	if _, err := snd.SendAsync(ctx, "y", tensor(2, 10)); err == nil {
		t.Fatal("SendAsync on an ended session succeeded")
	}
}

// TestSessionSlowloris: peers that connect to a session listener and say
// nothing (32 of them, from another source address) cannot keep a real
// sender out: its Dial succeeds at once, long before their handshakes
// time out.
func TestSessionSlowloris(t *testing.T) {
	ln, err := mptx.Listen("127.0.0.1:0", mptx.Config{Secret: testSecret, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var idle []net.Conn
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	for range 32 {
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		if s, err := ln.Accept(ctx); err == nil {
			defer s.Close()
			s.Recv(ctx)
		}
	}()
	s, err := mptx.Dial(ctx, ln.Addr().String(), mptx.Config{Secret: testSecret, Paths: 2})
	if err != nil {
		t.Fatalf("Dial behind 32 silent peers: %v", err)
	}
	defer s.Close()
	if err := s.Send(ctx, "x", tensor(1, 1<<20)); err != nil {
		t.Fatal(err)
	}
}
