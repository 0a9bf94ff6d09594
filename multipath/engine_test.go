package multipath_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/multipath/enginetest"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

func TestSplitFollowsRates(t *testing.T) {
	rates := []units.BitRate{40 * units.Gbps, 20 * units.Gbps, 10 * units.Gbps, 10 * units.Gbps}
	f := enginetest.New(t, multipath.Config{CC: "fixed"}, rates, 10*time.Microsecond)
	f.Submit(1, 256*units.MiB, units.MiB)
	f.Run(1)
	if err := f.Done[1].Err; err != nil {
		t.Fatal(err)
	}
	want := []float64{0.5, 0.25, 0.125, 0.125}
	got := f.Shares()
	for i := range want {
		if d := got[i]/want[i] - 1; d > 0.10 || d < -0.10 {
			t.Errorf("path %d share = %.3f, want %.3f ±10%%", i, got[i], want[i])
		}
	}
	// Ideal: 256 MiB at 80 Gb/s.
	ideal := (80 * units.Gbps).TxTime(256 * units.MiB)
	if el := f.Done[1].At.Sub(vtime.Epoch); el > ideal*110/100 {
		t.Errorf("completion %v, want within 10%% of the ideal %v", el, ideal)
	}
	t.Logf("shares %.3f, completion %v (ideal %v)", got, f.Done[1].At.Sub(vtime.Epoch), ideal)
}

func TestSlowPathAtMostFairShare(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps, 10 * units.Gbps, units.Gbps}
	for _, pol := range []multipath.Policy{multipath.CongestionAware} {
		f := enginetest.New(t, multipath.Config{CC: "fixed", Policy: pol}, rates, 10*time.Microsecond)
		f.Submit(1, 64*units.MiB, units.MiB)
		f.Run(1)
		got := f.Shares()
		fair := 1.0 / 31
		if got[3] > fair {
			t.Errorf("%v: slow path share = %.4f, want at most its fair share %.4f", pol, got[3], fair)
		}
		ideal := (31 * units.Gbps).TxTime(64 * units.MiB)
		if el := f.Done[1].At.Sub(vtime.Epoch); el > ideal*110/100 {
			t.Errorf("%v: completion %v, want within 10%% of ideal %v", pol, el, ideal)
		}
		t.Logf("%v: shares %.4f, completion %v (ideal %v)", pol, got, f.Done[1].At.Sub(vtime.Epoch), ideal)
	}
}

