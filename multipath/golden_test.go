package multipath_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/multipath/enginetest"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/golden-traces.txt from the current engine")

// traceRecorder writes every engine event to the trace beside the actions.
type traceRecorder struct{ w *bytes.Buffer }

func (r traceRecorder) Record(ev *multipath.Event) {
	fmt.Fprintf(r.w, "%d ev %v t%d c%d p%d a%d b%d sz%d rtt%d lat%d ecn%d win%d rate%d inf%d srtt%d %s\n",
		ev.Now, ev.Kind, ev.Transfer, ev.Chunk, ev.Path, ev.Attempt, ev.Bytes, ev.Size, ev.RTT, ev.Latency,
		ev.ECN, ev.Window, ev.Rate, ev.InFlight, ev.SRTT, ev.Reason)
}

// goldenScenario is one seeded engine run whose full action and event
// trace is pinned by TestGoldenTraces.
type goldenScenario struct {
	name  string
	cfg   multipath.Config
	rates []units.BitRate
	rtt   time.Duration
	// setup submits transfers and arms failures; it returns the ids Run
	// waits for.
	setup func(n *enginetest.Net) []multipath.TransferID
}

var gbps = units.Gbps

func at(d time.Duration) vtime.Time { return vtime.Epoch.Add(d) }

func goldenScenarios() []goldenScenario {
	four := []units.BitRate{40 * gbps, 20 * gbps, 10 * gbps, 10 * gbps}
	eq3 := []units.BitRate{10 * gbps, 10 * gbps, 10 * gbps}
	mixed := []units.BitRate{10 * gbps, 25 * gbps, 10 * gbps, 5 * gbps}
	one := func(size, cs units.Bytes) func(n *enginetest.Net) []multipath.TransferID {
		return func(n *enginetest.Net) []multipath.TransferID {
			n.Submit(1, size, cs)
			return []multipath.TransferID{1}
		}
	}
	return []goldenScenario{
		{"ca-fixed-4:2:1:1", multipath.Config{CC: "fixed"}, four, 10 * time.Microsecond, one(32*units.MiB, units.MiB)},
		{"ca-dcqcn-cnp", multipath.Config{CC: "dcqcn"}, []units.BitRate{10 * gbps, 10 * gbps, 10 * gbps, 10 * gbps}, 10 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				n.CNPEvery[0] = 64 * units.KiB
				n.ECNEvery[0] = 16 * units.KiB
				n.Submit(1, 16*units.MiB, units.MiB)
				return []multipath.TransferID{1}
			}},
		{"p2c-dcqcn-two", multipath.Config{CC: "dcqcn", Policy: multipath.PowerOfTwo, Seed: 1}, mixed, 7 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				n.CNPEvery[1] = 256 * units.KiB
				n.Submit(1, 24*units.MiB, 0)
				n.Submit(2, 8*units.MiB, 0)
				return []multipath.TransferID{1, 2}
			}},
		{"rr-swift", multipath.Config{CC: "swift", Policy: multipath.RoundRobin}, eq3, 10 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				n.Submit(1, 8*units.MiB, units.MiB)
				n.Submit(2, 8*units.MiB, 2*units.MiB)
				return []multipath.TransferID{1, 2}
			}},
		{"random-timely", multipath.Config{CC: "timely", Policy: multipath.Random, Seed: 7}, mixed, 10 * time.Microsecond, one(12*units.MiB, units.MiB)},
		{"minrtt-hpcc-hw", multipath.Config{CC: "hpcc", Policy: multipath.MinRTT, Pacing: multipath.PacingConfig{Hardware: true}}, four, 5 * time.Microsecond, one(16*units.MiB, 2*units.MiB)},
		{"ca-dcqcn-hw", multipath.Config{CC: "dcqcn", Pacing: multipath.PacingConfig{Hardware: true}}, eq3, 5 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				n.CNPEvery[2] = units.MiB
				n.Submit(1, 24*units.MiB, 4*units.MiB)
				return []multipath.TransferID{1}
			}},
		{"fixed-nopace-wholechunk", multipath.Config{CC: "fixed", Segment: 4 * units.MiB, Pacing: multipath.PacingConfig{Disabled: true}}, four, 10 * time.Microsecond, one(32*units.MiB, 4*units.MiB)},
		{"shared-port-dcqcn", multipath.Config{CC: "dcqcn", Paths: []multipath.PathConfig{
			{LineRate: 25 * gbps, BaseRTT: 8 * time.Microsecond, NIC: 0}, {LineRate: 25 * gbps, BaseRTT: 8 * time.Microsecond, NIC: 0},
			{LineRate: 25 * gbps, BaseRTT: 8 * time.Microsecond, NIC: 1}, {LineRate: 25 * gbps, BaseRTT: 8 * time.Microsecond, NIC: 1},
		}}, []units.BitRate{25 * gbps, 25 * gbps, 25 * gbps, 25 * gbps}, 8 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				n.CNPEvery[1] = 512 * units.KiB
				n.Submit(1, 16*units.MiB, units.MiB)
				return []multipath.TransferID{1}
			}},
		{"dead-path-midway", multipath.Config{CC: "fixed"}, eq3, 10 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				n.Hook = func() {
					if n.Now >= at(3*time.Millisecond) {
						n.Dead[1] = true
					}
				}
				n.Submit(7, 32*units.MiB, units.MiB)
				return []multipath.TransferID{7}
			}},
		{"all-dead-fails", multipath.Config{CC: "fixed", MaxProbeFailures: 2, QuarantineMax: 4 * time.Millisecond}, []units.BitRate{10 * gbps, 10 * gbps}, 10 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				n.Submit(3, 16*units.MiB, units.MiB)
				n.Dead[0], n.Dead[1] = true, true
				return []multipath.TransferID{3}
			}},
		{"dead-then-back", multipath.Config{CC: "fixed", MaxProbeFailures: 2, QuarantineMax: 4 * time.Millisecond}, []units.BitRate{10 * gbps, 10 * gbps}, 10 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				n.Dead[0] = true
				n.Hook = func() {
					if n.Now >= at(40*time.Millisecond) {
						n.Dead[0] = false
					}
				}
				n.Submit(1, 128*units.MiB, units.MiB)
				return []multipath.TransferID{1}
			}},
		{"stall-then-recover", multipath.Config{CC: "dcqcn", MinTimeout: time.Millisecond, QuarantineMin: time.Millisecond}, eq3, 10 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				n.Hook = func() {
					n.Stalled[0] = n.Now >= at(time.Millisecond) && n.Now < at(6*time.Millisecond)
				}
				n.Submit(1, 48*units.MiB, units.MiB)
				n.Submit(2, 8*units.MiB, units.MiB)
				return []multipath.TransferID{1, 2}
			}},
		{"pathdown-pathup", multipath.Config{CC: "swift"}, eq3, 10 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				state := 0
				n.Hook = func() {
					switch {
					case state == 0 && n.Now >= at(2*time.Millisecond):
						n.E.OnPathDown(n.Now, 2, "link-down")
						state = 1
					case state == 1 && n.Now >= at(5*time.Millisecond):
						n.E.OnPathUp(n.Now, 2)
						state = 2
					}
				}
				n.Submit(1, 40*units.MiB, units.MiB)
				return []multipath.TransferID{1}
			}},
		{"idle-probes", multipath.Config{CC: "fixed", ProbeInterval: 200 * time.Microsecond}, []units.BitRate{10 * gbps, 40 * gbps}, 10 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				n.Submit(1, 2*units.MiB, units.MiB)
				return []multipath.TransferID{1}
			}},
		// 400 Gb/s paths take the pacer's time-sized default segment
		// (512 KiB, halved to fit a two-BDP window at this RTT); one path
		// shares its NIC's port bucket with another.
		{"dcqcn-400g-default-segment", multipath.Config{CC: "dcqcn", Paths: []multipath.PathConfig{
			{LineRate: 400 * gbps, BaseRTT: 6 * time.Microsecond, NIC: 0}, {LineRate: 400 * gbps, BaseRTT: 6 * time.Microsecond, NIC: 0},
			{LineRate: 400 * gbps, BaseRTT: 6 * time.Microsecond, NIC: 1},
		}}, []units.BitRate{400 * gbps, 400 * gbps, 400 * gbps}, 6 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				n.CNPEvery[2] = 2 * units.MiB
				n.Submit(1, 96*units.MiB, 4*units.MiB)
				return []multipath.TransferID{1}
			}},
		// Priority classes: a bulk transfer on paths sharing two NICs, a
		// class-4 and a class-2 tensor arriving while it runs (chunks set
		// aside, the shallow queue), and a small guard.
		{"prio-preempt-guard", multipath.Config{CC: "dcqcn", PriorityGuard: 6 * units.MiB, Paths: []multipath.PathConfig{
			{LineRate: 100 * gbps, BaseRTT: 8 * time.Microsecond, NIC: 0}, {LineRate: 100 * gbps, BaseRTT: 8 * time.Microsecond, NIC: 0},
			{LineRate: 100 * gbps, BaseRTT: 8 * time.Microsecond, NIC: 1}, {LineRate: 100 * gbps, BaseRTT: 8 * time.Microsecond, NIC: 1},
		}}, []units.BitRate{50 * gbps, 50 * gbps, 50 * gbps, 50 * gbps}, 8 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				state := 0
				n.Hook = func() {
					switch {
					case state == 0 && n.Now >= at(700*time.Microsecond):
						n.SubmitSpec(multipath.TransferSpec{ID: 2, Size: 3 * units.MiB, Priority: 2})
						n.SubmitSpec(multipath.TransferSpec{ID: 3, Size: 16 * units.MiB, ChunkSize: units.MiB, Priority: 4})
						n.Step() // a driver acts on a Submit at once
						state = 1
					case state == 1 && n.Now >= at(1500*time.Microsecond):
						n.SubmitSpec(multipath.TransferSpec{ID: 4, Size: 2 * units.MiB, Priority: 7})
						n.Step()
						state = 2
					}
				}
				n.Submit(1, 48*units.MiB, 0)
				return []multipath.TransferID{1, 2, 3, 4}
			}},
		// Topology tiers: tier 0 (two paths), tier 1, tier 3; a tier-0
		// path dies and comes back while a bulk transfer spills, then a
		// small transfer stays on the tier-0 path that is up.
		{"tier-spill-failover", multipath.Config{CC: "fixed", TierSpill: 30 * time.Microsecond, MaxProbeFailures: 2, QuarantineMax: 2 * time.Millisecond, Paths: []multipath.PathConfig{
			{LineRate: 25 * gbps, BaseRTT: 10 * time.Microsecond, NIC: 0}, {LineRate: 25 * gbps, BaseRTT: 10 * time.Microsecond, NIC: 1},
			{LineRate: 25 * gbps, BaseRTT: 10 * time.Microsecond, NIC: 2, Tier: 1}, {LineRate: 10 * gbps, BaseRTT: 10 * time.Microsecond, NIC: 3, Tier: 3},
		}}, []units.BitRate{25 * gbps, 25 * gbps, 25 * gbps, 10 * gbps}, 10 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				state := 0
				n.Hook = func() {
					n.Dead[0] = n.Now >= at(2*time.Millisecond) && n.Now < at(9*time.Millisecond)
					if _, done := n.Done[1]; state == 0 && done {
						n.Submit(2, 2*units.MiB, 0)
						n.Step()
						state = 1
					}
				}
				n.Submit(1, 64*units.MiB, units.MiB)
				return []multipath.TransferID{1, 2}
			}},
		{"many-transfers", multipath.Config{CC: "fixed"}, four, 10 * time.Microsecond,
			func(n *enginetest.Net) []multipath.TransferID {
				var ids []multipath.TransferID
				for i := 1; i <= 20; i++ {
					n.Submit(multipath.TransferID(i), units.Bytes(i%3+1)*units.MiB+units.Bytes(i)*4096, 0)
					ids = append(ids, multipath.TransferID(i))
				}
				return ids
			}},
	}
}

