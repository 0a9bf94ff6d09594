package multipath_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/multipath/enginetest"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// chunkLog records, in order, the transfer of every chunk attempt that
// starts and every chunk set aside.
type chunkLog struct {
	starts   []multipath.TransferID
	preempts int
}

func (l *chunkLog) Record(ev *multipath.Event) {
	switch ev.Kind {
	case multipath.EvChunkStart:
		l.starts = append(l.starts, ev.Transfer)
	case multipath.EvChunkPreempt:
		l.preempts++
	}
}

// TestPriorityStrictOrder: three transfers submitted together on one path
// are served strictly by class: every chunk of the class-5 transfer starts
// before any of the class-2 one, and those before any of the default
// class, so they complete in class order although the lowest class was
// submitted first.
func TestPriorityStrictOrder(t *testing.T) {
	var log chunkLog
	n := enginetest.New(t, multipath.Config{CC: "fixed", Recorder: &log}, []units.BitRate{10 * gbps}, 10*time.Microsecond)
	for _, s := range []struct {
		id multipath.TransferID
		p  multipath.Priority
	}{{1, 0}, {2, 2}, {3, 5}} {
		n.SubmitSpec(multipath.TransferSpec{ID: s.id, Size: 8 * units.MiB, ChunkSize: units.MiB, Priority: s.p})
	}
	n.Run(1, 2, 3)
	want := slices.Concat(slices.Repeat([]multipath.TransferID{3}, 8), slices.Repeat([]multipath.TransferID{2}, 8), slices.Repeat([]multipath.TransferID{1}, 8))
	if !slices.Equal(log.starts, want) {
		t.Errorf("chunk starts by transfer %v, want %v", log.starts, want)
	}
	if !(n.Done[3].At < n.Done[2].At && n.Done[2].At < n.Done[1].At) {
		t.Errorf("done at %v (class 0), %v (class 2), %v (class 5): want class order", n.Done[1].At, n.Done[2].At, n.Done[3].At)
	}
	if log.preempts != 0 {
		t.Errorf("%d chunks set aside: nothing was active when the classes arrived", log.preempts)
	}
}

// TestPriorityGuard: with PriorityGuard = 8 MiB a class-3 transfer of 1 MiB
// chunks is handed 8 chunks, then the waiting default-class transfer one
// (which is not set aside: the guard pins it), and so on; strict priority
// (a negative guard) hands the default class nothing until class 3 has no
// chunk left.
func TestPriorityGuard(t *testing.T) {
	for _, guard := range []units.Bytes{8 * units.MiB, -1} {
		var log chunkLog
		n := enginetest.New(t, multipath.Config{CC: "fixed", PriorityGuard: guard, Recorder: &log}, []units.BitRate{10 * gbps}, 10*time.Microsecond)
		n.SubmitSpec(multipath.TransferSpec{ID: 1, Size: 32 * units.MiB, ChunkSize: units.MiB})
		n.SubmitSpec(multipath.TransferSpec{ID: 3, Size: 32 * units.MiB, ChunkSize: units.MiB, Priority: 3})
		n.Run(1, 3)
		var want []multipath.TransferID
		if guard > 0 {
			for range 4 {
				want = append(want, slices.Repeat([]multipath.TransferID{3}, 8)...)
				want = append(want, 1)
			}
		} else {
			want = slices.Repeat([]multipath.TransferID{3}, 32)
		}
		want = append(want, slices.Repeat([]multipath.TransferID{1}, 32-(len(want)-32))...)
		if !slices.Equal(log.starts, want) {
			t.Errorf("guard %v: chunk starts by transfer\n got  %v\n want %v", guard, log.starts, want)
		}
		if log.preempts != 0 {
			t.Errorf("guard %v: %d chunks set aside (the guard's chunks are pinned)", guard, log.preempts)
		}
	}
}

