package mptx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/units"
)

// TestSessionStats: after a tensor, the sender's snapshot has one entry per
// path whose acknowledged bytes add up to at least the tensor (retries
// count again), every path up; the receiver's counts the tensor's chunks.
// Once the session is closed, Stats says so.
func TestSessionStats(t *testing.T) {
	const paths = 3
	snd, rcv := pair(t, mptx.Config{Paths: paths, SendBuffer: 16 * units.MiB}, mptx.Config{RegionSize: 16 * units.MiB})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const size = 12 << 20
	errc := make(chan error, 1)
	go func() { errc <- snd.Send(ctx, "stats", tensor(7, size)) }()
	tn, err := rcv.Recv(ctx)
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	tn.Release()
	if err := <-errc; err != nil {
		t.Fatalf("Send: %v", err)
	}
	st, err := snd.Stats(ctx)
	if err != nil {
		t.Fatalf("sender Stats: %v", err)
	}
	if st.Transport != mptx.TransportTCP || len(st.Paths) != paths {
		t.Fatalf("sender Stats = transport %v, %d paths; want tcp, %d", st.Transport, len(st.Paths), paths)
	}
	var total units.Bytes
	for i, p := range st.Paths {
		total += p.Engine.Bytes
		if p.Engine.State.String() != "up" || p.Err != "" {
			t.Errorf("path %d: state %v, error %q; want up, none", i, p.Engine.State, p.Err)
		}
	}
	if total < size {
		t.Errorf("paths acknowledged %v in all, want at least the tensor's %v", total, units.Bytes(size))
	}
	rst, err := rcv.Stats(ctx)
	if err != nil {
		t.Fatalf("receiver Stats: %v", err)
	}
	if len(rst.Paths) != paths || rst.Receiver.Chunks == 0 {
		t.Errorf("receiver Stats = %d paths, %d chunks; want %d paths and the tensor's chunks", len(rst.Paths), rst.Receiver.Chunks, paths)
	}
	snd.Close()
	// The reason recorded may be ErrSessionClosed or the control
	// channel's EOF: Close sends Bye before it records its reason, and
	// the peer's answer can win (see Session.Close).
	if _, err := snd.Stats(ctx); err == nil || !errors.Is(err, snd.Err()) {
		t.Errorf("Stats of a closed session = %v, want the session's end reason %v", err, snd.Err())
	}
}
