//go:build linux && cgo

package verbs

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// Hostile peers against real verbs (issue 14); `make rxe-test` runs them
// on Soft-RoCE.

// hosts opens a sender and a receiver host on the VM's first wire.
func hosts(t *testing.T, e vmEnv) (sh, rh *Host) {
	t.Helper()
	sh, err := OpenHost(HostConfig{Devices: e.sender[:1], PoolSize: 16 * units.MiB})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	rh, err = OpenHost(HostConfig{Devices: e.receiver[:1], PoolSize: 16 * units.MiB})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rh.Close() })
	return sh, rh
}

// acceptAsync runs ln.Accept(ctx) on a goroutine.
func acceptAsync(ctx context.Context, ln *Listener) <-chan acceptResult {
	ch := make(chan acceptResult, 1)
	go func() {
		r, err := ln.Accept(ctx)
		ch <- acceptResult{r, err}
	}()
	return ch
}

type acceptResult struct {
	r   *Receiver
	err error
}

// TestVMSlowlorisCannotBlockAccept: a peer opens a TCP connection to the
// listener and sends nothing. A sender that knows the secret, dialing
// after it, is still accepted: peers authenticate concurrently. (Before,
// Accept authenticated one connection at a time, each with the whole
// context as its deadline: the idle connection held it until ctx ended.)
func TestVMSlowlorisCannotBlockAccept(t *testing.T) {
	e := needVM(t)
	sh, rh := hosts(t, e)
	ln, err := rh.Listen("127.0.0.1:0", ListenConfig{Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for i := 0; i < 3; i++ {
		idle, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer idle.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	accepted := acceptAsync(ctx, ln)
	send, err := sh.Alloc(units.MiB)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sh.Dial(ctx, ln.Addr().String(), DialConfig{Secret: testSecret, Send: send, RTTProbes: -1})
	if err != nil {
		t.Fatalf("Dial behind idle connections: %v", err)
	}
	defer c.Close()
	a := <-accepted
	if a.err != nil {
		t.Fatalf("Accept behind idle connections: %v", a.err)
	}
	a.r.Close()
}

// TestVMSilentSenderDropped: a sender that authenticates and offers, then
// never sends Ready, is dropped after HandshakeTimeout (OnReject says so)
// and the next sender is accepted. (Before, Accept waited for that Ready
// for ever.)
func TestVMSilentSenderDropped(t *testing.T) {
	e := needVM(t)
	sh, rh := hosts(t, e)
	var mu sync.Mutex
	var rejects []error
	ln, err := rh.Listen("127.0.0.1:0", ListenConfig{Secret: testSecret, HandshakeTimeout: 2 * time.Second,
		OnReject: func(_ net.Addr, err error) {
			mu.Lock()
			rejects = append(rejects, err)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	release := make(chan struct{})
	var once sync.Once
	testBeforeReady = func() { once.Do(func() { <-release }) }
	defer func() { testBeforeReady = nil }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	accepted := acceptAsync(ctx, ln)
	send, err := sh.Alloc(units.MiB)
	if err != nil {
		t.Fatal(err)
	}
	silent := make(chan error, 1)
	go func() {
		c, err := sh.Dial(ctx, ln.Addr().String(), DialConfig{Secret: testSecret, Send: send, RTTProbes: -1})
		if err == nil {
			c.Close()
		}
		silent <- err
	}()
	for {
		mu.Lock()
		n := len(rejects)
		mu.Unlock()
		if n > 0 {
			break
		}
		select {
		case a := <-accepted:
			t.Fatalf("Accept returned %v, %v while the sender was silent; want it to drop the sender and keep waiting", a.r, a.err)
		case <-ctx.Done():
			t.Fatal("the silent sender was never dropped")
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !strings.Contains(rejects[0].Error(), "Ready") {
		t.Errorf("OnReject(silent sender) = %v; want it to name the missing Ready", rejects[0])
	}
	// Its Dial may even return: Ready is its last word, and it meets the
	// receiver's Abort at its next exchange.
	close(release)
	<-silent
	c, err := sh.Dial(ctx, ln.Addr().String(), DialConfig{Secret: testSecret, Send: send, RTTProbes: -1})
	if err != nil {
		t.Fatalf("Dial after the silent sender: %v", err)
	}
	defer c.Close()
	a := <-accepted
	if a.err != nil {
		t.Fatalf("Accept after the silent sender: %v", a.err)
	}
	a.r.Close()
}

// TestVMRkeyScopedToConnection: two senders connect to one receiver host
// (on rxe the region is exposed through an MR, AccessMR). Sender B aims a
// WRITE at connection A's region with A's address and rkey, through its
// own queue pair: it fails with a remote access error and A's region is
// unchanged, because each connection's MR lives in its own protection
// domain. (Before, every connection's MR was in the NIC's host-wide PD and
// the write landed.)
func TestVMRkeyScopedToConnection(t *testing.T) {
	e := needVM(t)
	sh, rh := hosts(t, e)
	ln, err := rh.Listen("127.0.0.1:0", ListenConfig{Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var conns [2]*Conn
	var recvs [2]*Receiver
	for i := range conns {
		accepted := acceptAsync(ctx, ln)
		send, err := sh.Alloc(64 << 10)
		if err != nil {
			t.Fatal(err)
		}
		for k := range send.Bytes() {
			send.Bytes()[k] = byte(0x11 * (i + 1))
		}
		c, err := sh.Dial(ctx, ln.Addr().String(), DialConfig{Secret: testSecret, Send: send, RTTProbes: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		a := <-accepted
		if a.err != nil {
			t.Fatal(a.err)
		}
		defer a.r.Close()
		conns[i], recvs[i] = c, a.r
	}
	a, b := recvs[0], recvs[1]
	t.Logf("access %v; connection A: region %#x rkey %#x; connection B: rkey %#x", a.Access(), a.regionAddr(), a.Rkey(0), b.Rkey(0))
	regionA := a.Region()
	for k := range regionA {
		regionA[k] = 0x5A
	}
	// B writes through its own QP with A's address and key.
	conns[1].aim(0, a.regionAddr(), a.Rkey(0))
	if n, err := conns[1].post(0, []qp.SendWR{{ID: 1, Op: qp.OpWrite, Len: 4096}}, false); n != 1 || err != nil {
		t.Fatalf("post = %d, %v", n, err)
	}
	if c := waitSend(t, conns[1], 1)[0]; c.Status != qp.StatusRemoteAccess {
		t.Errorf("connection B's write with connection A's rkey completed %v; want %v", c.Status, qp.StatusRemoteAccess)
	}
	for k, v := range regionA {
		if v != 0x5A {
			t.Fatalf("connection A's region changed at byte %d (%#x): another connection's QP wrote it with A's rkey", k, v)
		}
	}
	// A's own key still works on A's own QP.
	if n, err := conns[0].PostSend(0, []qp.SendWR{{ID: 2, Op: qp.OpWriteImm, Len: 4096, Imm: 7}}); n != 1 || err != nil {
		t.Fatalf("PostSend = %d, %v", n, err)
	}
	if c := waitSend(t, conns[0], 1)[0]; c.Status != qp.StatusOK {
		t.Fatalf("connection A's own write completed %v", c.Status)
	}
	waitRecv(t, a, 1)
	if regionA[0] != 0x11 {
		t.Fatalf("connection A's own write did not land: byte 0 is %#x, want 0x11", regionA[0])
	}
}

// TestVMResetKeepsOneWindowPerPath: with memory windows, each path reset
// binds a new window for the path; the old one is freed at once rather
// than piling up until Revoke.
func TestVMResetKeepsOneWindowPerPath(t *testing.T) {
	e := needVM(t)
	allowUnconfinedWindows = true // rxe's windows bind (see windowsConfine)
	defer func() { allowUnconfinedWindows = false }()
	p := newPair(t, e, pairOpts{qpsPerNIC: 1, size: units.MiB, access: AccessMemoryWindow})
	windows := func() int {
		n := 0
		for _, l := range liveObjects() {
			if l.Kind == "MW" {
				n++
			}
		}
		return n
	}
	paths := len(p.conn.Paths())
	if got := windows(); got != paths {
		t.Fatalf("%d windows after the handshake, want %d (one per path)", got, paths)
	}
	for round := 0; round < 3; round++ {
		if err := p.conn.breakPath(0); err != nil {
			t.Fatal(err)
		}
		if err := p.conn.Reset(0); err != nil {
			t.Fatalf("Reset(0), round %d: %v", round, err)
		}
		if got := windows(); got != paths {
			t.Fatalf("%d windows after %d resets, want %d (one per path)", got, round+1, paths)
		}
	}
	roundTrip(t, p, len(e.sender))
	if err := p.recv.Revoke(); err != nil {
		t.Fatal(err)
	}
	if got := windows(); got != 0 {
		t.Fatalf("%d windows after Revoke, want 0", got)
	}
}
