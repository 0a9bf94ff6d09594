// Package topo builds standard data-centre fabrics in a sim.Network:
// star, dumbbell, leaf-spine (any size and oversubscription), 3-tier
// fat-tree(k) and multi-rail hosts (R NICs per host, each on its own leaf
// or plane). Each builder lays its fabric out as a Graph (nodes and links
// as data; the Config types' Graph methods), and Build turns a Graph into
// switches, hosts and cables, calls Network.Build and returns a Topology
// that names the layers. The experiment runner (experiments/) builds every
// fabric, ns-3 topology files included, through Graph and Build, so the
// physics tests of this package cover what experiments simulate.
//
// Link speeds are any rate the simulator accepts (25–800 Gb/s are the
// exercised ones); delays are one-way propagation per cable.
package topo

import (
	"fmt"

	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/units"
)

// Topology is a built fabric.
type Topology struct {
	Net   *sim.Network
	Hosts []*sim.Host
	// Graph is the layout the fabric was built from; Cables are its links'
	// cables, in link order.
	Graph  *Graph
	Cables []*sim.Cable
	// Layers, by role; unused ones are nil. Leaves are the top-of-rack
	// (edge) switches of leaf-spine, multi-rail and dumbbell; Edges, Aggs
	// and Cores are the fat-tree's tiers.
	Leaves, Spines     []*sim.Switch
	Edges, Aggs, Cores []*sim.Switch
	Bottleneck         *sim.Cable // dumbbell only
	HostRate, CoreRate units.BitRate

	byID []*sim.Host
}

// Host returns the host with id (Graph.HostNode), nil if none.
func (t *Topology) Host(id int) *sim.Host {
	if id < 0 || id >= len(t.byID) {
		return nil
	}
	return t.byID[id]
}

// Common holds the options every builder shares. Zero fields take the
// documented defaults.
type Common struct {
	// HostRate is the NIC line rate; 0 means 100 Gb/s.
	HostRate units.BitRate
	// Delay is the one-way propagation delay of every cable; 0 means 1 µs
	// (as in the HPCC ns-3 topologies). NoDelay makes it zero.
	Delay   sim.Time
	NoDelay bool
	// Loss is every cable's random frame loss probability, per direction.
	Loss float64
	// Switch configures every switch (buffer, lossless/lossy, PFC, ECN,
	// spraying, INT).
	Switch sim.SwitchConfig
	// ECN, when Switch.ECN is nil, gives each switch port's RED
	// configuration from its rate; ECNByRate without ECN means
	// sim.ECNForRate.
	ECN       func(units.BitRate) *sim.ECNConfig
	ECNByRate bool
	// NIC configures every NIC.
	NIC sim.NICConfig
	// Watchdog configures the PFC watchdog.
	Watchdog sim.WatchdogConfig
}

func (c *Common) defaults() {
	if c.HostRate == 0 {
		c.HostRate = 100 * units.Gbps
	}
	if c.Delay == 0 && !c.NoDelay {
		c.Delay = sim.Microsecond
	}
}

// build lays out a graph with layout and builds it.
func build(w *sim.World, c Common, layout func() (*Graph, error), core units.BitRate) (*Topology, error) {
	g, err := layout()
	if err != nil {
		return nil, err
	}
	t, err := Build(w, g, c)
	if err != nil {
		return nil, err
	}
	t.CoreRate = core
	return t, nil
}

// DumbbellConfig describes Left senders on one switch and Right receivers
// on another, joined by one bottleneck cable.
type DumbbellConfig struct {
	Common
	Left, Right int
	// BottleneckRate is the rate of the middle cable; 0 means HostRate.
	BottleneckRate units.BitRate
}

