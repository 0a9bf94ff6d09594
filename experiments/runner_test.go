package experiments

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
)

const runnerSpec = `name: fake
description: a fake scenario for runner tests
topology: {kind: star, hosts: 4}
workloads: [{kind: incast, senders: "1-3", receiver: 0, size: 1MiB}]
matrix: {cc: [dcqcn, hpcc], paths: [1, 4]}
seeds: [1, 2, 3]
`

// fakeRun is a deterministic RunFunc: one flow whose completion time
// depends on the policy and seed only.
func fakeRun(calls *atomic.Int64) RunFunc {
	return func(ctx context.Context, r Run) (*Result, error) {
		calls.Add(1)
		row := NewRow(r)
		fct := int64(1000*r.Policy.Paths) + r.Seed*7
		if r.Policy.CC == "hpcc" {
			fct /= 2
		}
		flows := []FlowResult{{ID: 1, Src: 1, Dst: 0, Size: 1 << 20, Class: ClassTensor, FCTNs: fct, IdealNs: 500, Done: true}}
		row.Summarise(flows)
		row.PFCPauses = uint64(r.Seed)
		return &Result{Row: row, Description: r.Spec.Description, Flows: flows}, nil
	}
}

func stripWall(rs []*Result) []Row {
	rows := Rows(rs)
	for i := range rows {
		rows[i].WallMs = 0
	}
	return rows
}

func TestRunnerResumeAndForce(t *testing.T) {
	s := mustParse(t, runnerSpec)
	runs := Expand(s)
	if len(runs) != 12 {
		t.Fatalf("Expand = %d runs, want 12", len(runs))
	}
	dir := t.TempDir()
	var calls atomic.Int64
	r := &Runner{Run: fakeRun(&calls), Workers: 3, Dir: dir}
	rep, err := r.Execute(context.Background(), runs)
	if err != nil || rep.Ran != 12 || rep.Reused != 0 || len(rep.Failed) != 0 {
		t.Fatalf("first Execute: ran %d reused %d failed %v err %v; want 12 ran", rep.Ran, rep.Reused, rep.Failed, err)
	}
	for i, res := range rep.Results {
		if res.Row.Hash != runs[i].Hash {
			t.Fatalf("result %d is run %s, want %s (results keep run order)", i, res.Row.Hash, runs[i].Hash)
		}
	}
	rep2, err := r.Execute(context.Background(), runs)
	if err != nil || rep2.Ran != 0 || rep2.Reused != 12 || calls.Load() != 12 {
		t.Fatalf("second Execute: ran %d reused %d calls %d err %v; want everything reused", rep2.Ran, rep2.Reused, calls.Load(), err)
	}
	if !reflect.DeepEqual(stripWall(rep.Results), stripWall(rep2.Results)) {
		t.Error("reused results differ from the original ones")
	}
	// A half-written file is not trusted.
	if err := os.WriteFile(RunPath(dir, runs[5].Hash), []byte(`{"row":`), 0o644); err != nil {
		t.Fatal(err)
	}
	rep3, _ := r.Execute(context.Background(), runs)
	if rep3.Ran != 1 || rep3.Reused != 11 {
		t.Errorf("after corrupting one result: ran %d reused %d, want 1 and 11", rep3.Ran, rep3.Reused)
	}
	r.Force = true
	rep4, _ := r.Execute(context.Background(), runs)
	if rep4.Ran != 12 {
		t.Errorf("Force: ran %d, want 12", rep4.Ran)
	}
}

