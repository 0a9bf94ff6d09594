package multipath_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/multipath/enginetest"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// tierLog records when each path got its first and last chunk.
type tierLog struct {
	first, last map[int]vtime.Time
}

func (l *tierLog) Record(ev *multipath.Event) {
	if ev.Kind != multipath.EvChunkStart {
		return
	}
	if _, ok := l.first[ev.Path]; !ok {
		l.first[ev.Path] = ev.Now
	}
	l.last[ev.Path] = ev.Now
}

// tiered returns a config of four 25 Gb/s paths on their own NICs, paths 0
// and 1 in tier 0 and paths 2 and 3 in tier 1.
func tiered(cc string, spill time.Duration, rec multipath.Recorder) multipath.Config {
	cfg := multipath.Config{CC: cc, TierSpill: spill, Recorder: rec}
	for i := range 4 {
		cfg.Paths = append(cfg.Paths, multipath.PathConfig{LineRate: 25 * gbps, BaseRTT: 10 * time.Microsecond, NIC: i, Tier: i / 2})
	}
	return cfg
}

var four25 = []units.BitRate{25 * gbps, 25 * gbps, 25 * gbps, 25 * gbps}

// TestTierPreferred: with a spill delay longer than the transfer, every
// chunk goes to the two tier-0 paths and the transfer takes as long as
// on those two alone; with the default delay (four round trips) a bulk
// transfer, whose chunks wait far longer than that for a tier-0 path,
// spills onto tier 1 and finishes sooner; a small transfer that the
// tier-0 paths take at once never spills. The plan of a small tensor is
// made for the tier-0 paths (two chunks, not four).
func TestTierPreferred(t *testing.T) {
	for _, cc := range []string{"fixed", "dcqcn"} {
		strict := enginetest.New(t, tiered(cc, time.Second, nil), four25, 10*time.Microsecond)
		strict.Submit(1, 64*units.MiB, 0)
		strict.Run(1)
		if b := strict.Bytes; b[2] != 0 || b[3] != 0 || b[0]+b[1] != 64*units.MiB {
			t.Errorf("%s, no spill: bytes per path %v, want all 64 MiB on paths 0 and 1", cc, b)
		}
		two := enginetest.New(t, multipath.Config{CC: cc}, four25[:2], 10*time.Microsecond)
		two.Submit(1, 64*units.MiB, 0)
		two.Run(1)
		if got, want := strict.Done[1].At, two.Done[1].At; got != want {
			t.Errorf("%s: tier 0 alone took %v, two paths alone %v", cc, got.Sub(vtime.Epoch), want.Sub(vtime.Epoch))
		}

		spill := enginetest.New(t, tiered(cc, 0, nil), four25, 10*time.Microsecond)
		spill.Submit(1, 64*units.MiB, 0)
		spill.Run(1)
		b := spill.Bytes
		t.Logf("%s: spilling, bytes per path %v, done at %v (tier 0 alone %v)", cc, b, spill.Done[1].At.Sub(vtime.Epoch), strict.Done[1].At.Sub(vtime.Epoch))
		if b[2]+b[3] == 0 || b[2]+b[3] > b[0]+b[1] {
			t.Errorf("%s, spilling: bytes per path %v, want tier 1 to carry some, no more than tier 0", cc, b)
		}
		if spill.Done[1].At >= strict.Done[1].At {
			t.Errorf("%s: spilling finished at %v, no sooner than tier 0 alone (%v)", cc, spill.Done[1].At, strict.Done[1].At)
		}

		small := enginetest.New(t, tiered(cc, 0, nil), four25, 10*time.Microsecond)
		plan := small.Submit(1, 2*units.MiB, 0)
		small.Run(1)
		if b := small.Bytes; b[2] != 0 || b[3] != 0 {
			t.Errorf("%s: a 2 MiB tensor spilled: bytes per path %v", cc, b)
		}
		if plan.Count != 2 {
			t.Errorf("%s: a 2 MiB tensor planned as %d chunks, want 2 (one per tier-0 path)", cc, plan.Count)
		}
	}
}

// TestTierFailover: when the tier-0 paths die, the transfer moves to tier
// 1 at once (a tier with no path up is skipped) instead of failing; once
// they are back, new chunks go to tier 0 again and tier 1 gets none.
func TestTierFailover(t *testing.T) {
	log := &tierLog{first: map[int]vtime.Time{}, last: map[int]vtime.Time{}}
	cfg := tiered("fixed", time.Second, log)
	cfg.MaxProbeFailures, cfg.QuarantineMax = 2, 2*time.Millisecond
	n := enginetest.New(t, cfg, four25, 10*time.Microsecond)
	down, back := at(2*time.Millisecond), at(20*time.Millisecond)
	n.Hook = func() {
		dead := n.Now >= down && n.Now < back
		n.Dead[0], n.Dead[1] = dead, dead
	}
	n.Submit(1, 256*units.MiB, 0)
	n.Run(1)
	if o := n.Done[1]; o.Err != nil {
		t.Fatalf("transfer failed with its preferred paths down: %v", o.Err)
	}
	t1, ok := log.first[2]
	if !ok {
		t.Fatal("tier 1 never got a chunk")
	}
	t.Logf("tier 0 died at %v; tier 1 first chunk %v, last %v; tier 0 last chunk %v; done %v; bytes %v",
		down.Sub(vtime.Epoch), t1.Sub(vtime.Epoch), log.last[2].Sub(vtime.Epoch), log.last[0].Sub(vtime.Epoch), n.Done[1].At.Sub(vtime.Epoch), n.Bytes)
	if t1 < down {
		t.Errorf("tier 1 got a chunk at %v, before tier 0 failed at %v", t1, down)
	}
	// Dead paths are noticed when their work fails (FailDelay) and their
	// probes come back after QuarantineMax at most.
	if last := max(log.last[2], log.last[3]); last > back.Add(n.FailDelay+cfg.QuarantineMax+time.Millisecond) {
		t.Errorf("tier 1 still got chunks at %v, long after tier 0 came back at %v", last, back)
	}
	if log.last[0] < back {
		t.Errorf("tier 0's last chunk at %v: it got none after coming back at %v", log.last[0], back)
	}
}

