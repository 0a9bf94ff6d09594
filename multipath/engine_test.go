package multipath

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// fakeNet is a minimal driver for engine unit tests: every path is a FIFO
// server with a rate and a fixed RTT, work completes in order, and paths can
// be failed. It stands in for qp/mem without importing qp (the engine's
// tests stay inside the architecture rule too).
type fakeNet struct {
	t       testing.TB
	e       *Engine
	now     vtime.Time
	rates   []units.BitRate
	rtt     time.Duration
	busy    []vtime.Time
	dead    []bool
	q       []pending // outstanding, by completion time (kept sorted)
	acts    []Action
	done    map[TransferID]error
	doneAt  map[TransferID]vtime.Time
	bytes   []units.Bytes // bytes completed per path
	cnpEach []units.Bytes
	carried []units.Bytes
	cnps    []uint64
	comp    Completion
	trace   *bytes.Buffer
	hook    func() // called after every step of run
}

type pending struct {
	at   vtime.Time
	id   uint64
	path int
	n    units.Bytes
	ok   bool
}

func newFakeNet(t testing.TB, cfg Config, rates []units.BitRate, rtt time.Duration) *fakeNet {
	t.Helper()
	if len(cfg.Paths) == 0 {
		for _, r := range rates {
			cfg.Paths = append(cfg.Paths, PathConfig{LineRate: r, BaseRTT: rtt, NIC: len(cfg.Paths)})
		}
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeNet{
		t: t, e: e, now: vtime.Epoch, rates: rates, rtt: rtt,
		busy: make([]vtime.Time, len(rates)), dead: make([]bool, len(rates)),
		acts: make([]Action, 64), done: map[TransferID]error{}, doneAt: map[TransferID]vtime.Time{},
		bytes: make([]units.Bytes, len(rates)), cnpEach: make([]units.Bytes, len(rates)),
		carried: make([]units.Bytes, len(rates)), cnps: make([]uint64, len(rates)),
	}
}

func (f *fakeNet) submit(id TransferID, size, chunkSize units.Bytes) chunk.Plan {
	f.t.Helper()
	_, plan, err := f.e.Submit(f.now, TransferSpec{ID: id, Size: size, ChunkSize: chunkSize})
	if err != nil {
		f.t.Fatal(err)
	}
	return plan
}

func (f *fakeNet) insert(p pending) {
	i := len(f.q)
	f.q = append(f.q, p)
	for i > 0 && f.q[i-1].at > p.at {
		f.q[i] = f.q[i-1]
		i--
	}
	f.q[i] = p
}

// step runs the driver loop once at f.now.
func (f *fakeNet) step() {
	if d := f.e.Deadline(); d != 0 && d <= f.now {
		f.e.OnTimer(f.now)
	}
	for {
		n := f.e.Actions(f.now, f.acts)
		for _, a := range f.acts[:n] {
			if f.trace != nil {
				fmt.Fprintf(f.trace, "%d %v p%d w%d t%d c%d off%d len%d imm%v a%d\n", f.now, a.Kind, a.Path, a.WorkID, a.Transfer, a.Chunk, a.Offset, a.Len, a.HasImm, a.Attempt)
			}
			switch a.Kind {
			case ActPost, ActProbe:
				if f.dead[a.Path] {
					f.insert(pending{at: f.now.Add(time.Millisecond), id: a.WorkID, path: a.Path, ok: false})
					continue
				}
				start := max(f.now, f.busy[a.Path])
				end := start.Add(f.rates[a.Path].TxTime(a.Len))
				f.busy[a.Path] = end
				f.insert(pending{at: end.Add(f.rtt), id: a.WorkID, path: a.Path, n: a.Len, ok: true})
				if c := f.cnpEach[a.Path]; c > 0 {
					before := f.carried[a.Path] / c
					f.carried[a.Path] += a.Len
					f.cnps[a.Path] += uint64(f.carried[a.Path]/c - before)
				}
			case ActDone, ActFailed:
				f.done[a.Transfer] = a.Err
				f.doneAt[a.Transfer] = f.now
			}
		}
		if n < len(f.acts) {
			break
		}
	}
}

// run advances time until every submitted transfer ended or maxSteps.
func (f *fakeNet) run(ids ...TransferID) {
	f.t.Helper()
	f.step()
	for steps := 0; ; steps++ {
		all := true
		for _, id := range ids {
			if _, ok := f.done[id]; !ok {
				all = false
			}
		}
		if all {
			return
		}
		if steps > 10_000_000 {
			f.t.Fatalf("no progress after %d steps", steps)
		}
		next := f.e.Deadline()
		if len(f.q) > 0 {
			next = vtime.Earliest(next, f.q[0].at)
		}
		if next == 0 {
			f.t.Fatalf("stuck at %v: no deadline, nothing outstanding; done %v\n%s", f.now, f.done, f.e.dump())
		}
		if next > f.now {
			f.now = next
		}
		for len(f.q) > 0 && f.q[0].at <= f.now {
			p := f.q[0]
			f.q = f.q[1:]
			if f.dead[p.path] && p.ok {
				p.ok = false
			}
			f.comp = Completion{WorkID: p.id, OK: p.ok}
			if !p.ok {
				f.comp.Reason = "retry-exceeded"
			} else {
				f.bytes[p.path] += p.n
			}
			f.e.OnCompletion(f.now, &f.comp)
		}
		for i := range f.cnps {
			f.e.OnCounters(f.now, i, 0, f.cnps[i])
		}
		f.step()
		if f.hook != nil {
			f.hook()
		}
	}
}

func shares(b []units.Bytes) []float64 {
	var sum units.Bytes
	for _, x := range b {
		sum += x
	}
	out := make([]float64, len(b))
	for i, x := range b {
		out[i] = float64(x) / float64(sum)
	}
	return out
}

func TestSplitFollowsRates(t *testing.T) {
	rates := []units.BitRate{40 * units.Gbps, 20 * units.Gbps, 10 * units.Gbps, 10 * units.Gbps}
	f := newFakeNet(t, Config{CC: "fixed"}, rates, 10*time.Microsecond)
	f.submit(1, 256*units.MiB, units.MiB)
	f.run(1)
	if err := f.done[1]; err != nil {
		t.Fatal(err)
	}
	want := []float64{0.5, 0.25, 0.125, 0.125}
	got := shares(f.bytes)
	for i := range want {
		if d := got[i]/want[i] - 1; d > 0.10 || d < -0.10 {
			t.Errorf("path %d share = %.3f, want %.3f ±10%%", i, got[i], want[i])
		}
	}
	// Ideal: 256 MiB at 80 Gb/s.
	ideal := (80 * units.Gbps).TxTime(256 * units.MiB)
	if el := f.doneAt[1].Sub(vtime.Epoch); el > ideal*110/100 {
		t.Errorf("completion %v, want within 10%% of the ideal %v", el, ideal)
	}
	t.Logf("shares %.3f, completion %v (ideal %v)", got, f.doneAt[1].Sub(vtime.Epoch), ideal)
}

func TestSlowPathAtMostFairShare(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps, 10 * units.Gbps, units.Gbps}
	for _, pol := range []Policy{CongestionAware} {
		f := newFakeNet(t, Config{CC: "fixed", Policy: pol}, rates, 10*time.Microsecond)
		f.submit(1, 64*units.MiB, units.MiB)
		f.run(1)
		got := shares(f.bytes)
		fair := 1.0 / 31
		if got[3] > fair {
			t.Errorf("%v: slow path share = %.4f, want at most its fair share %.4f", pol, got[3], fair)
		}
		ideal := (31 * units.Gbps).TxTime(64 * units.MiB)
		if el := f.doneAt[1].Sub(vtime.Epoch); el > ideal*110/100 {
			t.Errorf("%v: completion %v, want within 10%% of ideal %v", pol, el, ideal)
		}
		t.Logf("%v: shares %.4f, completion %v (ideal %v)", pol, got, f.doneAt[1].Sub(vtime.Epoch), ideal)
	}
}