// Graph lays the dumbbell out: switches "left" and "right", hosts
// 0..Left-1 (group 0) on the left and Left..Left+Right-1 (group 1) on the
// right, each followed by its cable, then the bottleneck.
func (cfg DumbbellConfig) Graph() (*Graph, error) {
	cfg.defaults()
	if cfg.Left < 1 || cfg.Right < 1 || cfg.Left > 4096 || cfg.Right > 4096 {
		return nil, fmt.Errorf("topo: DumbbellConfig Left = %d, Right = %d (valid: 1..4096 each)", cfg.Left, cfg.Right)
	}
	if cfg.BottleneckRate == 0 {
		cfg.BottleneckRate = cfg.HostRate
	}
	g := NewGraph()
	l, r := g.AddSwitch("left", RoleLeaf), g.AddSwitch("right", RoleLeaf)
	for i := 0; i < cfg.Left+cfg.Right; i++ {
		side, group := l, 0
		if i >= cfg.Left {
			side, group = r, 1
		}
		g.Link(g.AddHost(i, group), side, cfg.HostRate, cfg.Delay, 0, cfg.Loss)
	}
	g.Bottleneck = g.Link(l, r, cfg.BottleneckRate, cfg.Delay, 0, cfg.Loss)
	return g, nil
}

// Dumbbell builds a dumbbell (see DumbbellConfig.Graph).
func Dumbbell(w *sim.World, cfg DumbbellConfig) (*Topology, error) {
	cfg.defaults()
	core := cfg.BottleneckRate
	if core == 0 {
		core = cfg.HostRate
	}
	return build(w, cfg.Common, cfg.Graph, core)
}

// StarConfig describes N hosts on one switch.
type StarConfig struct {
	Common
	Hosts int
}

// Graph lays the star out: switch "sw", then each host and its cable.
// Hosts have no group (there is one switch).
func (cfg StarConfig) Graph() (*Graph, error) {
	cfg.defaults()
	if cfg.Hosts < 2 || cfg.Hosts > 4096 {
		return nil, fmt.Errorf("topo: StarConfig.Hosts = %d (valid: 2..4096)", cfg.Hosts)
	}
	g := NewGraph()
	s := g.AddSwitch("sw", RoleLeaf)
	for i := 0; i < cfg.Hosts; i++ {
		g.Link(g.AddHost(i, -1), s, cfg.HostRate, cfg.Delay, 0, cfg.Loss)
	}
	return g, nil
}

// Star builds N hosts on a single switch "sw" (the incast topology).
func Star(w *sim.World, cfg StarConfig) (*Topology, error) {
	cfg.defaults()
	return build(w, cfg.Common, cfg.Graph, cfg.HostRate)
}

// LeafSpineConfig describes a two-tier Clos: Leaves leaf switches with
// HostsPerLeaf hosts each, every leaf linked to every spine.
type LeafSpineConfig struct {
	Common
	Leaves, Spines, HostsPerLeaf int
	// UplinkRate is the leaf–spine rate; 0 derives it from
	// Oversubscription: HostsPerLeaf·HostRate / (Spines·UplinkRate) =
	// Oversubscription (default 1, non-blocking).
	UplinkRate       units.BitRate
	Oversubscription float64
	// Rails gives every host this many NICs (default 1); NIC r of the hosts
	// under leaf group g attaches to leaf g·Rails + r (rail-optimised), so
	// Leaves must be a multiple of Rails.
	Rails int
}

func (cfg *LeafSpineConfig) fill() error {
	cfg.defaults()
	if cfg.Rails == 0 {
		cfg.Rails = 1
	}
	if cfg.Leaves < 1 || cfg.Spines < 1 || cfg.HostsPerLeaf < 1 || cfg.Rails < 1 ||
		cfg.Leaves*cfg.HostsPerLeaf > 65536 || cfg.Spines > 1024 || cfg.Leaves%cfg.Rails != 0 {
		return fmt.Errorf("topo: LeafSpineConfig Leaves = %d, Spines = %d, HostsPerLeaf = %d, Rails = %d (valid: each >= 1, Leaves a multiple of Rails, at most 65536 hosts and 1024 spines)",
			cfg.Leaves, cfg.Spines, cfg.HostsPerLeaf, cfg.Rails)
	}
	if cfg.UplinkRate == 0 {
		o := cfg.Oversubscription
		if o == 0 {
			o = 1
		}
		if !(o > 0) {
			return fmt.Errorf("topo: LeafSpineConfig.Oversubscription = %v (valid: > 0)", cfg.Oversubscription)
		}
		cfg.UplinkRate = units.BitRate(float64(cfg.HostsPerLeaf) * float64(cfg.HostRate) / (float64(cfg.Spines) * o))
	}
	return nil
}

