package tcp_test

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/qp/tcp/internal/leak"
	"github.com/mptx-dev/mptx/units"
)

// Hostile peers: what a peer without the secret, or one with it that
// misbehaves, can do to the other end (issue 14).

// authKey is the HMAC key both ends derive from secret, as the package
// doc's Handshake section says: HKDF-SHA256 (RFC 5869) with salt
// "mptx-tcp/2" and info "handshake tags", 32 bytes.
func authKey(secret []byte) []byte {
	k, err := hkdf.Key(sha256.New, secret, []byte("mptx-tcp/2"), "handshake tags", 32)
	if err != nil {
		panic(err)
	}
	return k
}

// serverProof is step 4's message for one path: accept byte ‖ region ‖ QPN
// ‖ HMAC(key, "mptx-tcp/2 server" ‖ nonceC ‖ nonceS ‖ id ‖ index ‖ count ‖
// region ‖ QPN), following the package doc's byte layout.
func serverProof(key, nonceS, nonceC, id []byte, index, count uint16, region uint64, qpn uint32) []byte {
	var rest [16]byte
	binary.BigEndian.PutUint16(rest[0:], index)
	binary.BigEndian.PutUint16(rest[2:], count)
	binary.BigEndian.PutUint64(rest[4:], region)
	binary.BigEndian.PutUint32(rest[12:], qpn)
	m := hmac.New(sha256.New, key)
	m.Write([]byte("mptx-tcp/2 server"))
	m.Write(nonceC)
	m.Write(nonceS)
	m.Write(id)
	m.Write(rest[:])
	out := []byte{0xA5}
	out = binary.BigEndian.AppendUint64(out, region)
	out = binary.BigEndian.AppendUint32(out, qpn)
	return append(out, m.Sum(nil)...)
}

// TestHugeRegionRefused: a receiver that knows the secret advertises a
// region of 2^64-1 bytes. Dial refuses it with ErrProtocol instead of
// returning a Conn whose RegionSize is negative.
func TestHugeRegionRefused(t *testing.T) {
	leak.Check(t)
	for _, region := range []uint64{1<<64 - 1, 1 << 63} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
			nonceS := make([]byte, 32)
			nc.Write(append([]byte("MPTT\x00\x02"), nonceS...))
			buf := make([]byte, 84)
			if _, err := io.ReadFull(nc, buf); err != nil {
				return
			}
			nonceC, id := buf[:32], buf[32:48]
			idx, cnt := binary.BigEndian.Uint16(buf[48:]), binary.BigEndian.Uint16(buf[50:])
			nc.Write(serverProof(authKey(secret), nonceS, nonceC, id, idx, cnt, region, 0x100))
			io.Copy(io.Discard, nc)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := tcp.Dial(ctx, l.Addr().String(), tcp.DialConfig{Secret: secret, Paths: make([]tcp.PathConfig, 1)})
		cancel()
		if err == nil {
			t.Errorf("Dial to a receiver advertising a %d-byte region succeeded (RegionSize() = %d); want ErrProtocol", region, c.RegionSize())
			c.Close()
			continue
		}
		if !errors.Is(err, tcp.ErrProtocol) {
			t.Errorf("Dial to a receiver advertising a %d-byte region: %v; want ErrProtocol", region, err)
		}
	}
}

// TestPausedReceiverStallsSender: the receiver's driver stops polling for
// 2 s, eight times the paths' retry timeout, while the sender has 64 MiB of
// WRITE WITH IMM outstanding on one path and the receive queue holds 4
// completions. As with RNR on an RC queue pair, the sender stalls (its
// work requests stay outstanding) and its path survives: once the receiver
// polls again every write completes with StatusOK, every immediate arrives
// in order and the region holds the sent bytes.
func TestPausedReceiverStallsSender(t *testing.T) {
	leak.Check(t)
	const n, size = 64, units.MiB
	p := newPair(t, n*size, pairOpts{paths: make([]tcp.PathConfig, 1), maxWR: n, recvQueue: 4, retry: 250 * time.Millisecond})
	fill(p.send, 3)
	w := newWaiter(t, p)
	wrs := make([]qp.SendWR, n)
	for i := range wrs {
		wrs[i] = qp.SendWR{ID: uint64(i + 1), Op: qp.OpWriteImm, Local: units.Bytes(i) * size, Remote: units.Bytes(i) * size, Len: size, Imm: uint32(i)}
	}
	w.post(0, wrs...)
	// The receiver does not poll; the sender's completions are collected
	// meanwhile, so a failing path would show up as error statuses.
	pause := time.Now().Add(2 * time.Second)
	for time.Now().Before(pause) {
		k, err := p.conn.Poll(w.buf)
		if err != nil {
			t.Fatal(err)
		}
		w.send = append(w.send, w.buf[:k]...)
		time.Sleep(10 * time.Millisecond)
	}
	if len(w.send) > 4 {
		t.Errorf("%d writes completed at the sender while the receiver held 4 completions and polled none; want at most 4 (RNR-like back-pressure)", len(w.send))
	}
	w.until("every completion", func() bool { return len(w.send) == n && len(w.recv) == n })
	for i, c := range w.send {
		if c.Status != qp.StatusOK {
			t.Fatalf("send completion %d (WR %d) = %v after the receiver paused; want ok (statuses %v)", i, c.ID, c.Status, w.sendStatuses())
		}
	}
	for i, c := range w.recv {
		if c.Imm != uint32(i) || c.Bytes != size {
			t.Fatalf("receive completion %d: imm %d, %d bytes; want imm %d, %d bytes", i, c.Imm, c.Bytes, i, size)
		}
	}
	if !bytes.Equal(p.recv.Region(), p.send) {
		t.Error("the receive region differs from the sent bytes")
	}
}