func TestDeadPathRequeues(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps, 10 * units.Gbps}
	var rec recorder
	f := newFakeNet(t, Config{CC: "fixed", Recorder: &rec}, rates, 10*time.Microsecond)
	plan := f.submit(7, 32*units.MiB, units.MiB)
	// Kill path 1 a third of the way in.
	f.step()
	for f.now < vtime.Epoch.Add(3*time.Millisecond) {
		next := f.q[0].at
		f.now = next
		for len(f.q) > 0 && f.q[0].at <= f.now {
			p := f.q[0]
			f.q = f.q[1:]
			f.comp = Completion{WorkID: p.id, OK: true}
			f.bytes[p.path] += p.n
			f.e.OnCompletion(f.now, &f.comp)
		}
		f.step()
	}
	f.dead[1] = true
	f.run(7)
	if err := f.done[7]; err != nil {
		t.Fatalf("transfer failed: %v", err)
	}
	st := f.e.Stats(1)
	if st.State == PathUp || st.Requeues == 0 {
		t.Errorf("path 1 stats %+v: want it out of use with requeued chunks", st)
	}
	// Every chunk completed exactly once (by the engine's account).
	doneChunks := map[uint32]int{}
	for _, ev := range rec.events {
		if ev.Kind == EvChunkDone && ev.Transfer == 7 {
			doneChunks[ev.Chunk]++
		}
	}
	if len(doneChunks) != plan.Count {
		t.Errorf("%d distinct chunks done, want %d", len(doneChunks), plan.Count)
	}
	for c, n := range doneChunks {
		if n != 1 {
			t.Errorf("chunk %d done %d times, want 1", c, n)
		}
	}
}