// runGolden runs one scenario and returns its trace and a short summary.
func runGolden(t *testing.T, s goldenScenario) (trace []byte, summary string) {
	var buf bytes.Buffer
	cfg := s.cfg
	cfg.Recorder = traceRecorder{&buf}
	n := enginetest.New(t, cfg, s.rates, s.rtt)
	n.Trace = &buf
	ids := s.setup(n)
	n.Run(ids...)
	var sb strings.Builder
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		o := n.Done[id]
		res := "done"
		if o.Err != nil {
			res = "failed"
		}
		fmt.Fprintf(&sb, " t%d=%s@%v", id, res, o.At.Sub(vtime.Epoch))
	}
	fmt.Fprintf(&sb, " bytes=%v", n.Bytes)
	return buf.Bytes(), sb.String()
}

// TestGoldenTraces pins the engine's exact behaviour: every action and
// recorder event of each seeded scenario, hashed, against
// testdata/golden-traces.txt. A refactoring that must not change behaviour
// (the engine split) keeps every line; a deliberate change is reviewed with
// -rewrite and explained in its commit. On a mismatch the new trace is
// written to the system's temp directory for diffing against the old code's.
func TestGoldenTraces(t *testing.T) {
	path := filepath.Join("testdata", "golden-traces.txt")
	want := map[string]string{}
	if !*rewrite {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if name, rest, ok := strings.Cut(sc.Text(), " "); ok && !strings.HasPrefix(name, "#") {
				want[name] = rest
			}
		}
		f.Close()
	}
	var out strings.Builder
	out.WriteString("# scenario sha256(trace) lines summary — regenerate with: go test ./multipath -run TestGoldenTraces -args -rewrite\n")
	for _, s := range goldenScenarios() {
		trace, summary := runGolden(t, s)
		line := fmt.Sprintf("%x %d%s", sha256.Sum256(trace), bytes.Count(trace, []byte{'\n'}), summary)
		fmt.Fprintf(&out, "%s %s\n", s.name, line)
		if *rewrite {
			continue
		}
		if w, ok := want[s.name]; !ok {
			t.Errorf("%s: no golden trace (run with -rewrite)", s.name)
		} else if w != line {
			dump := filepath.Join(os.TempDir(), "mptx-golden-"+s.name+".trace")
			if err := os.WriteFile(dump, trace, 0o644); err != nil {
				dump = err.Error()
			}
			t.Errorf("%s: trace changed\n got  %s\n want %s\n(new trace in %s)", s.name, line, w, dump)
		}
	}
	if *rewrite {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