// TestPriorityPreemptsBulk: a 2 MiB class-4 tensor submitted while a 1 GiB
// default-class transfer keeps all four paths busy completes within
// the bound the model gives, and a default-class one does not.
//
// enginetest's paths are FIFO servers at line rate r with a fixed RTT.
// The high-priority chunks set the bulk chunks' unposted segments aside,
// so on path i a high chunk waits only for the bytes already posted
// there, at most InFlight_i at submission; alone it would have started at
// once. So T_busy ≤ T_idle + max_i InFlight_i / r. At the default class
// the tensor instead waits for chunk turns (one chunk per transfer per
// turn), whole 4 MiB bulk chunks ahead of its second half: far past the
// bound, which is what makes the bound a test of priority.
func TestPriorityPreemptsBulk(t *testing.T) {
	rates := []units.BitRate{100 * gbps, 100 * gbps, 100 * gbps, 100 * gbps}
	const rtt = 10 * time.Microsecond
	arrive := at(3100 * time.Microsecond)
	for _, cc := range []string{"dcqcn", "fixed", "swift"} {
		idle := enginetest.New(t, multipath.Config{CC: cc}, rates, rtt)
		idle.SubmitSpec(multipath.TransferSpec{ID: 2, Size: 2 * units.MiB, Priority: multipath.PriorityHigh})
		idle.Run(2)
		tIdle := idle.Done[2].At.Sub(vtime.Epoch)
		for _, p := range []multipath.Priority{multipath.PriorityHigh, multipath.PriorityDefault} {
			var log chunkLog
			n := enginetest.New(t, multipath.Config{CC: cc, Recorder: &log}, rates, rtt)
			n.Submit(1, units.GiB, 0)
			n.RunUntil(arrive)
			var ahead units.Bytes
			for i := range rates {
				ahead = max(ahead, n.E.Stats(i).InFlight)
			}
			bound := tIdle + rates[0].TxTime(ahead)
			n.SubmitSpec(multipath.TransferSpec{ID: 2, Size: 2 * units.MiB, Priority: p})
			n.Run(2)
			tBusy := n.Done[2].At.Sub(arrive)
			t.Logf("%s class %d: idle %v, beside the bulk %v (bound %v: %v in flight ahead), %d chunks set aside", cc, p, tIdle, tBusy, bound, ahead, log.preempts)
			if p > 0 {
				if tBusy > bound || tBusy < tIdle {
					t.Errorf("%s: high-priority tensor took %v beside the bulk transfer, want within [%v, %v]", cc, tBusy, tIdle, bound)
				}
				if log.preempts == 0 {
					t.Errorf("%s: no bulk chunk was set aside", cc)
				}
			} else if tBusy <= bound {
				t.Errorf("%s: a default-class tensor took %v, within the high-priority bound %v: the bound does not tell priority apart", cc, tBusy, bound)
			}
			n.Run(1)
			if o := n.Done[1]; o.Err != nil {
				t.Errorf("%s: the bulk transfer failed: %v", cc, o.Err)
			}
		}
	}
}

// TestPriorityShallowQueue: once a higher class has been submitted (from
// the start with Config.Priorities), a default-class chunk on paths
// sharing a NIC keeps at most their share of one path's allowance (window
// plus two segments, in whole MTUs, at least one MTU) posted; before, each
// path posts its full allowance.
func TestPriorityShallowQueue(t *testing.T) {
	const np = 4
	cfg := multipath.Config{CC: "dcqcn"}
	var rates []units.BitRate
	for range np {
		cfg.Paths = append(cfg.Paths, multipath.PathConfig{LineRate: 100 * gbps, BaseRTT: 10 * time.Microsecond})
		rates = append(rates, 25*gbps) // the NIC's share each: enginetest's paths do not share a port
	}
	for _, declared := range []bool{false, true} {
		cfg.Priorities = declared
		n := enginetest.New(t, cfg, rates, 10*time.Microsecond)
		n.Submit(1, 256*units.MiB, 0)
		maxIn := func(until vtime.Time) (m units.Bytes) {
			n.Hook = func() {
				for i := range np {
					m = max(m, n.E.Stats(i).InFlight)
				}
			}
			n.RunUntil(until)
			n.Hook = nil
			return m
		}
		before := maxIn(at(2 * time.Millisecond))
		win := n.E.Stats(0).Window
		n.SubmitSpec(multipath.TransferSpec{ID: 2, Size: 4096, Priority: 1})
		n.RunUntil(at(2100 * time.Microsecond)) // the deep queue drains
		after := maxIn(at(4 * time.Millisecond))
		seg := win / 2 / 4096 * 4096 // the window is under two default segments
		share := max(4096, (win+2*seg)/np/4096*4096)
		t.Logf("declared %v: window %v; most in flight on a path %v, then %v (share %v)", declared, win, before, after, share)
		if after > share {
			t.Errorf("declared %v: %v in flight on a path once a higher class was carried, want at most %v", declared, after, share)
		}
		if declared && before > share {
			t.Errorf("declared: %v in flight on a path before, want at most %v", before, share)
		}
		if !declared && before <= share {
			t.Errorf("undeclared: at most %v in flight before any higher class, want the full allowance (more than %v)", before, share)
		}
		n.Run(1, 2)
	}
}

// TestPriorityValidation: a class above MaxPriority is refused, naming the
// field and the range.
func TestPriorityValidation(t *testing.T) {
	n := enginetest.New(t, multipath.Config{CC: "fixed"}, []units.BitRate{10 * gbps}, 10*time.Microsecond)
	_, _, err := n.E.Submit(0, multipath.TransferSpec{ID: 1, Size: units.MiB, Priority: multipath.MaxPriority + 1})
	if err == nil || !strings.Contains(err.Error(), "Priority = 8 (valid: 0..7") {
		t.Errorf("Submit with Priority 8: %v, want an error naming the field and 0..7", err)
	}
	if _, _, err := n.E.Submit(0, multipath.TransferSpec{ID: 1, Size: units.MiB, Priority: multipath.MaxPriority}); err != nil {
		t.Errorf("Submit with MaxPriority: %v", err)
	}
	if err := n.E.Cancel(0, 1, errors.New("test")); err != nil {
		t.Error(err)
	}
}
