package experiments

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mptx-dev/mptx/experiments/interop"
)

// TestDefaultSuite runs the shipped default suite end to end in the
// simulator with the real driver and checks the orderings its README
// promises: in the incast, pacing never makes the switch send more PFC
// pauses (and with DCQCN, whose rate only pacing enforces, strictly
// fewer); in the ECMP case, 4 queue pairs per connection beat 1 on p99
// completion time. It also checks that the sweep writes every output.
func TestDefaultSuite(t *testing.T) {
	specs, err := LoadSuite(DefaultSuite)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rep, err := Sweep(context.Background(), specs, SweepOptions{Out: dir, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Report.Ran != rep.Runs || len(rep.Summaries) != 2 {
		t.Fatalf("ran %d of %d runs, %d summaries; want all, 2", rep.Report.Ran, rep.Runs, len(rep.Summaries))
	}
	sums := map[string]*ScenarioSummary{}
	for i := range rep.Summaries {
		s := &rep.Summaries[i]
		sums[s.Scenario] = s
		var table bytes.Buffer
		s.Table(&table)
		t.Logf("%s:\n%s", s.Scenario, table.String())
		for _, p := range s.Policies {
			if p.Completed != p.Flows || p.Flows == 0 {
				t.Errorf("%s %s: %d of %d flows completed", s.Scenario, p.Policy, p.Completed, p.Flows)
			}
		}
	}
	inc := sums["default-incast"]
	for _, c := range specs[1].Matrix.CC { // default-incast
		on, ok1 := inc.Policy(c + " pace")
		off, ok2 := inc.Policy(c + " nopace")
		if !ok1 || !ok2 {
			t.Fatalf("default-incast lacks %s pace/nopace rows", c)
		}
		if on.PFCPauses > off.PFCPauses {
			t.Errorf("default-incast %s: %v PFC pauses with pacing > %v without", c, on.PFCPauses, off.PFCPauses)
		}
	}
	on, _ := inc.Policy("dcqcn pace")
	off, _ := inc.Policy("dcqcn nopace")
	if on.PFCPauses >= off.PFCPauses {
		t.Errorf("default-incast dcqcn: %v PFC pauses with pacing, %v without; want fewer with pacing", on.PFCPauses, off.PFCPauses)
	}
	ecmp := sums["default-ecmp"]
	one, _ := ecmp.Policy("1qp")
	four, _ := ecmp.Policy("4qp")
	if !(four.FCTP99Us < one.FCTP99Us) {
		t.Errorf("default-ecmp: 4 QPs p99 %v µs, 1 QP p99 %v µs; want 4 QPs lower", four.FCTP99Us, one.FCTP99Us)
	}
	// Plots: every kind, for the two-policy scenario (drawing all of them
	// under the race detector takes long and proves nothing more).
	if _, err := WritePlots(filepath.Join(dir, "default-ecmp"), ecmp, rep.Report.Results); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"results.csv", "results.jsonl", "default-incast/summary.md", "default-ecmp/summary.md",
		"default-ecmp/fct-cdf.png", "default-ecmp/fct-cdf.svg", "default-ecmp/queue-compare.svg", "default-ecmp/throughput-4qp.png",
		"default-ecmp/queues-4qp.svg", "default-ecmp/rate-4qp.png", "default-ecmp/window-1qp.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty", f)
		}
	}
	// A second sweep over the same directory reuses every run.
	again, err := Sweep(context.Background(), specs, SweepOptions{Out: dir, Workers: 2})
	if err != nil || again.Report.Ran != 0 || again.Report.Reused != rep.Runs {
		t.Errorf("resumed sweep ran %d, reused %d (err %v); want everything reused", again.Report.Ran, again.Report.Reused, err)
	}
}