func TestDeadPathRequeues(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps, 10 * units.Gbps}
	var rec recorder
	f := enginetest.New(t, multipath.Config{CC: "fixed", Recorder: &rec}, rates, 10*time.Microsecond)
	plan := f.Submit(7, 32*units.MiB, units.MiB)
	// Kill path 1 a third of the way in.
	f.RunUntil(vtime.Epoch.Add(3 * time.Millisecond))
	f.Dead[1] = true
	f.Run(7)
	if err := f.Done[7].Err; err != nil {
		t.Fatalf("transfer failed: %v", err)
	}
	st := f.E.Stats(1)
	if st.State == multipath.PathUp || st.Requeues == 0 {
		t.Errorf("path 1 stats %+v: want it out of use with requeued chunks", st)
	}
	// Every chunk completed exactly once (by the engine's account).
	doneChunks := map[uint32]int{}
	for _, ev := range rec.events {
		if ev.Kind == multipath.EvChunkDone && ev.Transfer == 7 {
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
	f := enginetest.New(t, multipath.Config{CC: "fixed", MaxProbeFailures: 2, QuarantineMax: 4 * time.Millisecond}, rates, 10*time.Microsecond)
	f.Submit(3, 16*units.MiB, units.MiB)
	f.Dead[0], f.Dead[1] = true, true
	f.Run(3)
	err := f.Done[3].Err
	if !errors.Is(err, multipath.ErrNoPath) {
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
		f := enginetest.New(t, multipath.Config{CC: "dcqcn"}, rates, 10*time.Microsecond)
		if marks {
			f.CNPEvery[0] = 64 * units.KiB
		}
		f.Submit(1, 64*units.MiB, units.MiB)
		f.Run(1)
		return f.Shares()
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
		f := enginetest.New(t, multipath.Config{CC: "dcqcn", Policy: multipath.PowerOfTwo, Seed: seed}, rates, 7*time.Microsecond)
		var tr bytes.Buffer
		f.Trace = &tr
		f.CNPEvery[1] = 256 * units.KiB
		f.Submit(1, 24*units.MiB, 0)
		f.Submit(2, 8*units.MiB, 0)
		f.Run(1, 2)
		return tr.String()
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
	f := enginetest.New(t, multipath.Config{CC: "fixed", MaxTransfers: 1}, []units.BitRate{units.Gbps}, time.Microsecond)
	if _, _, err := f.E.Submit(f.Now, multipath.TransferSpec{ID: 1, Size: 0}); err == nil || !strings.Contains(err.Error(), "Size = 0") {
		t.Errorf("Submit(size 0) err = %v, want one naming Size", err)
	}
	f.Submit(1, units.MiB, 0)
	if _, _, err := f.E.Submit(f.Now, multipath.TransferSpec{ID: 1, Size: units.MiB}); !errors.Is(err, multipath.ErrDuplicateID) {
		t.Errorf("duplicate id err = %v, want ErrDuplicateID", err)
	}
	if _, _, err := f.E.Submit(f.Now, multipath.TransferSpec{ID: 2, Size: units.MiB}); !errors.Is(err, multipath.ErrTooManyTransfers) {
		t.Errorf("over MaxTransfers err = %v, want ErrTooManyTransfers", err)
	}
	if _, _, err := f.E.Submit(f.Now, multipath.TransferSpec{ID: 3, Size: units.MiB, ChunkSize: 5000}); err == nil {
		t.Errorf("bad chunk size accepted")
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  multipath.Config
		want string
	}{
		{multipath.Config{}, "Config.Paths has 0 paths"},
		{multipath.Config{Paths: []multipath.PathConfig{{LineRate: 0}}}, "Paths[0].LineRate = 0"},
		{multipath.Config{Paths: []multipath.PathConfig{{LineRate: units.Gbps}}, CC: "nope"}, "nope"},
		{multipath.Config{Paths: []multipath.PathConfig{{LineRate: units.Gbps}}, Policy: 99}, "Config.Policy"},
		{multipath.Config{Paths: []multipath.PathConfig{{LineRate: units.Gbps}}, QuarantineMin: time.Second, QuarantineMax: time.Millisecond}, "QuarantineMin"},
	} {
		_, err := multipath.New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("multipath.New(%+v) err = %v, want it to mention %q", tc.cfg, err, tc.want)
		}
	}
}

func TestFairnessBetweenTransfers(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
	f := enginetest.New(t, multipath.Config{CC: "fixed"}, rates, 10*time.Microsecond)
	f.Submit(1, 32*units.MiB, units.MiB)
	f.Submit(2, 32*units.MiB, units.MiB)
	f.Run(1, 2)
	a, b := f.Done[1].At.Sub(vtime.Epoch), f.Done[2].At.Sub(vtime.Epoch)
	if r := float64(a) / float64(b); r < 0.9 || r > 1.1 {
		t.Errorf("equal transfers finished at %v and %v; round-robin sharing should finish them within 10%%", a, b)
	}
}

func TestPolicies(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps, 10 * units.Gbps}
	for _, name := range multipath.PolicyNames() {
		pol, err := multipath.ParsePolicy(name)
		if err != nil {
			t.Fatal(err)
		}
		f := enginetest.New(t, multipath.Config{CC: "fixed", Policy: pol, Seed: 3}, rates, 10*time.Microsecond)
		f.Submit(1, 16*units.MiB, units.MiB)
		f.Run(1)
		if f.Done[1].Err != nil {
			t.Errorf("%s: %v", name, f.Done[1].Err)
		}
		for i, b := range f.Bytes {
			if b == 0 {
				t.Errorf("%s: path %d carried nothing on equal paths", name, i)
			}
		}
	}
	if _, err := multipath.ParsePolicy("fastest"); err == nil || !strings.Contains(err.Error(), "congestion-aware") {
		t.Errorf("multipath.ParsePolicy(bad) err = %v, want the valid names listed", err)
	}
}

type recorder struct{ events []multipath.Event }

func (r *recorder) Record(ev *multipath.Event) { r.events = append(r.events, *ev) }

