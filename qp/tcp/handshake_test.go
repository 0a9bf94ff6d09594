package tcp_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/qp/tcp/internal/leak"
)

func TestWrongSecretRejected(t *testing.T) {
	leak.Check(t)
	ln, err := tcp.Listen("127.0.0.1:0", tcp.ListenConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wrong := []byte("an entirely different secret!!!")
	c, err := tcp.Dial(ctx, ln.Addr().String(), tcp.DialConfig{Secret: wrong, Paths: make([]tcp.PathConfig, 2)})
	if err == nil {
		c.Close()
		t.Fatal("Dial with the wrong secret succeeded")
	}
	if !errors.Is(err, tcp.ErrAuth) {
		t.Errorf("Dial with the wrong secret: %v; want ErrAuth", err)
	}
	// Nothing reached Accept.
	actx, acancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer acancel()
	if r, err := ln.Accept(actx, make([]byte, 4096)); err == nil {
		r.Close()
		t.Error("Accept returned a connection whose sender had the wrong secret")
	}
}

// TestImpostorLearnsNothing speaks the protocol by hand without the
// secret: the listener answers the bad proof with one reject byte and
// closes; it never reveals the region size.
func TestImpostorLearnsNothing(t *testing.T) {
	leak.Check(t)
	ln, err := tcp.Listen("127.0.0.1:0", tcp.ListenConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	hello := make([]byte, 38)
	if _, err := io.ReadFull(nc, hello); err != nil {
		t.Fatal(err)
	}
	if string(hello[:4]) != "MPTT" {
		t.Fatalf("hello starts with %q, want MPTT", hello[:4])
	}
	proof := make([]byte, 84)
	proof[81] = 1 // path count 1
	if _, err := nc.Write(proof); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(nc)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatal(err)
	}
	if !bytes.Equal(rest, []byte{0x5a}) {
		t.Errorf("after a bad proof the listener sent %x; want only the reject byte 5a, then EOF", rest)
	}
}

// TestImpostorReceiver: a receiver without the secret cannot get data: the
// sender checks the receiver's proof before it sends anything.
func TestImpostorReceiver(t *testing.T) {
	leak.Check(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan []byte, 1)
	go func() {
		nc, err := l.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer nc.Close()
		hello := append([]byte("MPTT\x00\x02"), make([]byte, 32)...)
		nc.Write(hello)
		buf := make([]byte, 84)
		io.ReadFull(nc, buf)
		nc.Write(append([]byte{0xa5}, make([]byte, 44)...)) // accept with a forged proof
		rest, _ := io.ReadAll(nc)
		got <- rest
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tcp.Dial(ctx, l.Addr().String(), tcp.DialConfig{Secret: secret, Paths: make([]tcp.PathConfig, 1)})
	if err == nil {
		c.Close()
		t.Fatal("Dial accepted a receiver that does not know the secret")
	}
	if !errors.Is(err, tcp.ErrAuth) {
		t.Errorf("Dial to an impostor: %v; want ErrAuth", err)
	}
	if rest := <-got; len(rest) != 0 {
		t.Errorf("the impostor received %d more bytes after its forged proof; want none", len(rest))
	}
}

// TestHalfOpenExpires authenticates path 0 of a two-path connection by
// hand, following the package doc's byte layout, and never opens path 1:
// the listener drops the parked path after its handshake timeout.
func TestHalfOpenExpires(t *testing.T) {
	leak.Check(t)
	ln, err := tcp.Listen("127.0.0.1:0", tcp.ListenConfig{Secret: secret, HandshakeTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	hello := make([]byte, 38)
	if _, err := io.ReadFull(nc, hello); err != nil {
		t.Fatal(err)
	}
	nonceS := hello[6:]
	nonceC := bytes.Repeat([]byte{7}, 32)
	id := bytes.Repeat([]byte{9}, 16)
	indexCount := []byte{0, 0, 0, 2} // path 0 of 2
	m := hmac.New(sha256.New, authKey(secret))
	m.Write([]byte("mptx-tcp/2 client"))
	m.Write(nonceS)
	m.Write(nonceC)
	m.Write(id)
	m.Write(indexCount)
	proof := slices.Concat(nonceC, id, indexCount, m.Sum(nil))
	if _, err := nc.Write(proof); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(nc) // blocks until the listener gives up on path 1
	if err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("reading after a valid proof: %v; want EOF when the listener expires the connection", err)
	}
	if len(rest) != 0 {
		t.Errorf("the listener sent %x to a connection that never completed; want nothing", rest)
	}
}

func TestDialWaitsForAccept(t *testing.T) {
	leak.Check(t)
	ln, err := tcp.Listen("127.0.0.1:0", tcp.ListenConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = tcp.Dial(ctx, ln.Addr().String(), tcp.DialConfig{Secret: secret, Paths: make([]tcp.PathConfig, 2)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial with nobody accepting: %v; want context.DeadlineExceeded", err)
	}
}
