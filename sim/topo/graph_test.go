package topo

import (
	"testing"

	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/units"
)

// TestLayouts checks each builder's layout: host, switch and link counts,
// names, groups and the layers Build fills.
func TestLayouts(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		layout                func() (*Graph, error)
		build                 func(w *sim.World) (*Topology, error)
		hosts, switches, link int
		named                 []string
		layer                 func(*Topology) int
		layerN                int
	}{
		{"star", StarConfig{Hosts: 5}.Graph, func(w *sim.World) (*Topology, error) { return Star(w, StarConfig{Hosts: 5}) },
			5, 1, 5, []string{"sw", "h4"}, func(t *Topology) int { return len(t.Leaves) }, 1},
		{"dumbbell", DumbbellConfig{Left: 2, Right: 3}.Graph, func(w *sim.World) (*Topology, error) { return Dumbbell(w, DumbbellConfig{Left: 2, Right: 3}) },
			5, 2, 6, []string{"left", "right"}, func(t *Topology) int { return len(t.Leaves) }, 2},
		{"leaf-spine", LeafSpineConfig{Leaves: 4, Spines: 2, HostsPerLeaf: 3}.Graph, func(w *sim.World) (*Topology, error) {
			return LeafSpine(w, LeafSpineConfig{Leaves: 4, Spines: 2, HostsPerLeaf: 3})
		}, 12, 6, 12 + 8, []string{"leaf3", "spine1", "h11"}, func(t *Topology) int { return len(t.Spines) }, 2},
		{"fat-tree", FatTreeConfig{K: 4}.Graph, func(w *sim.World) (*Topology, error) { return FatTree(w, FatTreeConfig{K: 4}) },
			16, 20, 48, []string{"core3", "agg3.1", "edge0.0"}, func(t *Topology) int { return len(t.Cores) }, 4},
		{"multi-rail", MultiRailConfig{Hosts: 4, Rails: 2, HostsPerLeaf: 2, Spines: 1}.Graph, func(w *sim.World) (*Topology, error) {
			return MultiRail(w, MultiRailConfig{Hosts: 4, Rails: 2, HostsPerLeaf: 2, Spines: 1})
		}, 4, 6, 12, []string{"r1-leaf1", "r0-spine0"}, func(t *Topology) int { return len(t.Leaves) }, 4},
	} {
		g, err := tc.layout()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		sw := 0
		for _, n := range g.Nodes {
			if n.Switch {
				sw++
			}
		}
		if len(g.Hosts) != tc.hosts || sw != tc.switches || len(g.Links) != tc.link {
			t.Errorf("%s: %d hosts, %d switches, %d links; want %d, %d, %d", tc.name, len(g.Hosts), sw, len(g.Links), tc.hosts, tc.switches, tc.link)
		}
		for _, n := range tc.named {
			if _, ok := g.Node(n); !ok {
				t.Errorf("%s: no node %s", tc.name, n)
			}
		}
		if h, ok := g.Unreachable(g.Hosts[0]); !ok && tc.name != "multi-rail" {
			t.Errorf("%s: host %d unreachable", tc.name, h)
		}
		top, err := tc.build(sim.NewWorld(1))
		if err != nil {
			t.Fatalf("%s: build: %v", tc.name, err)
		}
		if n := tc.layer(top); n != tc.layerN {
			t.Errorf("%s: layer has %d switches, want %d", tc.name, n, tc.layerN)
		}
		if len(top.Cables) != len(g.Links) || top.Host(g.Hosts[len(g.Hosts)-1]) == nil {
			t.Errorf("%s: %d cables for %d links, or no last host", tc.name, len(top.Cables), len(g.Links))
		}
	}
}

// TestGraphPathAndRates: a graph path's hops, bottleneck and delay, and a
// host's links after SetHostRate.
func TestGraphPathAndRates(t *testing.T) {
	g, err := LeafSpineConfig{Common: Common{HostRate: 100 * units.Gbps}, Leaves: 2, Spines: 2, HostsPerLeaf: 1, UplinkRate: 400 * units.Gbps}.Graph()
	if err != nil {
		t.Fatal(err)
	}
	p, ok := g.Path(0, 1, 4096)
	if !ok || p.Hops != 4 || p.Bottleneck != 100*units.Gbps || p.Delay != 4*sim.Microsecond.Duration() {
		t.Errorf("Path(0, 1) = %+v, %v; want 4 hops, 100Gbps, 4µs", p, ok)
	}
	g.SetHostRate(1, 10*units.Gbps)
	if p, _ := g.Path(0, 1, 4096); p.Bottleneck != 10*units.Gbps {
		t.Errorf("after SetHostRate(1, 10G): bottleneck %v", p.Bottleneck)
	}
	if g.Group(0) != 0 || g.Group(1) != 1 {
		t.Errorf("groups %d, %d; want 0, 1", g.Group(0), g.Group(1))
	}
}
