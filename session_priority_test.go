package mptx_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/units"
)

// startLog records the class of every transfer the engine starts.
type startLog struct {
	mu   sync.Mutex
	prio map[multipath.TransferID]multipath.Priority
}

func (l *startLog) Record(ev *multipath.Event) {
	if ev.Kind == multipath.EvTransferStart {
		l.mu.Lock()
		l.prio[ev.Transfer] = ev.Priority
		l.mu.Unlock()
	}
}

// TestSessionSendPriority: SendAsyncWith hands the engine the tensor's
// class (a large default-class tensor and a small class-4 one sent
// together on one session arrive whole, and the engine started them at
// their classes); a class above MaxPriority is refused before anything is
// sent, naming the option and the range.
func TestSessionSendPriority(t *testing.T) {
	log := &startLog{prio: map[multipath.TransferID]multipath.Priority{}}
	snd, rcv := pair(t, mptx.Config{Paths: 4, SendBuffer: 64 * units.MiB, Engine: multipath.Config{Recorder: log, Priorities: true}},
		mptx.Config{RegionSize: 64 * units.MiB})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := snd.SendAsyncWith(ctx, "bad", tensor(9, 100), mptx.SendOptions{Priority: multipath.MaxPriority + 1}); err == nil ||
		!strings.Contains(err.Error(), "SendOptions.Priority = 8 (valid: 0..7") {
		t.Fatalf("SendAsyncWith(Priority 8): %v, want an error naming SendOptions.Priority and 0..7", err)
	}
	bulk, err := snd.SendAsync(ctx, "weights", tensor(1, 48<<20))
	if err != nil {
		t.Fatal(err)
	}
	block, err := snd.SendAsyncWith(ctx, "kv", tensor(2, 2<<20), mptx.SendOptions{Priority: multipath.PriorityHigh})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"weights": tensor(1, 48<<20), "kv": tensor(2, 2<<20)}
	for range want {
		tn, err := rcv.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tn.Data, want[tn.Name]) {
			t.Errorf("tensor %q: %d bytes, content differs", tn.Name, len(tn.Data))
		}
		tn.Release()
	}
	for _, tr := range []*mptx.Transfer{bulk, block} {
		if err := tr.Wait(ctx); err != nil {
			t.Fatalf("%s: %v", tr.Name, err)
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	got := fmt.Sprintf("%d %d", log.prio[bulk.ID], log.prio[block.ID])
	if want := fmt.Sprintf("%d %d", multipath.PriorityDefault, multipath.PriorityHigh); got != want || block.Priority != multipath.PriorityHigh {
		t.Errorf("engine classes (weights, kv) = %s, want %s; Transfer.Priority %d", got, want, block.Priority)
	}
}