func TestHardwarePacingSetsRates(t *testing.T) {
	acts := make([]multipath.Action, 64)
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
	f := enginetest.New(t, multipath.Config{CC: "dcqcn", Pacing: multipath.PacingConfig{Hardware: true}}, rates, 10*time.Microsecond)
	f.Trace = &bytes.Buffer{}
	var setRates []multipath.Action
	f.Submit(1, 16*units.MiB, 4*units.MiB)
	n := f.E.Actions(f.Now, acts)
	for _, a := range acts[:n] {
		switch a.Kind {
		case multipath.ActSetRate:
			setRates = append(setRates, a)
		case multipath.ActPost:
			if a.Len != 4*units.MiB {
				t.Errorf("hardware pacing posted a %v work request, want whole 4MiB chunks", a.Len)
			}
		}
	}
	if len(setRates) != 2 || setRates[0].Rate != 10*units.Gbps {
		t.Fatalf("initial multipath.ActSetRate actions = %+v, want one per path at line rate", setRates)
	}
	f.E.OnCounters(f.Now, 0, 0, 0)
	f.E.OnCounters(f.Now.Add(time.Microsecond), 0, 0, 3)
	n = f.E.Actions(f.Now.Add(time.Microsecond), acts)
	got := false
	for _, a := range acts[:n] {
		if a.Kind == multipath.ActSetRate && a.Path == 0 && a.Rate < 10*units.Gbps {
			got = true
		}
	}
	if !got {
		t.Errorf("no lower multipath.ActSetRate for path 0 after CNPs: %+v", acts[:n])
	}
}

func TestProbeAfterQPErrorAsksForReset(t *testing.T) {
	acts := make([]multipath.Action, 64)
	var comp multipath.Completion
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
	f := enginetest.New(t, multipath.Config{CC: "fixed", QuarantineMin: time.Millisecond}, rates, 10*time.Microsecond)
	f.Submit(1, 8*units.MiB, units.MiB)
	n := f.E.Actions(f.Now, acts)
	var id uint64
	for _, a := range acts[:n] {
		if a.Kind == multipath.ActPost && a.Path == 0 {
			id = a.WorkID
			break
		}
	}
	comp = multipath.Completion{WorkID: id, Reason: "retry-exceeded"}
	f.E.OnCompletion(f.Now, &comp)
	if st := f.E.Stats(0); st.State != multipath.PathQuarantined {
		t.Fatalf("path 0 after an error completion: %v, want quarantined", st.State)
	}
	later := f.Now.Add(2 * time.Millisecond)
	n = f.E.Actions(later, acts)
	var probe *multipath.Action
	for i := range acts[:n] {
		if acts[i].Kind == multipath.ActProbe && acts[i].Path == 0 {
			probe = &acts[i]
		}
	}
	if probe == nil || !probe.Reset {
		t.Fatalf("probe after a QP error = %+v, want one with Reset set", probe)
	}
	comp = multipath.Completion{WorkID: probe.WorkID, OK: true}
	f.E.OnCompletion(later.Add(20*time.Microsecond), &comp)
	if st := f.E.Stats(0); st.State != multipath.PathUp {
		t.Fatalf("path 0 after a successful probe: %v, want up", st.State)
	}
}

func TestDeadPathIsStillProbedAndComesBack(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
	f := enginetest.New(t, multipath.Config{CC: "fixed", MaxProbeFailures: 2, QuarantineMax: 4 * time.Millisecond}, rates, 10*time.Microsecond)
	f.Dead[0] = true
	sawDead := false
	var back vtime.Time
	f.Hook = func() {
		st := f.E.Stats(0)
		if st.State == multipath.PathDead && !sawDead {
			sawDead = true
			back = f.Now.Add(10 * time.Millisecond)
		}
		if sawDead && f.Now >= back {
			f.Dead[0] = false
		}
	}
	f.Submit(1, 256*units.MiB, units.MiB)
	f.Run(1)
	if !sawDead {
		t.Fatal("path 0 never became dead")
	}
	st := f.E.Stats(0)
	if st.State != multipath.PathUp || f.Bytes[0] == 0 {
		t.Errorf("path 0 after its link came back: %v with %v carried; want it probed back up and carrying chunks", st.State, f.Bytes[0])
	}
	if f.Done[1].Err != nil {
		t.Errorf("transfer: %v", f.Done[1].Err)
	}
}