func TestNoPathLeftFailsWithReasons(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
	f := newFakeNet(t, Config{CC: "fixed", MaxProbeFailures: 2, QuarantineMax: 4 * time.Millisecond}, rates, 10*time.Microsecond)
	f.submit(3, 16*units.MiB, units.MiB)
	f.dead[0], f.dead[1] = true, true
	f.run(3)
	err := f.done[3]
	if !errors.Is(err, ErrNoPath) {
		t.Fatalf("err = %v, want ErrNoPath", err)
	}
	for _, want := range []string{"path 0 (path0)", "path 1 (path1)", "retry-exceeded", "dead"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestECNMarksShrinkShare(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps, 10 * units.Gbps, 10 * units.Gbps}
	run := func(marks bool) []float64 {
		f := newFakeNet(t, Config{CC: "dcqcn"}, rates, 10*time.Microsecond)
		if marks {
			f.cnpEach[0] = 64 * units.KiB
		}
		f.submit(1, 64*units.MiB, units.MiB)
		f.run(1)
		return shares(f.bytes)
	}
	base, marked := run(false), run(true)
	if marked[0] > base[0]*0.7 {
		t.Errorf("path 0 share with marks = %.3f, without = %.3f; want it to fall by more than 30%%", marked[0], base[0])
	}
	t.Logf("share of the marked path: %.3f unmarked, %.3f marked", base[0], marked[0])
}

func TestDeterministicTrace(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 25 * units.Gbps, 10 * units.Gbps, 5 * units.Gbps}
	trace := func(seed uint64) string {
		f := newFakeNet(t, Config{CC: "dcqcn", Policy: PowerOfTwo, Seed: seed}, rates, 7*time.Microsecond)
		f.trace = &bytes.Buffer{}
		f.cnpEach[1] = 256 * units.KiB
		f.submit(1, 24*units.MiB, 0)
		f.submit(2, 8*units.MiB, 0)
		f.run(1, 2)
		return f.trace.String()
	}
	a, b, c := trace(1), trace(1), trace(2)
	if a != b {
		t.Fatal("same seed produced different action traces")
	}
	if a == c {
		t.Fatal("different seeds produced identical traces: the policy ignores its randomness")
	}
}