func TestShardsAndMerge(t *testing.T) {
	s := mustParse(t, runnerSpec)
	runs := Expand(s)
	var calls atomic.Int64
	whole, err := (&Runner{Run: fakeRun(&calls), Workers: 2}).Execute(context.Background(), runs)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	seen := map[string]int{}
	for i := range 5 {
		dir := t.TempDir()
		dirs = append(dirs, dir)
		rep, err := (&Runner{Run: fakeRun(&calls), Workers: 2, Dir: dir, Shard: Shard{i, 5}}).Execute(context.Background(), runs)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range rep.Results {
			seen[res.Row.Hash]++
		}
	}
	if len(seen) != len(runs) {
		t.Fatalf("shards covered %d runs, want %d", len(seen), len(runs))
	}
	for h, n := range seen {
		if n != 1 {
			t.Errorf("run %s ran in %d shards, want 1", h, n)
		}
	}
	merged, err := LoadResults(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	SortResults(whole.Results)
	if !reflect.DeepEqual(stripWall(merged), stripWall(whole.Results)) {
		t.Error("merged shards differ from the unsharded sweep")
	}
	// Merging a directory twice keeps one copy of each run.
	again, _ := LoadResults(append(dirs, dirs[0])...)
	if len(again) != len(runs) {
		t.Errorf("LoadResults with a repeated dir = %d results, want %d", len(again), len(runs))
	}
}

func TestRunnerFailures(t *testing.T) {
	s := mustParse(t, runnerSpec)
	runs := Expand(s)
	var calls atomic.Int64
	ok := fakeRun(&calls)
	f := func(ctx context.Context, r Run) (*Result, error) {
		switch r.Index {
		case 2:
			panic("boom")
		case 3:
			return nil, errors.New("simulator says no")
		}
		return ok(ctx, r)
	}
	dir := t.TempDir()
	rep, err := (&Runner{Run: f, Workers: 4, Dir: dir}).Execute(context.Background(), runs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ran != 10 || len(rep.Failed) != 2 || len(rep.Results) != 10 {
		t.Fatalf("ran %d, failed %d, results %d; want 10, 2, 10", rep.Ran, len(rep.Failed), len(rep.Results))
	}
	msgs := rep.Failed[0].Error() + rep.Failed[1].Error()
	if !strings.Contains(msgs, "panic: boom") || !strings.Contains(msgs, "simulator says no") {
		t.Errorf("failures %q: want the panic and the error", msgs)
	}
	if _, err := os.Stat(RunPath(dir, runs[2].Hash)); err == nil {
		t.Error("a failed run was persisted")
	}
}

func TestRunnerCancel(t *testing.T) {
	s := mustParse(t, runnerSpec)
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	f := func(_ context.Context, r Run) (*Result, error) {
		if n.Add(1) == 2 {
			cancel()
		}
		return fakeRun(new(atomic.Int64))(ctx, r)
	}
	rep, err := (&Runner{Run: f, Workers: 1}).Execute(ctx, Expand(s))
	if !errors.Is(err, context.Canceled) || rep.Ran >= 12 {
		t.Errorf("cancelled sweep: ran %d, err %v; want fewer than 12 runs and context.Canceled", rep.Ran, err)
	}
}

func TestParseShard(t *testing.T) {
	if s, err := ParseShard("2/5"); err != nil || s != (Shard{2, 5}) {
		t.Errorf("ParseShard(2/5) = %v, %v", s, err)
	}
	for _, bad := range []string{"5/5", "-1/3", "1", "a/b", "0/0"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) succeeded", bad)
		}
	}
}

func TestRunHashStability(t *testing.T) {
	a := mustParse(t, runnerSpec)
	// Reordering, describing and growing the matrix keeps each run's hash.
	b := mustParse(t, strings.Replace(strings.Replace(runnerSpec, "cc: [dcqcn, hpcc]", "cc: [hpcc, dcqcn, swift]", 1),
		"a fake scenario", "another description", 1))
	hb := map[string]bool{}
	for _, r := range Expand(b) {
		hb[r.Hash] = true
	}
	for _, r := range Expand(a) {
		if !hb[r.Hash] {
			t.Errorf("run %s (%s seed %d) lost its hash when the matrix grew", r.Hash, r.Policy.Key(), r.Seed)
		}
	}
	// Changing the scenario changes every hash.
	c := mustParse(t, strings.Replace(runnerSpec, "size: 1MiB", "size: 2MiB", 1))
	for _, r := range Expand(c) {
		if hb[r.Hash] {
			t.Errorf("run %s kept its hash after the workload changed", r.Hash)
		}
	}
}