// Graph lays the leaf-spine out: the leaves, then each host (group: its
// leaf group) followed by its cables (NIC r to leaf g·Rails + r), then each
// spine followed by its cables to every leaf. Host i is in leaf group
// i / HostsPerLeaf.
func (cfg LeafSpineConfig) Graph() (*Graph, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	g := NewGraph()
	leaves := make([]int, cfg.Leaves)
	for i := range leaves {
		leaves[i] = g.AddSwitch(fmt.Sprintf("leaf%d", i), RoleLeaf)
	}
	groups := cfg.Leaves / cfg.Rails
	for grp := 0; grp < groups; grp++ {
		for j := 0; j < cfg.HostsPerLeaf; j++ {
			h := g.AddHost(grp*cfg.HostsPerLeaf+j, grp)
			for r := 0; r < cfg.Rails; r++ {
				g.Link(h, leaves[grp*cfg.Rails+r], cfg.HostRate, cfg.Delay, r, cfg.Loss)
			}
		}
	}
	for i := 0; i < cfg.Spines; i++ {
		sp := g.AddSwitch(fmt.Sprintf("spine%d", i), RoleSpine)
		for _, l := range leaves {
			g.Link(l, sp, cfg.UplinkRate, cfg.Delay, 0, cfg.Loss)
		}
	}
	return g, nil
}

// LeafSpine builds a leaf-spine fabric (see LeafSpineConfig.Graph).
func LeafSpine(w *sim.World, cfg LeafSpineConfig) (*Topology, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	return build(w, cfg.Common, cfg.Graph, cfg.UplinkRate)
}

// FatTreeConfig describes a 3-tier k-ary fat-tree (Al-Fares et al.,
// SIGCOMM'08): k pods of k/2 edge and k/2 aggregation switches, (k/2)²
// core switches, k/2 hosts per edge switch, k³/4 hosts, all links at one
// rate (CoreRate, default HostRate).
type FatTreeConfig struct {
	Common
	K        int
	CoreRate units.BitRate
}

// Graph lays the fat-tree out (Al-Fares et al., SIGCOMM'08 §3): the
// cores, then per pod p its aggregation switches, each followed by its
// cables to cores j·k/2 … j·k/2+k/2-1, then its edge switches, each
// followed by its cables to the pod's aggregation switches and by its k/2
// hosts and their cables. Host i sits under edge switch i/(k/2) (its
// group).
func (cfg FatTreeConfig) Graph() (*Graph, error) {
	cfg.defaults()
	k := cfg.K
	if k < 2 || k%2 != 0 || k > 64 {
		return nil, fmt.Errorf("topo: FatTreeConfig.K = %d (valid: even, 2..64)", k)
	}
	if cfg.CoreRate == 0 {
		cfg.CoreRate = cfg.HostRate
	}
	half := k / 2
	g := NewGraph()
	cores := make([]int, half*half)
	for i := range cores {
		cores[i] = g.AddSwitch(fmt.Sprintf("core%d", i), RoleCore)
	}
	h := 0
	for p := range k {
		aggs := make([]int, half)
		for j := range aggs {
			aggs[j] = g.AddSwitch(fmt.Sprintf("agg%d.%d", p, j), RoleAgg)
			for c := range half {
				g.Link(aggs[j], cores[j*half+c], cfg.CoreRate, cfg.Delay, 0, cfg.Loss)
			}
		}
		for e := range half {
			edge := g.AddSwitch(fmt.Sprintf("edge%d.%d", p, e), RoleEdge)
			for _, a := range aggs {
				g.Link(edge, a, cfg.CoreRate, cfg.Delay, 0, cfg.Loss)
			}
			for range half {
				g.Link(g.AddHost(h, p*half+e), edge, cfg.HostRate, cfg.Delay, 0, cfg.Loss)
				h++
			}
		}
	}
	return g, nil
}