// TestNAKWaitsForHeldCompletions: five writes land while the receive queue
// (2 entries) is full, then a write outside the region. The NAK, which
// acknowledges every earlier write, waits until the driver has polled
// their completions: the sender first sees only what fitted, and after the
// receiver polls, five successes and the remote access error.
func TestNAKWaitsForHeldCompletions(t *testing.T) {
	leak.Check(t)
	const size = 4096
	p := newPair(t, 8*size, pairOpts{paths: make([]tcp.PathConfig, 1), maxWR: 16, recvQueue: 2})
	w := newWaiter(t, p)
	for i := 0; i < 5; i++ {
		w.post(0, qp.SendWR{ID: uint64(i + 1), Op: qp.OpWriteImm, Local: units.Bytes(i) * size, Remote: units.Bytes(i) * size, Len: size, Imm: uint32(i)})
	}
	w.post(0, qp.SendWR{ID: 6, Op: qp.OpWriteImm, Local: 0, Remote: 8 * size, Len: 1, Imm: 99})
	deadline := time.Now().Add(10 * time.Second)
	for p.recv.PathBytes(0) < 5*size {
		if time.Now().After(deadline) {
			t.Fatalf("the receiver applied %d bytes, want %d", p.recv.PathBytes(0), 5*size)
		}
		time.Sleep(time.Millisecond)
	}
	for {
		k, err := p.conn.Poll(w.buf)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			break
		}
		w.send = append(w.send, w.buf[:k]...)
	}
	if len(w.send) > 2 {
		t.Errorf("the sender completed %v before the receiver polled; want at most the 2 writes whose completions were queued", w.sendStatuses())
	}
	w.until("every completion", func() bool { return len(w.send) == 6 && len(w.recv) == 5 })
	want := []qp.Status{qp.StatusOK, qp.StatusOK, qp.StatusOK, qp.StatusOK, qp.StatusOK, qp.StatusRemoteAccess}
	if got := w.sendStatuses(); !slices.Equal(got, want) {
		t.Errorf("send statuses %v, want %v", got, want)
	}
	for i, c := range w.recv {
		if c.Imm != uint32(i) {
			t.Errorf("receive completion %d has imm %d, want %d", i, c.Imm, i)
		}
	}
}

// idle opens n TCP connections to addr from the loopback source address
// src and leaves them idle: a peer that never sends its proof. It waits
// until the listener has sent its hello on each (it is then holding the
// connection) or closed it, and returns how many the listener holds.
func idle(t *testing.T, addr string, src netip.Addr, n int) int {
	t.Helper()
	held := 0
	for i := 0; i < n; i++ {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		hello := make([]byte, 38)
		if _, err := io.ReadFull(nc, hello); err == nil {
			held++
		}
	}
	return held
}

// TestIdleConnectionsCannotLockOut: peers without the secret open idle
// connections until the listener holds MaxPending (8) of them, or as many
// as their source may hold. A sender that knows the secret still connects
// at once: a source may hold only MaxPendingPerSource unauthenticated
// connections, and when the listener is full a newcomer evicts an
// unauthenticated connection of the source that holds the most.
func TestIdleConnectionsCannotLockOut(t *testing.T) {
	cases := []struct {
		name      string
		sources   int
		perSource int // ListenConfig.MaxPendingPerSource
		wantHeld  int // idle connections the listener keeps, -1: not checked
	}{
		{"one source, per-source cap", 1, 4, 4},
		{"one source fills the listener", 1, 8, 8},
		{"four sources fill the listener", 4, 0, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leak.Check(t)
			ln, err := tcp.Listen("127.0.0.1:0", tcp.ListenConfig{Secret: secret, MaxPending: 8, MaxPendingPerSource: tc.perSource})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			held := 0
			for s := 0; s < tc.sources; s++ {
				held += idle(t, ln.Addr().String(), netip.AddrFrom4([4]byte{127, 0, 0, byte(2 + s)}), 8/tc.sources+1)
			}
			if tc.wantHeld >= 0 && held != tc.wantHeld {
				t.Errorf("the listener took %d idle connections from one source; want %d", held, tc.wantHeld)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			accepted := make(chan error, 1)
			go func() {
				r, err := ln.Accept(ctx, make([]byte, 64))
				if err == nil {
					r.Close()
				}
				accepted <- err
			}()
			local := netip.MustParseAddr("127.0.0.1")
			c, err := tcp.Dial(ctx, ln.Addr().String(), tcp.DialConfig{Secret: secret, Paths: []tcp.PathConfig{{Local: local}, {Local: local}}})
			if err != nil {
				t.Fatalf("Dial while peers hold idle connections: %v", err)
			}
			c.Close()
			if err := <-accepted; err != nil {
				t.Fatalf("Accept: %v", err)
			}
		})
	}
}
