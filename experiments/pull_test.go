package experiments

import (
	"context"
	"strings"
	"testing"
)

// pullRuns loads the shipped pull suite's spec name and returns its runs
// for the given policy labels and seed 1.
func pullRuns(t *testing.T, name string, labels ...string) map[string]*Result {
	t.Helper()
	specs, err := LoadSuite("pull")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Result{}
	for _, s := range specs {
		if s.Name != name {
			continue
		}
		for _, run := range Expand(s) {
			label := run.Label()
			if len(run.Spec.Params) > 0 {
				label = run.Spec.Params[0].Value + " " + label
			}
			want := false
			for _, l := range labels {
				want = want || l == label
			}
			if !want || run.Seed != 1 {
				continue
			}
			res, err := SimRun(context.Background(), run)
			if err != nil {
				t.Fatalf("%s: %v", label, err)
			}
			out[label] = res
		}
	}
	if len(out) != len(labels) {
		t.Fatalf("suite pull/%s: ran %d of the policies %v", name, len(out), labels)
	}
	return out
}

// TestPullIncast is the must-show: in the 16:1 pull incast, requester-side
// windows keep the switch from pausing at all while the requester's link
// stays above 95 Gb/s, where requests issued without congestion control
// pause the fabric as a push incast does.
func TestPullIncast(t *testing.T) {
	res := pullRuns(t, "incast-pull", "swift pace", "fixed pace", "dcqcn pace", "none pace")
	for label, r := range res {
		row := r.Row
		t.Logf("%s: %d/%d done, p99 %.0f µs, goodput %.1f Gb/s, %d PFC pauses, %d ECN marks", label, row.Completed, row.Flows, row.FCTP99Us, row.GoodputGbps, row.PFCPauses, row.ECNMarks)
		if row.Completed != row.Flows || row.Flows != 16 || row.Drops != 0 {
			t.Errorf("%s: %d of %d flows completed, %d drops", label, row.Completed, row.Flows, row.Drops)
		}
	}
	for _, l := range []string{"swift pace", "fixed pace"} {
		if r := res[l].Row; r.PFCPauses != 0 || r.GoodputGbps < 95 {
			t.Errorf("%s: %d PFC pauses, %.1f Gb/s; want none at >= 95 Gb/s", l, r.PFCPauses, r.GoodputGbps)
		}
	}
	none, dcqcn := res["none pace"].Row, res["dcqcn pace"].Row
	if none.PFCPauses == 0 {
		t.Errorf("unpaced pulls made no PFC pauses: the scenario lost its point")
	}
	if dcqcn.PFCPauses*10 > none.PFCPauses {
		t.Errorf("paced DCQCN pulls made %d PFC pauses, more than a tenth of the unpaced %d", dcqcn.PFCPauses, none.PFCPauses)
	}
}

// TestPullKVCache: the kvcache pull scenario completes every KV transfer
// and background flow pushed and pulled, and a pulled KV transfer moves
// its bytes from the prefill host to the decode host as a push does (the
// same flows, the same sizes).
func TestPullKVCache(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the kvcache scenario twice (a few seconds): not in -short")
	}
	res := pullRuns(t, "kvcache-pull", "false dcqcn 4qp", "true dcqcn 4qp")
	push, pull := res["false dcqcn 4qp"], res["true dcqcn 4qp"]
	for label, r := range res {
		if r.Row.Completed != r.Row.Flows || r.Row.BgCompleted != r.Row.BgFlows || r.Row.Drops != 0 {
			t.Errorf("%s: %d/%d KV, %d/%d background completed, %d drops", label, r.Row.Completed, r.Row.Flows, r.Row.BgCompleted, r.Row.BgFlows, r.Row.Drops)
		}
		t.Logf("%s: KV p50 %.0f p99 %.0f µs, bg p99 %.0f µs, %d pauses", label, r.Row.FCTP50Us, r.Row.FCTP99Us, r.Row.BgFCTP99Us, r.Row.PFCPauses)
	}
	if len(push.Flows) != len(pull.Flows) {
		t.Fatalf("push has %d flows, pull %d; want the same load", len(push.Flows), len(pull.Flows))
	}
	for i := range push.Flows {
		a, b := push.Flows[i], pull.Flows[i]
		if a.Src != b.Src || a.Dst != b.Dst || a.Size != b.Size || a.Class != b.Class {
			t.Fatalf("flow %d: push %+v, pull %+v; want the same flow", i, a, b)
		}
	}
}

// TestPullOnlyOnTensorWorkloads: pull is a field of the tensor workloads,
// refused on background traffic.
func TestPullOnlyOnTensorWorkloads(t *testing.T) {
	spec := `name: x
topology: {kind: star, hosts: 4}
workloads:
  - {kind: background, cdf: websearch, load: 0.3, duration: 1ms, pull: true}
matrix: {cc: [dcqcn]}
seeds: [1]
`
	if _, err := Parse("x.yaml", []byte(spec), nil); err == nil || !strings.Contains(err.Error(), "pull") {
		t.Errorf("pull on a background workload: %v; want an error naming the field", err)
	}
	ok := strings.Replace(spec, "{kind: background, cdf: websearch, load: 0.3, duration: 1ms, pull: true}", "{kind: incast, senders: \"1-3\", receiver: 0, size: 1MiB, pull: true}", 1)
	s, err := Parse("x.yaml", []byte(ok), nil)
	if err != nil {
		t.Fatal(err)
	}
	push, err := Parse("x.yaml", []byte(strings.Replace(ok, ", pull: true", "", 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := Expand(s)[0].Hash, Expand(push)[0].Hash; a == b {
		t.Errorf("pull and push runs share the hash %s", a)
	}
}