// TestSimRunDeterministic: the same run twice gives byte-identical results
// apart from wall time.
func TestSimRunDeterministic(t *testing.T) {
	s := mustParse(t, `name: det
topology: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}
workloads:
  - {kind: permutation, size: 1MiB, cross_leaf: true}
  - {kind: background, cdf: hadoop, load: 0.2, duration: 200us}
matrix: {cc: [dcqcn], paths: [4], path_policy: [p2c]}
sample: {interval: 20us}
`)
	run := Expand(s)[0]
	enc := func() []byte {
		res, err := SimRun(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		res.Row.WallMs = 0
		b, _ := json.Marshal(res)
		return b
	}
	a, b := enc(), enc()
	if !bytes.Equal(a, b) {
		t.Fatal("two runs of the same Run differ")
	}
	run.Seed = 2
	run.Hash = RunHash(s, run.Policy, 2)
	if c := enc(); bytes.Equal(a, c) {
		t.Error("seed 2 gives the same result as seed 1")
	}
}

// TestSimRunTriggersAndFCT runs an htsim matrix with a barrier trigger and
// an ns-3 flow file, and checks trigger ordering and fct.txt output.
func TestSimRunTriggersAndFCT(t *testing.T) {
	s := mustParse(t, `name: files
topology: {kind: ns3, file: topology.txt}
nic: {mtu: 1024}
workloads:
  - {kind: ns3-flows, file: flow.txt}
  - {kind: htsim, file: matrix.cm, start: 3s}
stop: {time: 4s}
`)
	res, err := SimRun(context.Background(), Expand(s)[0])
	if err != nil {
		t.Fatal(err)
	}
	if res.Row.Completed != 6 {
		t.Fatalf("%d of 6 flows completed: %+v", res.Row.Completed, res.Flows)
	}
	// The htsim flow 2->3 waits for the barrier of flows 0->2 and 1->2.
	var barrier, trig FlowResult
	for _, f := range res.Flows {
		switch {
		case f.StartNs >= 3e9 && f.Dst == 2:
			barrier.StartNs = max(barrier.StartNs, f.StartNs+f.FCTNs)
		case f.StartNs >= 3e9 && f.Src == 2 && f.Dst == 3:
			trig = f
		}
	}
	if trig.StartNs < barrier.StartNs || trig.StartNs > barrier.StartNs+1000 {
		t.Errorf("triggered flow started at %d ns, want right after the barrier's last flow ended at %d ns", trig.StartNs, barrier.StartNs)
	}
	recs := FCTRecords(res)
	var buf bytes.Buffer
	if err := interop.WriteFCT(&buf, recs); err != nil {
		t.Fatal(err)
	}
	back, err := interop.ParseFCT(&buf, "fct.txt")
	if err != nil || len(back) != 6 {
		t.Fatalf("fct.txt round trip: %d records, %v", len(back), err)
	}
	for i, r := range back {
		if r.Slowdown() < 1 {
			t.Errorf("fct.txt record %d: FCT %v below its standalone FCT %v", i, r.FCT, r.Standalone)
		}
		if i > 0 && r.Start+r.FCT < back[i-1].Start+back[i-1].FCT {
			t.Errorf("fct.txt records are not in completion order at %d", i)
		}
		if r.SPort < 10000 || (r.Start < 3e9 && r.DPort != 100) {
			t.Errorf("record %+v: want sport >= 10000 and ns-3's dport 100", r)
		}
	}
}

// TestSimRunFailureRecovers: a spine link dies and comes back; with 8 QPs
// per connection every transfer completes, moved off the dead path.
func TestSimRunFailureRecovers(t *testing.T) {
	s := mustParse(t, `name: fail
topology: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}
workloads:
  - {kind: permutation, size: 2MiB, cross_leaf: true}
  - {kind: failure, target: "link:leaf0-spine0", down: 50us, up: 5ms}
matrix: {paths: [8]}
stop: {time: 100ms}
`)
	res, err := SimRun(context.Background(), Expand(s)[0])
	if err != nil {
		t.Fatal(err)
	}
	if res.Row.Completed != res.Row.Flows || res.Row.Drops == 0 {
		t.Errorf("completed %d of %d with %d drops; want all completed and the failure to drop packets", res.Row.Completed, res.Row.Flows, res.Row.Drops)
	}
}