func TestSubmitValidation(t *testing.T) {
	f := newFakeNet(t, Config{CC: "fixed", MaxTransfers: 1}, []units.BitRate{units.Gbps}, time.Microsecond)
	if _, _, err := f.e.Submit(f.now, TransferSpec{ID: 1, Size: 0}); err == nil || !strings.Contains(err.Error(), "Size = 0") {
		t.Errorf("Submit(size 0) err = %v, want one naming Size", err)
	}
	f.submit(1, units.MiB, 0)
	if _, _, err := f.e.Submit(f.now, TransferSpec{ID: 1, Size: units.MiB}); !errors.Is(err, ErrDuplicateID) {
		t.Errorf("duplicate id err = %v, want ErrDuplicateID", err)
	}
	if _, _, err := f.e.Submit(f.now, TransferSpec{ID: 2, Size: units.MiB}); !errors.Is(err, ErrTooManyTransfers) {
		t.Errorf("over MaxTransfers err = %v, want ErrTooManyTransfers", err)
	}
	if _, _, err := f.e.Submit(f.now, TransferSpec{ID: 3, Size: units.MiB, ChunkSize: 5000}); err == nil {
		t.Errorf("bad chunk size accepted")
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Config.Paths has 0 paths"},
		{Config{Paths: []PathConfig{{LineRate: 0}}}, "Paths[0].LineRate = 0"},
		{Config{Paths: []PathConfig{{LineRate: units.Gbps}}, CC: "nope"}, "nope"},
		{Config{Paths: []PathConfig{{LineRate: units.Gbps}}, Policy: 99}, "Config.Policy"},
		{Config{Paths: []PathConfig{{LineRate: units.Gbps}}, QuarantineMin: time.Second, QuarantineMax: time.Millisecond}, "QuarantineMin"},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) err = %v, want it to mention %q", tc.cfg, err, tc.want)
		}
	}
}

func TestFairnessBetweenTransfers(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
	f := newFakeNet(t, Config{CC: "fixed"}, rates, 10*time.Microsecond)
	f.submit(1, 32*units.MiB, units.MiB)
	f.submit(2, 32*units.MiB, units.MiB)
	f.run(1, 2)
	a, b := f.doneAt[1].Sub(vtime.Epoch), f.doneAt[2].Sub(vtime.Epoch)
	if r := float64(a) / float64(b); r < 0.9 || r > 1.1 {
		t.Errorf("equal transfers finished at %v and %v; round-robin sharing should finish them within 10%%", a, b)
	}
}

func TestPolicies(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps, 10 * units.Gbps}
	for _, name := range PolicyNames() {
		pol, err := ParsePolicy(name)
		if err != nil {
			t.Fatal(err)
		}
		f := newFakeNet(t, Config{CC: "fixed", Policy: pol, Seed: 3}, rates, 10*time.Microsecond)
		f.submit(1, 16*units.MiB, units.MiB)
		f.run(1)
		if f.done[1] != nil {
			t.Errorf("%s: %v", name, f.done[1])
		}
		for i, b := range f.bytes {
			if b == 0 {
				t.Errorf("%s: path %d carried nothing on equal paths", name, i)
			}
		}
	}
	if _, err := ParsePolicy("fastest"); err == nil || !strings.Contains(err.Error(), "congestion-aware") {
		t.Errorf("ParsePolicy(bad) err = %v, want the valid names listed", err)
	}
}

type recorder struct{ events []Event }

func (r *recorder) Record(ev *Event) { r.events = append(r.events, *ev) }

func TestHardwarePacingSetsRates(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
	f := newFakeNet(t, Config{CC: "dcqcn", Pacing: PacingConfig{Hardware: true}}, rates, 10*time.Microsecond)
	f.trace = &bytes.Buffer{}
	var setRates []Action
	f.submit(1, 16*units.MiB, 4*units.MiB)
	n := f.e.Actions(f.now, f.acts)
	for _, a := range f.acts[:n] {
		switch a.Kind {
		case ActSetRate:
			setRates = append(setRates, a)
		case ActPost:
			if a.Len != 4*units.MiB {
				t.Errorf("hardware pacing posted a %v work request, want whole 4MiB chunks", a.Len)
			}
		}
	}
	if len(setRates) != 2 || setRates[0].Rate != 10*units.Gbps {
		t.Fatalf("initial ActSetRate actions = %+v, want one per path at line rate", setRates)
	}
	f.e.OnCounters(f.now, 0, 0, 0)
	f.e.OnCounters(f.now.Add(time.Microsecond), 0, 0, 3)
	n = f.e.Actions(f.now.Add(time.Microsecond), f.acts)
	got := false
	for _, a := range f.acts[:n] {
		if a.Kind == ActSetRate && a.Path == 0 && a.Rate < 10*units.Gbps {
			got = true
		}
	}
	if !got {
		t.Errorf("no lower ActSetRate for path 0 after CNPs: %+v", f.acts[:n])
	}
}