// TestStallFencesBeforeProbing: a stalled path's queue pair is not in the
// error state, so nothing flushes its outstanding work; the engine asks the
// driver to reset it (ActReset) before anything else happens on the path.
// After a good reset the probe needs no reset; after a failed one it does,
// and so does the probe after a failed probe.
func TestStallFencesBeforeProbing(t *testing.T) {
	for _, resetOK := range []bool{true, false} {
		acts := make([]multipath.Action, 64)
		var comp multipath.Completion
		rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
		f := enginetest.New(t, multipath.Config{CC: "fixed", MinTimeout: time.Millisecond, QuarantineMin: time.Millisecond}, rates, 10*time.Microsecond)
		f.Submit(1, 8*units.MiB, units.MiB)
		f.E.Actions(f.Now, acts)
		// Nothing completes: path 0 stalls (no QP error yet).
		t1 := f.Now.Add(20 * time.Millisecond)
		f.E.OnTimer(t1)
		if st := f.E.Stats(0); st.State != multipath.PathQuarantined || st.Reason != "stalled" {
			t.Fatalf("path 0 = %v (%s), want quarantined (stalled)", st.State, st.Reason)
		}
		find := func(at vtime.Time, kind multipath.ActionKind) *multipath.Action {
			n := f.E.Actions(at, acts)
			for i := range acts[:n] {
				if acts[i].Kind == kind && acts[i].Path == 0 {
					return &acts[i]
				}
			}
			return nil
		}
		if r := find(t1, multipath.ActReset); r == nil {
			t.Fatalf("no ActReset for path 0 after a stall with work outstanding")
		}
		if p := find(t1.Add(5*time.Millisecond), multipath.ActProbe); p != nil {
			t.Fatalf("probe %+v while the fence is unanswered; want none", p)
		}
		f.E.OnReset(t1.Add(5*time.Millisecond), 0, resetOK)
		p1 := find(t1.Add(5*time.Millisecond), multipath.ActProbe)
		if p1 == nil || p1.Reset == resetOK {
			t.Fatalf("reset ok %v: first probe after the fence = %+v, want Reset %v", resetOK, p1, !resetOK)
		}
		comp = multipath.Completion{WorkID: p1.WorkID, Reason: "retry-exceeded"}
		f.E.OnCompletion(t1.Add(6*time.Millisecond), &comp)
		p2 := find(t1.Add(50*time.Millisecond), multipath.ActProbe)
		if p2 == nil || !p2.Reset {
			t.Fatalf("probe after a failed probe = %+v, want one with Reset", p2)
		}
	}
}

// TestNoDoneWhileAbandonedWorkOutstanding is the engine's half of the
// integrity rule: path 0 is 30 ms slow, so its first chunks are declared
// stalled (MinTimeout 1 ms) and finish on path 1; the transfer may be
// reported done only once path 0's abandoned work requests can no longer
// land: when they complete (a driver without resets), or when the queue
// pair was reset (their late completions are then stale).
func TestNoDoneWhileAbandonedWorkOutstanding(t *testing.T) {
	for _, noReset := range []bool{true, false} {
		rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
		f := enginetest.New(t, multipath.Config{CC: "fixed", MinTimeout: time.Millisecond}, rates, 10*time.Microsecond)
		f.Delay[0] = 30 * time.Millisecond
		f.NoReset = noReset
		var lastPath0 vtime.Time // latest completion time of work posted on path 0
		var resetAt vtime.Time
		f.Hook = func() {
			if f.Outstanding(0) > 0 {
				lastPath0 = f.Now
			}
			if f.Resets > 0 && resetAt == 0 {
				resetAt = f.Now
			}
		}
		f.Submit(1, 8*units.MiB, units.MiB)
		f.Run(1)
		o := f.Done[1]
		if o.Err != nil {
			t.Fatalf("noReset %v: %v", noReset, o.Err)
		}
		st := f.E.Stats(0)
		if st.Requeues == 0 {
			t.Fatalf("noReset %v: path 0 requeued nothing (%+v); the scenario needs a stall", noReset, st)
		}
		if noReset {
			if o.At < lastPath0 || o.At < vtime.Epoch.Add(30*time.Millisecond) {
				t.Errorf("done at %v while path 0 had work outstanding until %v", o.At.Sub(vtime.Epoch), lastPath0.Sub(vtime.Epoch))
			}
			continue
		}
		if o.At > vtime.Epoch.Add(20*time.Millisecond) {
			t.Errorf("with resets: done at %v, want before path 0's 30 ms completions (the fence wrote them off)", o.At.Sub(vtime.Epoch))
		}
		if resetAt == 0 || resetAt > o.At {
			t.Errorf("with resets: reset at %v, done at %v; want the reset first", resetAt.Sub(vtime.Epoch), o.At.Sub(vtime.Epoch))
		}
		t.Logf("fenced: done at %v, stale completions so far %d", o.At.Sub(vtime.Epoch), f.E.Stale())
	}
}

