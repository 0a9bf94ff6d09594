package mptx_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/units"
)

// TestSessionPullOverTCP: one-sided access over real sessions on loopback
// TCP (qp/tcp's READ request and response frames): the acceptor exposes
// memory and sends its descriptor, the dialer reads it into plain memory
// (registered for the transfer: no staging) and into a pool Buffer, and
// writes into a writable exposure; a forged descriptor fails with
// ErrRemoteAccess and reads nothing past the exposure.
func TestSessionPullOverTCP(t *testing.T) {
	secret := []byte("0123456789abcdef-pull-over-tcp!")
	ln, err := mptx.Listen("127.0.0.1:0", mptx.Config{Secret: secret, Transport: mptx.TransportTCP, RegionSize: units.MiB})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	accepted := make(chan *mptx.Session, 1)
	go func() {
		s, err := ln.Accept(ctx)
		if err != nil {
			t.Error(err)
		}
		accepted <- s
	}()
	dialer, err := mptx.Dial(ctx, ln.Addr().String(), mptx.Config{Secret: secret, Transport: mptx.TransportTCP, Paths: 3, SendBuffer: 8 * units.MiB, Pool: 32 * units.MiB})
	if err != nil {
		t.Fatal(err)
	}
	defer dialer.Close()
	acceptor := <-accepted
	if acceptor == nil {
		t.FailNow()
	}
	defer acceptor.Close()

	const size = 24 * units.MiB
	backing := make([]byte, size+2*units.MiB)
	pattern(backing, 42)
	want := append([]byte(nil), backing...)
	reg, err := acceptor.Register(backing[units.MiB : units.MiB+size])
	if err != nil {
		t.Fatal(err)
	}
	rd, err := reg.Expose(0, size/2, mptx.AccessRead)
	if err != nil {
		t.Fatal(err)
	}
	wr, err := reg.Expose(size/2, size/2, mptx.AccessWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := acceptor.SendDescriptor(ctx, "rd", rd); err != nil {
		t.Fatal(err)
	}
	if _, got, err := dialer.RecvDescriptor(ctx); err != nil || !got.Equal(rd) {
		t.Fatalf("RecvDescriptor = %v, %v; want %v", got, err, rd)
	}

	plain := make([]byte, size/2)
	op, err := dialer.ReadAsync(ctx, []mptx.Pair{{Local: plain, Remote: rd}})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain, want[units.MiB:units.MiB+size/2]) {
		t.Fatalf("the pull over TCP differs")
	}
	st := op.Stats()
	used := 0
	for _, b := range st.PathBytes {
		if b > 0 {
			used++
		}
	}
	if st.Staged != 0 || used < 2 {
		t.Errorf("Stats %+v: want nothing staged (qp/tcp registers the memory) and several paths used", st)
	}
	buf, err := dialer.Alloc(size / 2)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	if err := dialer.Read(ctx, []mptx.Pair{{Local: buf.Bytes(), Remote: rd}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), plain) {
		t.Fatalf("the pull into a pool Buffer differs")
	}
	src := make([]byte, size/2)
	pattern(src, 43)
	if err := dialer.Write(ctx, []mptx.Pair{{Local: src, Remote: wr}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(backing[units.MiB+size/2:units.MiB+size], src) {
		t.Fatalf("the write over TCP did not land")
	}
	copy(want[units.MiB+size/2:], src)

	forged := rd
	forged.Len = size/2 + units.MiB // into the writable half and past the region's end... of the read exposure
	canary := make([]byte, forged.Len)
	pattern(canary, 44)
	got := append([]byte(nil), canary...)
	if err := dialer.Read(ctx, []mptx.Pair{{Local: got, Remote: forged}}); !errors.Is(err, mptx.ErrRemoteAccess) {
		t.Fatalf("Read past the exposure = %v; want ErrRemoteAccess", err)
	}
	if !bytes.Equal(got[size/2:], canary[size/2:]) {
		t.Errorf("bytes past the exposure reached the dialer")
	}
	if !bytes.Equal(backing, want) {
		t.Errorf("the acceptor's memory changed outside the write (guard bytes included)")
	}
	t.Logf("pull over TCP: %v over %d paths (%v by path), nothing staged; write landed; forged read refused", size/2, used, st.PathBytes)
}
