package mptx

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSessionChecksumMismatchInTransit: a tensor whose bytes do not match the
// sender's CRC32C is an error at both ends, not data.
func TestSessionChecksumMismatchInTransit(t *testing.T) {
	secret := []byte("0123456789abcdef-test-secret")
	testHookReceived = func(data []byte) {
		if len(data) > 1000 && string(data[:4]) == "BAD!" {
			data[1000] ^= 0x40 // a bit flipped after the fence: the check must catch it
		}
	}
	defer func() { testHookReceived = nil }()
	ln, err := Listen("127.0.0.1:0", Config{Secret: secret, RegionSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rerr := make(chan error, 2)
	go func() {
		s, err := ln.Accept(ctx)
		if err != nil {
			rerr <- err
			return
		}
		defer s.Close()
		for range 2 {
			tn, err := s.Recv(ctx)
			if err == nil {
				tn.Release()
			}
			rerr <- err
		}
	}()
	s, err := Dial(ctx, ln.Addr().String(), Config{Secret: secret, SendBuffer: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bad := make([]byte, 2<<20)
	copy(bad, "BAD!")
	err = s.Send(ctx, "bad", bad)
	if err == nil || !strings.Contains(err.Error(), "CRC32C") {
		t.Fatalf("Send of a tensor corrupted on arrival = %v, want a CRC32C error", err)
	}
	var te *TransferError
	if err := <-rerr; !errors.As(err, &te) || te.Name != "bad" || !strings.Contains(err.Error(), "CRC32C") {
		t.Fatalf("receiver: %v, want a TransferError naming the CRC32C", err)
	}
	if err := s.Send(ctx, "good", make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	if err := <-rerr; err != nil {
		t.Fatal(err)
	}
}

// TestRegionPooled: a receiving session's region goes back to the pool
// once the session ended and its tensors were released, and the next
// session of the same size gets it; a tensor still held keeps it out.
func TestRegionPooled(t *testing.T) {
	secret := []byte("0123456789abcdef-test-secret")
	const size = 8<<20 + 4096 // a size no other test uses
	ln, err := Listen("127.0.0.1:0", Config{Secret: secret, RegionSize: size})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	session := func(release bool) *byte {
		t.Helper()
		acc := make(chan *Session, 1)
		go func() {
			s, err := ln.Accept(ctx)
			if err != nil {
				t.Error(err)
			}
			acc <- s
		}()
		snd, err := Dial(ctx, ln.Addr().String(), Config{Secret: secret, SendBuffer: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if err := snd.Send(ctx, "x", make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
		rcv := <-acc
		tn, err := rcv.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if release {
			tn.Release()
		}
		snd.Close()
		rcv.Close()
		<-rcv.rcv.exited
		return &rcv.rcv.region[0]
	}
	held := session(false)
	if r := getRegion(size); r != nil {
		t.Fatal("a region whose tensor is still held was pooled")
	}
	first := session(true)
	second := session(true)
	if first == held || second != first {
		t.Fatalf("regions %p, %p, %p: want the released one reused", held, first, second)
	}
}