// TestCancel: a canceled transfer posts nothing more, the other transfer
// finishes, and the canceled one is reported failed with ErrCanceled only
// after its posted work completed.
func TestCancel(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
	f := enginetest.New(t, multipath.Config{CC: "fixed"}, rates, 10*time.Microsecond)
	var tr bytes.Buffer
	f.Trace = &tr
	f.Submit(1, 16*units.MiB, units.MiB)
	f.Submit(2, 16*units.MiB, units.MiB)
	f.RunUntil(vtime.Epoch.Add(time.Millisecond))
	cancelAt := f.Now
	if err := f.E.Cancel(f.Now, 1, errors.New("caller gave up")); err != nil {
		t.Fatal(err)
	}
	if err := f.E.Cancel(f.Now, 1, nil); !errors.Is(err, multipath.ErrUnknownTransfer) {
		t.Errorf("second Cancel = %v, want ErrUnknownTransfer", err)
	}
	posted := tr.Len()
	f.Run(1, 2)
	if err := f.Done[1].Err; !errors.Is(err, multipath.ErrCanceled) || !strings.Contains(err.Error(), "caller gave up") {
		t.Errorf("transfer 1 ended with %v, want ErrCanceled wrapping the cause", err)
	}
	if f.Done[2].Err != nil {
		t.Errorf("transfer 2: %v", f.Done[2].Err)
	}
	if f.Done[1].At == cancelAt {
		t.Errorf("transfer 1 reported at the cancel itself, with its work still in flight")
	}
	for _, line := range strings.Split(tr.String()[posted:], "\n") {
		if strings.Contains(line, " post ") && strings.Contains(line, " t1 ") {
			t.Errorf("posted after the cancel: %s", line)
		}
	}
}

// TestHoldAndStart: a held transfer has its tag and plan but posts nothing
// until Start, whose remote offset its posts then carry; canceling a held
// transfer reports it at once (nothing was posted).
func TestHoldAndStart(t *testing.T) {
	rates := []units.BitRate{10 * units.Gbps, 10 * units.Gbps}
	f := enginetest.New(t, multipath.Config{CC: "fixed"}, rates, 10*time.Microsecond)
	var tr bytes.Buffer
	f.Trace = &tr
	tag1, plan1, err := f.E.Submit(f.Now, multipath.TransferSpec{ID: 1, Size: 4 * units.MiB, ChunkSize: units.MiB, Hold: true})
	if err != nil || plan1.Count != 4 {
		t.Fatalf("Submit(Hold) = %d, %v, %v", tag1, plan1, err)
	}
	if _, _, err := f.E.Submit(f.Now, multipath.TransferSpec{ID: 2, Size: units.MiB, Hold: true}); err != nil {
		t.Fatal(err)
	}
	f.Step()
	if tr.Len() != 0 || f.E.Live() != 2 {
		t.Fatalf("held transfers posted (%q) or are not live (%d)", tr.String(), f.E.Live())
	}
	if err := f.E.Cancel(f.Now, 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.E.Start(f.Now, 1, 64*units.MiB); err != nil {
		t.Fatal(err)
	}
	if err := f.E.Start(f.Now, 1, 0); !errors.Is(err, multipath.ErrUnknownTransfer) {
		t.Errorf("second Start = %v, want ErrUnknownTransfer", err)
	}
	acts := make([]multipath.Action, 64)
	n := f.E.Actions(f.Now, acts)
	var failed2, posted bool
	for _, a := range acts[:n] {
		switch {
		case a.Kind == multipath.ActFailed && a.Transfer == 2:
			failed2 = errors.Is(a.Err, multipath.ErrCanceled)
		case a.Kind == multipath.ActPost:
			posted = true
			if a.Remote != 64*units.MiB+a.Offset {
				t.Errorf("post %+v: Remote %v, want Start's 64MiB + offset", a, a.Remote)
			}
		}
	}
	if !failed2 || !posted {
		t.Errorf("after Cancel(2) and Start(1): failed2 %v, posted %v; actions %+v", failed2, posted, acts[:n])
	}
}