func TestProbeAfterQPErrorAsksForReset(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
	f := newFakeNet(t, Config{CC: "fixed", QuarantineMin: time.Millisecond}, rates, 10*time.Microsecond)
	f.submit(1, 8*units.MiB, units.MiB)
	n := f.e.Actions(f.now, f.acts)
	var id uint64
	for _, a := range f.acts[:n] {
		if a.Kind == ActPost && a.Path == 0 {
			id = a.WorkID
			break
		}
	}
	f.comp = Completion{WorkID: id, Reason: "retry-exceeded"}
	f.e.OnCompletion(f.now, &f.comp)
	if st := f.e.Stats(0); st.State != PathQuarantined {
		t.Fatalf("path 0 after an error completion: %v, want quarantined", st.State)
	}
	later := f.now.Add(2 * time.Millisecond)
	n = f.e.Actions(later, f.acts)
	var probe *Action
	for i := range f.acts[:n] {
		if f.acts[i].Kind == ActProbe && f.acts[i].Path == 0 {
			probe = &f.acts[i]
		}
	}
	if probe == nil || !probe.Reset {
		t.Fatalf("probe after a QP error = %+v, want one with Reset set", probe)
	}
	f.comp = Completion{WorkID: probe.WorkID, OK: true}
	f.e.OnCompletion(later.Add(20*time.Microsecond), &f.comp)
	if st := f.e.Stats(0); st.State != PathUp {
		t.Fatalf("path 0 after a successful probe: %v, want up", st.State)
	}
}

func TestDeadPathIsStillProbedAndComesBack(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
	f := newFakeNet(t, Config{CC: "fixed", MaxProbeFailures: 2, QuarantineMax: 4 * time.Millisecond}, rates, 10*time.Microsecond)
	f.dead[0] = true
	sawDead := false
	var back vtime.Time
	f.hook = func() {
		st := f.e.Stats(0)
		if st.State == PathDead && !sawDead {
			sawDead = true
			back = f.now.Add(10 * time.Millisecond)
		}
		if sawDead && f.now >= back {
			f.dead[0] = false
		}
	}
	f.submit(1, 256*units.MiB, units.MiB)
	f.run(1)
	if !sawDead {
		t.Fatal("path 0 never became dead")
	}
	st := f.e.Stats(0)
	if st.State != PathUp || f.bytes[0] == 0 {
		t.Errorf("path 0 after its link came back: %v with %v carried; want it probed back up and carrying chunks", st.State, f.bytes[0])
	}
	if f.done[1] != nil {
		t.Errorf("transfer: %v", f.done[1])
	}
}

func TestFailedProbeAfterStallAsksForReset(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
	f := newFakeNet(t, Config{CC: "fixed", MinTimeout: time.Millisecond, QuarantineMin: time.Millisecond}, rates, 10*time.Microsecond)
	f.submit(1, 8*units.MiB, units.MiB)
	f.e.Actions(f.now, f.acts)
	// Nothing completes: path 0 stalls (no QP error yet).
	t1 := f.now.Add(20 * time.Millisecond)
	f.e.OnTimer(t1)
	if st := f.e.Stats(0); st.State != PathQuarantined || st.Reason != "stalled" {
		t.Fatalf("path 0 = %v (%s), want quarantined (stalled)", st.State, st.Reason)
	}
	probe := func(at vtime.Time) *Action {
		n := f.e.Actions(at, f.acts)
		for i := range f.acts[:n] {
			if f.acts[i].Kind == ActProbe && f.acts[i].Path == 0 {
				return &f.acts[i]
			}
		}
		return nil
	}
	p1 := probe(t1.Add(5 * time.Millisecond))
	if p1 == nil || p1.Reset {
		t.Fatalf("first probe after a stall = %+v, want one without Reset (the QP is not in error)", p1)
	}
	f.comp = Completion{WorkID: p1.WorkID, Reason: "retry-exceeded"}
	f.e.OnCompletion(t1.Add(6*time.Millisecond), &f.comp)
	p2 := probe(t1.Add(50 * time.Millisecond))
	if p2 == nil || !p2.Reset {
		t.Fatalf("probe after a failed probe = %+v, want one with Reset", p2)
	}
}