func TestWriteOutputs(t *testing.T) {
	s := mustParse(t, runnerSpec)
	var calls atomic.Int64
	rep, err := (&Runner{Run: fakeRun(&calls)}).Execute(context.Background(), Expand(s))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		r.Row.WallMs = 0
	}
	dir := t.TempDir()
	sums, err := WriteOutputs(dir, rep.Results, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || len(sums[0].Policies) != 4 || sums[0].Seeds != 3 {
		t.Fatalf("summaries %+v: want one scenario, 4 policies, 3 seeds", sums)
	}
	// Per-seed values, then mean and Student-t interval over the seeds:
	// hpcc 1qp FCTs are (1000+7k)/2 ns for seeds k = 1..3 (503, 507, 510),
	// and seed k makes k pauses: mean 2, sd 1, half width
	// t(0.975, 2)·1/√3 = 4.303/1.7321 = 2.4843.
	p, ok := sums[0].Policy("hpcc 1qp")
	if !ok || math.Abs(p.FCTP50Us-(0.503+0.507+0.510)/3) > 1e-9 || p.PFCPauses != 2 {
		t.Errorf("hpcc 1qp summary %+v: want p50 mean 0.50667 µs and mean 2 pauses", p)
	}
	if st := p.Stat("pfc_pause_frames"); st.N != 3 || math.Abs(st.HalfWidth()-2.4843) > 1e-4 || st.SD != 1 {
		t.Errorf("pauses Stat = %+v, want n 3, sd 1, half width 2.4843", st)
	}
	if best, _ := sums[0].Best(); best.Policy != "hpcc 1qp" {
		t.Errorf("Best = %q, want hpcc 1qp", best.Policy)
	}
	for _, f := range []string{"results.jsonl", "results.csv", "fake/summary.md", "fake/fct-cdf.png", "fake/fct-cdf.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "fake/summary.md"))
	for _, want := range []string{"# fake", "| dcqcn 4qp |", "Best: **hpcc 1qp**", "(fct-cdf.png)"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("summary.md lacks %q:\n%s", want, md)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "results.csv"))
	if lines := strings.Count(string(csv), "\n"); lines != 13 || !strings.HasPrefix(string(csv), strings.Join(CSVHeader(nil), ",")) {
		t.Errorf("results.csv has %d lines (want header + 12) or a wrong header", lines)
	}
	// Same results, same bytes.
	dir2 := t.TempDir()
	if _, err := WriteOutputs(dir2, rep.Results, false); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"results.jsonl", "results.csv"} {
		a, _ := os.ReadFile(filepath.Join(dir, f))
		b, _ := os.ReadFile(filepath.Join(dir2, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two writes of the same results", f)
		}
	}
}

// TestFiguresOddSeries draws figures from results a hostile or broken
// file could hold (one point, huge and negative values, equal times, no
// flows) without panicking.
func TestFiguresOddSeries(t *testing.T) {
	s := mustParse(t, runnerSpec)
	run := Expand(s)[0]
	odd := [][]Trace{
		{{Name: "one", T: []float64{5}, V: []float64{1}}},
		{{Name: "huge", T: []float64{0, 1e300}, V: []float64{-1e300, 1e300}}},
		{{Name: "flat", T: []float64{3, 3, 3}, V: []float64{0, 0, 0}}},
		{{Name: "neg", T: []float64{-10, -5, 0}, V: []float64{-1, -2, -3}}},
		{},
	}
	for i, tr := range odd {
		row := NewRow(run)
		flows := []FlowResult{{ID: 1, Class: ClassTensor, FCTNs: int64(1e18), IdealNs: 1, Done: i%2 == 0}}
		row.Summarise(flows)
		res := &Result{Row: row, Flows: flows, Series: &Series{Throughput: tr, Queues: tr, Rate: tr, Window: tr}}
		sums := Summarise([]*Result{res})
		if _, err := Figures(&sums[0], []*Result{res}); err != nil {
			t.Logf("case %d: %v", i, err)
		}
	}
}