// TestTierStall: tensors of 512 KiB every 250 µs, which the one tier-0
// path (25 Gb/s: 168 µs each) takes as they come, never reach tier 1
// until that path stalls; then its window stays full, the next tensor's
// chunk waits, and tier 1 opens after the spill delay, long before the
// stall timeout takes the path out of use.
func TestTierStall(t *testing.T) {
	log := &tierLog{first: map[int]vtime.Time{}, last: map[int]vtime.Time{}}
	cfg := multipath.Config{CC: "fixed", TierSpill: 100 * time.Microsecond, MinTimeout: 10 * time.Millisecond, Recorder: log}
	cfg.Paths = []multipath.PathConfig{
		{LineRate: 25 * gbps, BaseRTT: 10 * time.Microsecond, NIC: 0},
		{LineRate: 25 * gbps, BaseRTT: 10 * time.Microsecond, NIC: 1, Tier: 1},
	}
	n := enginetest.New(t, cfg, four25[:2], 10*time.Microsecond)
	stall := at(1010 * time.Microsecond)
	n.Hook = func() { n.Stalled[0] = n.Now >= stall }
	var ids []multipath.TransferID
	for k := range 12 {
		n.RunUntil(at(time.Duration(k) * 250 * time.Microsecond))
		ids = append(ids, multipath.TransferID(k+1))
		n.Submit(multipath.TransferID(k+1), 512*units.KiB, 0)
		n.Step()
	}
	n.RunUntil(at(20 * time.Millisecond))
	t1 := log.first[1]
	t.Logf("path 0 stalled at %v; tier 1's first chunk at %v; done %d of %d", stall.Sub(vtime.Epoch), t1.Sub(vtime.Epoch), len(n.Done), len(ids))
	if t1 < stall {
		t.Errorf("tier 1 got a chunk at %v, before the stall", t1)
	}
	// The tensor submitted at 1.25 ms finds the stalled path's window
	// full and waits the spill delay.
	if limit := at(1250 * time.Microsecond).Add(cfg.TierSpill + time.Microsecond); t1 == 0 || t1 > limit {
		t.Errorf("tier 1's first chunk at %v, want by %v (well before the %v stall timeout)", t1.Sub(vtime.Epoch), limit.Sub(vtime.Epoch), cfg.MinTimeout)
	}
	for _, id := range ids {
		if o, ok := n.Done[id]; !ok || o.Err != nil {
			t.Errorf("transfer %d: done %v, err %v", id, ok, o.Err)
		}
	}
}

// TestTierDeadline: while chunks wait for a full tier, Deadline is the
// spill instant; once nothing waits, the spill deadline goes away, so a
// driver never spins on a past deadline.
func TestTierDeadline(t *testing.T) {
	cfg := tiered("fixed", 50*time.Microsecond, nil)
	n := enginetest.New(t, cfg, four25, 10*time.Microsecond)
	n.Submit(1, 16*units.MiB, units.MiB)
	n.Step()
	if d := n.E.Deadline(); d == 0 || d > n.Now.Add(cfg.TierSpill) {
		t.Errorf("Deadline %v with chunks waiting for tier 0, want by the spill at %v", d, n.Now.Add(cfg.TierSpill))
	}
	n.Run(1)
	if d := n.E.Deadline(); d != 0 && d <= n.Now {
		t.Errorf("Deadline %v at %v after the transfer: a past deadline would spin the driver", d, n.Now)
	}
	if n.Bytes[2]+n.Bytes[3] == 0 {
		t.Errorf("bytes per path %v: the spill deadline never opened tier 1", n.Bytes)
	}
}

// TestTierValidation: a tier out of range is refused, naming the field.
func TestTierValidation(t *testing.T) {
	cfg := tiered("fixed", 0, nil)
	cfg.Paths[1].Tier = -1
	if _, err := multipath.New(cfg); err == nil {
		t.Error("New accepted Paths[1].Tier = -1")
	} else if want := "Config.Paths[1].Tier = -1 (valid: 0..63"; !strings.Contains(err.Error(), want) {
		t.Errorf("New: %v, want it to name %q", err, want)
	}
}
