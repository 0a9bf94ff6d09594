package mptx_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/units"
)

// TestSessionZeroCopy: over TCP a session sends from the caller's memory,
// so a send buffer of 4 KiB does not bound the tensors (8 goroutines ship
// 4 MiB tensors at once), each goroutine may rewrite its tensor as soon as
// Send returns, and every tensor arrives as it was when it was sent.
func TestSessionZeroCopy(t *testing.T) {
	const (
		senders = 8
		rounds  = 3
		size    = 4 << 20
	)
	snd, rcv := pair(t, mptx.Config{Paths: 3, SendBuffer: 4 * units.KiB}, mptx.Config{RegionSize: 64 * units.MiB})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rctx, stop := context.WithCancelCause(ctx) // a failed Send ends the receiving too
	defer stop(nil)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, size) // one buffer per goroutine, reused
			for r := range rounds {
				copy(buf, tensor(g*rounds+r, size))
				if err := snd.Send(ctx, fmt.Sprintf("t%d", g*rounds+r), buf); err != nil {
					stop(fmt.Errorf("Send(t%d): %w", g*rounds+r, err))
					return
				}
				clear(buf) // allowed: Send has returned
			}
		}()
	}
	got := map[string]bool{}
	for range senders * rounds {
		tn, err := rcv.Recv(rctx)
		if err != nil {
			t.Fatalf("Recv: %v (%v)", err, context.Cause(rctx))
		}
		var id int
		if _, err := fmt.Sscanf(tn.Name, "t%d", &id); err != nil {
			t.Fatalf("tensor name %q: %v", tn.Name, err)
		}
		if !bytes.Equal(tn.Data, tensor(id, size)) {
			t.Errorf("tensor %q arrived with other bytes than were sent", tn.Name)
		}
		got[tn.Name] = true
		tn.Release()
	}
	wg.Wait()
	if len(got) != senders*rounds {
		t.Errorf("received %d distinct tensors, want %d", len(got), senders*rounds)
	}
}
