package experiments

import (
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
)

// mustParse parses an inline spec (relative files resolve in testdata/specs).
func mustParse(t testing.TB, yaml string) *Spec {
	t.Helper()
	s, err := Parse("testdata/specs/inline.yaml", []byte(yaml), os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGraphShapes(t *testing.T) {
	for _, tc := range []struct {
		topo            string
		hosts, links    int
		nics            int
		switches        []string
		groupOfLastHost int
	}{
		{"{kind: star, hosts: 3}", 3, 3, 1, []string{"sw"}, -1},
		{"{kind: dumbbell, hosts: 2}", 4, 5, 1, []string{"left", "right"}, 1},
		{"{kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 4}", 8, 12, 1, []string{"spine1", "leaf1"}, 1},
		// k=4: 16 hosts; 16 host links, 16 edge-agg, 16 agg-core.
		{"{kind: fat-tree, k: 4}", 16, 48, 1, []string{"core3", "agg3.1", "edge0.0"}, 7},
		// 2 planes × (2 leaves × 1 spine + 4 host NICs).
		{"{kind: multi-rail, hosts: 4, rails: 2, hosts_per_leaf: 2}", 4, 12, 2, []string{"r1-leaf1", "r0-spine0"}, 1},
		// testdata/specs/topology.txt: 4 hosts, 2 switches, 5 links.
		{"{kind: ns3, file: topology.txt}", 4, 5, 1, []string{"n4", "n5"}, 5},
	} {
		s := mustParse(t, "name: g\ntopology: "+tc.topo+"\nworkloads: [{kind: permutation, size: 1MiB}]\n")
		g := s.Topology.Graph()
		if len(g.Hosts) != tc.hosts || len(g.Links) != tc.links || g.NICs != tc.nics {
			t.Errorf("%s: %d hosts, %d links, %d NICs; want %d, %d, %d", tc.topo, len(g.Hosts), len(g.Links), g.NICs, tc.hosts, tc.links, tc.nics)
		}
		for _, n := range tc.switches {
			if i, ok := g.Node(n); !ok || !g.Nodes[i].Switch {
				t.Errorf("%s: no switch %q", tc.topo, n)
			}
		}
		if got := g.Group(g.Hosts[len(g.Hosts)-1]); got != tc.groupOfLastHost {
			t.Errorf("%s: Group(last host) = %d, want %d", tc.topo, got, tc.groupOfLastHost)
		}
	}
}

func TestPath(t *testing.T) {
	s := mustParse(t, `name: p
topology: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2, host_rate: 100Gbps, fabric_rate: 400Gbps, link_delay: 1us}
workloads: [{kind: permutation, size: 1MiB}]
`)
	g := s.Topology.Graph()
	// h0 → h3 crosses leaf0 → spine → leaf1: 4 links, 4 µs one way.
	p, ok := g.Path(0, 3, 4096)
	if !ok {
		t.Fatal("no path h0 → h3")
	}
	tx := 2*(100*units.Gbps).TxTime(4096) + 2*(400*units.Gbps).TxTime(4096)
	want := PathInfo{Hops: 4, Bottleneck: 100 * units.Gbps, Delay: 4 * time.Microsecond, BaseRTT: 8*time.Microsecond + tx}
	if p != want {
		t.Errorf("Path(0, 3) = %+v, want %+v", p, want)
	}
	if p, _ := g.Path(0, 1, 4096); p.Hops != 2 {
		t.Errorf("Path(0, 1).Hops = %d, want 2 (same leaf)", p.Hops)
	}
}

func TestGenerateDeterministic(t *testing.T) {
	s := mustParse(t, `name: det
topology: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 4}
workloads:
  - {kind: permutation, size: {dist: uniform, min: 1KiB, max: 1MiB}, cross_leaf: true}
  - {kind: background, cdf: hadoop, load: 0.2, duration: 200us}
  - {kind: kvcache, prefill: [0, 1], decode: [6, 7], rate: 1e5, count: 20, size: {dist: lognormal, median: 1MiB, sigma: 1}}
`)
	g := s.Topology.Graph()
	a, err := Generate(s, g, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(s, g, 7)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("Generate(seed 7) differs between calls")
	}
	c, _ := Generate(s, g, 8)
	if reflect.DeepEqual(a.Flows, c.Flows) {
		t.Error("Generate(seed 8) equals Generate(seed 7)")
	}
	for i, f := range a.Flows {
		if f.ID != i+1 || (i > 0 && f.Start < a.Flows[i-1].Start) {
			t.Fatalf("flow %d: %+v: want IDs 1.. in start order", i, f)
		}
		if f.Src == f.Dst || f.Size <= 0 {
			t.Fatalf("flow %+v: self-send or empty", f)
		}
	}
}

func TestPermutationProperties(t *testing.T) {
	s := mustParse(t, `name: perm
topology: {kind: leaf-spine, leaves: 4, spines: 2, hosts_per_leaf: 4}
workloads: [{kind: permutation, size: 1MiB, cross_leaf: true, repeat: 20, interval: 1ms}]
`)
	g := s.Topology.Graph()
	for seed := int64(1); seed <= 5; seed++ {
		tr, err := Generate(s, g, seed)
		if err != nil {
			t.Fatal(err)
		}
		byRound := map[time.Duration][]Flow{}
		for _, f := range tr.Flows {
			byRound[f.Start] = append(byRound[f.Start], f)
		}
		if len(byRound) != 20 {
			t.Fatalf("seed %d: %d rounds, want 20", seed, len(byRound))
		}
		for at, fs := range byRound {
			srcs, dsts := map[int]bool{}, map[int]bool{}
			for _, f := range fs {
				if srcs[f.Src] || dsts[f.Dst] || g.Group(f.Src) == g.Group(f.Dst) {
					t.Fatalf("seed %d round %v: flow %d→%d repeats a host or stays in its leaf", seed, at, f.Src, f.Dst)
				}
				srcs[f.Src], dsts[f.Dst] = true, true
			}
			if len(fs) != 16 {
				t.Fatalf("round %v: %d flows, want 16", at, len(fs))
			}
		}
	}
}

func TestBackgroundOfferedLoad(t *testing.T) {
	// HPCC traffic_gen: mean inter-arrival = mean size × 8 / (load × rate);
	// over 50 ms at 30% of 100 Gbps, 8 hosts offer about 0.3 × 100 Gbps ×
	// 50 ms × 8 = 150 MB.
	s := mustParse(t, `name: bg
topology: {kind: star, hosts: 8}
workloads: [{kind: background, cdf: websearch, load: 0.3, duration: 50ms}]
`)
	tr, err := Generate(s, s.Topology.Graph(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var bytes float64
	for _, f := range tr.Flows {
		if f.Class != ClassBackground || f.Start >= 50*time.Millisecond {
			t.Fatalf("flow %+v: want a background flow within the window", f)
		}
		bytes += float64(f.Size)
	}
	want := 0.3 * 100e9 / 8 * 0.05 * 8
	if r := bytes / want; r < 0.85 || r > 1.15 {
		t.Errorf("offered %.0f bytes, want %.0f ±15%% (ratio %.3f, %d flows)", bytes, want, r, len(tr.Flows))
	}
}

func TestKVCacheArrivals(t *testing.T) {
	s := mustParse(t, `name: kv
topology: {kind: star, hosts: 6}
workloads: [{kind: kvcache, prefill: "0-2", decode: "3-5", rate: 10000, count: 4000, start: 1ms, size: 2MiB}]
`)
	tr, err := Generate(s, s.Topology.Graph(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Flows) != 4000 {
		t.Fatalf("%d requests, want 4000", len(tr.Flows))
	}
	last := tr.Flows[len(tr.Flows)-1].Start - time.Millisecond
	mean := last.Seconds() / 4000
	if math.Abs(mean*10000-1) > 0.05 {
		t.Errorf("mean inter-arrival %.3g s, want 1e-4 ±5%%", mean)
	}
	for _, f := range tr.Flows {
		if f.Src > 2 || f.Dst < 3 || f.Size != 2*units.MiB || f.Start < time.Millisecond {
			t.Fatalf("request %+v: want prefill 0-2 → decode 3-5, 2MiB, after 1ms", f)
		}
	}
}

func TestCDF(t *testing.T) {
	for name, mean := range map[string]float64{"websearch": 1711250, "hadoop": 120421} {
		pts, ok := BuiltinCDF(name)
		if !ok {
			t.Fatalf("BuiltinCDF(%q) missing", name)
		}
		if got := cdfMean(pts); math.Abs(got-mean) > 1 {
			t.Errorf("%s mean = %v, want %v", name, got, mean)
		}
		if cdfQuantile(pts, 0) != 0 || cdfQuantile(pts, 1) != pts[len(pts)-1].Bytes {
			t.Errorf("%s quantiles at 0 and 1 = %v, %v", name, cdfQuantile(pts, 0), cdfQuantile(pts, 1))
		}
	}
	web, _ := BuiltinCDF("websearch")
	// 53% of web-search flows are at most 80 KB, 60% at most 200 KB.
	if q := cdfQuantile(web, 0.565); math.Abs(q-140000) > 1 {
		t.Errorf("websearch quantile(0.565) = %v, want 140000 (halfway 80KB → 200KB)", q)
	}
	for _, bad := range []string{"0 5\n100 100\n", "0 0\n100 50\n", "0 0\n100 50\n50 100\n", "0 0\nx 100\n"} {
		if _, err := ParseCDF(strings.NewReader(bad), "c"); err == nil {
			t.Errorf("ParseCDF(%q) accepted a bad CDF", bad)
		}
	}
}

func TestLoadedFlows(t *testing.T) {
	s := mustParse(t, `name: files
topology: {kind: ns3, file: topology.txt}
nic: {mtu: 1024}
workloads:
  - {kind: ns3-flows, file: flow.txt}
  - {kind: htsim, file: matrix.cm, start: 3s}
stop: {time: 4s}
`)
	tr, err := Generate(s, s.Topology.Graph(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Flows) != 6 || len(tr.Triggers) != 1 || tr.Triggers[0].Count != 2 {
		t.Fatalf("flows %+v triggers %+v: want 6 flows and one barrier of 2", tr.Flows, tr.Triggers)
	}
	var trig, signals int
	for _, f := range tr.Flows {
		if f.Trigger != 0 {
			trig++
		}
		signals += len(f.Signals)
		if f.Workload == 0 && (f.PG != 3 || f.DPort != 100 || f.Start < 2*time.Second) {
			t.Errorf("ns-3 flow %+v: want pg 3, dport 100, start >= 2s", f)
		}
	}
	if trig != 1 || signals != 2 {
		t.Errorf("%d triggered flows and %d signals, want 1 and 2", trig, signals)
	}
	if i := slices.IndexFunc(tr.Flows, func(f Flow) bool { return f.Workload == 1 && f.Trigger == 0 }); i < 0 || tr.Flows[i].Start != 3*time.Second {
		t.Errorf("htsim flows do not start at the workload's start (3s)")
	}
}