// FatTree builds a fat-tree (see FatTreeConfig.Graph).
func FatTree(w *sim.World, cfg FatTreeConfig) (*Topology, error) {
	cfg.defaults()
	core := cfg.CoreRate
	if core == 0 {
		core = cfg.HostRate
	}
	t, err := build(w, cfg.Common, cfg.Graph, core)
	if err != nil {
		return nil, err
	}
	t.Leaves = t.Edges
	return t, nil
}

// MultiRailConfig describes hosts with Rails NICs each, where NIC r of
// every host is on plane r: Planes independent leaf-spine fabrics (no
// switch connects two planes), each with Leaves leaves of HostsPerLeaf
// hosts and Spines spines.
type MultiRailConfig struct {
	Common
	Hosts, Rails         int
	HostsPerLeaf, Spines int
	// UplinkRate is the leaf–spine rate of each plane; 0 means
	// non-blocking (HostsPerLeaf·HostRate/Spines).
	UplinkRate units.BitRate
}

func (cfg *MultiRailConfig) fill() error {
	cfg.defaults()
	if cfg.Hosts < 1 || cfg.Rails < 1 || cfg.Rails > 64 || cfg.HostsPerLeaf < 1 || cfg.Spines < 1 || cfg.Hosts > 65536 {
		return fmt.Errorf("topo: MultiRailConfig Hosts = %d, Rails = %d, HostsPerLeaf = %d, Spines = %d (valid: Hosts 1..65536, Rails 1..64, others >= 1)",
			cfg.Hosts, cfg.Rails, cfg.HostsPerLeaf, cfg.Spines)
	}
	if cfg.UplinkRate == 0 {
		cfg.UplinkRate = units.BitRate(int64(cfg.HostsPerLeaf) * int64(cfg.HostRate) / int64(cfg.Spines))
	}
	return nil
}

// Graph lays the planes out: the hosts (host i in group i/HostsPerLeaf),
// then per rail r its spines "rR-spineI", its leaves "rR-leafI" each
// followed by its cables to the plane's spines, then every host's NIC r
// cable to its leaf.
func (cfg MultiRailConfig) Graph() (*Graph, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	g := NewGraph()
	hosts := make([]int, cfg.Hosts)
	for i := range hosts {
		hosts[i] = g.AddHost(i, i/cfg.HostsPerLeaf)
	}
	leaves := (cfg.Hosts + cfg.HostsPerLeaf - 1) / cfg.HostsPerLeaf
	for r := 0; r < cfg.Rails; r++ {
		spines := make([]int, cfg.Spines)
		for i := range spines {
			spines[i] = g.AddSwitch(fmt.Sprintf("r%d-spine%d", r, i), RoleSpine)
		}
		ls := make([]int, leaves)
		for i := range ls {
			ls[i] = g.AddSwitch(fmt.Sprintf("r%d-leaf%d", r, i), RoleLeaf)
			for _, sp := range spines {
				g.Link(ls[i], sp, cfg.UplinkRate, cfg.Delay, 0, cfg.Loss)
			}
		}
		for i, h := range hosts {
			g.Link(h, ls[i/cfg.HostsPerLeaf], cfg.HostRate, cfg.Delay, r, cfg.Loss)
		}
	}
	g.NICs = cfg.Rails
	return g, nil
}

// MultiRail builds one leaf-spine plane per rail (see
// MultiRailConfig.Graph). Paths between two hosts exist only between NICs
// of the same rail. For rails that share one fabric (rail-optimised leaves
// under common spines) use LeafSpineConfig.Rails.
func MultiRail(w *sim.World, cfg MultiRailConfig) (*Topology, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	return build(w, cfg.Common, cfg.Graph, cfg.UplinkRate)
}
