package mem_test

import (
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/qp/qptest"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

func factory(t testing.TB, paths int, region units.Bytes) *qptest.Env {
	cfg := mem.Config{SendRegion: make([]byte, region), RecvRegion: make([]byte, region)}
	for i := 0; i < paths; i++ {
		cfg.Paths = append(cfg.Paths, mem.PathConfig{Rate: 10 * units.Gbps, Delay: 2 * time.Microsecond})
	}
	n, err := mem.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &qptest.Env{
		Conn: n.Conn(), Recv: n.Receiver(), SendRegion: cfg.SendRegion,
		Progress: func() {
			if next := n.Next(); next != 0 {
				n.AdvanceTo(next)
			}
		},
		Fail:  func(i int) error { n.Fail(i); return nil },
		Stall: func(i int) func() { n.Pause(i); return func() { n.Resume(i) } },
	}
}

func TestConformance(t *testing.T) { qptest.Run(t, factory) }

// TestTiming checks the model: an idle path completes n bytes in
// n·8/rate + 2·delay, and back-to-back writes queue behind each other.
func TestTiming(t *testing.T) {
	n, err := mem.New(mem.Config{
		Paths:      []mem.PathConfig{{Rate: 8 * units.Gbps, Delay: 3 * time.Microsecond}},
		RecvRegion: make([]byte, units.MiB),
	})
	if err != nil {
		t.Fatal(err)
	}
	start := n.Now()
	wrs := []qp.SendWR{{ID: 1, Op: qp.OpWrite, Len: 8000}, {ID: 2, Op: qp.OpWriteImm, Len: 8000, Imm: 1}}
	if k, err := n.Conn().PostSend(0, wrs); k != 2 || err != nil {
		t.Fatal(k, err)
	}
	buf := make([]qp.Completion, 4)
	var at []vtime.Time
	for len(at) < 2 {
		n.AdvanceTo(n.Next())
		k, _ := n.Conn().Poll(buf)
		for _, c := range buf[:k] {
			at = append(at, c.At)
		}
	}
	// 8000 B at 8 Gb/s = 8 µs serialisation, + 2×3 µs.
	if got, want := at[0].Sub(start), 14*time.Microsecond; got != want {
		t.Errorf("first completion after %v, want %v", got, want)
	}
	if got, want := at[1].Sub(start), 22*time.Microsecond; got != want {
		t.Errorf("second completion after %v, want %v (queued behind the first)", got, want)
	}
}

func TestFailAtRetryExceeded(t *testing.T) {
	n, err := mem.New(mem.Config{
		Paths:        []mem.PathConfig{{Rate: units.Gbps, FailAt: vtime.Epoch.Add(10 * time.Microsecond)}},
		RecvRegion:   make([]byte, units.MiB),
		RetryTimeout: 500 * time.Microsecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	// 3 × 64 KiB at 1 Gb/s: the first lands after ~524 µs, well after the failure.
	wrs := []qp.SendWR{{ID: 1, Op: qp.OpWrite, Len: 64 * units.KiB}, {ID: 2, Op: qp.OpWrite, Len: 64 * units.KiB}, {ID: 3, Op: qp.OpWrite, Len: 64 * units.KiB}}
	if k, err := n.Conn().PostSend(0, wrs); k != 3 || err != nil {
		t.Fatal(k, err)
	}
	buf := make([]qp.Completion, 4)
	var got []qp.Completion
	for len(got) < 3 && n.Next() != 0 {
		n.AdvanceTo(n.Next())
		k, _ := n.Conn().Poll(buf)
		got = append(got, buf[:k]...)
	}
	if len(got) != 3 {
		t.Fatalf("got %d completions, want 3", len(got))
	}
	want := []qp.Status{qp.StatusRetryExceeded, qp.StatusFlushed, qp.StatusFlushed}
	for i, c := range got {
		if c.ID != uint64(i+1) || c.Status != want[i] {
			t.Errorf("completion %d = id %d %v; want id %d %v", i, c.ID, c.Status, i+1, want[i])
		}
	}
	if d := got[0].At.Sub(vtime.Epoch); d != 510*time.Microsecond {
		t.Errorf("retry error at %v, want 510µs (failure at 10µs + 500µs retry timeout)", d)
	}
	if b := n.PathBytes(0); b != 0 {
		t.Errorf("%d bytes landed through a failed path, want 0", b)
	}
}

// TestCloseDropsReadResponses: a READ whose response is still under way
// when the requester closes its connection never lands in the requester's
// memory (its queue pairs are gone; the memory may be reused at once).
func TestCloseDropsReadResponses(t *testing.T) {
	send := make([]byte, units.MiB)
	n, err := mem.New(mem.Config{
		Paths:      []mem.PathConfig{{Rate: units.Gbps, Delay: 5 * time.Microsecond}},
		SendRegion: send, RecvRegion: make([]byte, 4096),
	})
	if err != nil {
		t.Fatal(err)
	}
	exposed := make([]byte, units.MiB)
	for i := range exposed {
		exposed[i] = 0xA5
	}
	x, err := n.Receiver().Expose(exposed, qp.AccessRead)
	if err != nil {
		t.Fatal(err)
	}
	wr := []qp.SendWR{{ID: 1, Op: qp.OpRead, RKey: x.Key, Remote: units.Bytes(x.Addr), Len: units.MiB}}
	if k, err := n.Conn().PostSend(0, wr); k != 1 || err != nil {
		t.Fatalf("PostSend(READ) = %d, %v", k, err)
	}
	// Past the request's arrival (5 µs), well before the response (1 MiB
	// at 1 Gb/s: 8.4 ms) has landed.
	n.AdvanceTo(vtime.Epoch.Add(100 * time.Microsecond))
	if err := n.Conn().Close(); err != nil {
		t.Fatal(err)
	}
	for next := n.Next(); next != 0; next = n.Next() {
		n.AdvanceTo(next)
	}
	for i, b := range send {
		if b != 0 {
			t.Fatalf("byte %d of the requester's memory = %#x after Close: a READ response landed", i, b)
		}
	}
}
