// Package topo builds standard data-centre fabrics in a sim.Network:
// dumbbell, leaf-spine (any size and oversubscription), 3-tier fat-tree(k)
// and multi-rail hosts (R NICs per host, each on its own leaf or plane).
// Every builder adds switches, hosts and cables, calls Network.Build and
// returns a Topology that names the layers.
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
	// Layers, by role; unused ones are nil. Leaves are the top-of-rack
	// (edge) switches of leaf-spine, multi-rail and dumbbell; Edges, Aggs
	// and Cores are the fat-tree's tiers.
	Leaves, Spines     []*sim.Switch
	Edges, Aggs, Cores []*sim.Switch
	Bottleneck         *sim.Cable // dumbbell only
	HostRate, CoreRate units.BitRate
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
	// Switch configures every switch (buffer, lossless/lossy, PFC, ECN,
	// spraying, INT).
	Switch sim.SwitchConfig
	// ECNByRate, when Switch.ECN is nil, enables RED on every switch port
	// with sim.ECNForRate(port rate).
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

func (c *Common) link(rate units.BitRate) sim.LinkConfig {
	return sim.LinkConfig{Rate: rate, Delay: c.Delay}
}

// builder accumulates the first error.
type builder struct {
	net *sim.Network
	c   *Common
	err error
}

func (b *builder) sw(name string) *sim.Switch {
	if b.err != nil {
		return nil
	}
	s, err := b.net.AddSwitch(name, b.c.Switch)
	b.err = err
	return s
}

func (b *builder) host(name string, nics int) *sim.Host {
	if b.err != nil {
		return nil
	}
	h, err := b.net.AddHost(name, nics, b.c.NIC)
	b.err = err
	return h
}

func (b *builder) link(x, y sim.Node, rate units.BitRate) *sim.Cable {
	if b.err != nil {
		return nil
	}
	c, err := b.net.Link(x, y, b.c.link(rate))
	b.err = err
	return c
}

func (b *builder) finish(t *Topology) (*Topology, error) {
	if b.err != nil {
		return nil, b.err
	}
	if err := b.net.SetWatchdog(b.c.Watchdog); err != nil {
		return nil, err
	}
	if err := b.net.Build(); err != nil {
		return nil, err
	}
	if b.c.Switch.ECN == nil && b.c.ECNByRate {
		for _, s := range b.net.Switches {
			for _, p := range s.Ports() {
				if err := p.SetECN(sim.ECNForRate(p.Rate())); err != nil {
					return nil, err
				}
			}
		}
	}
	t.Net = b.net
	t.Hosts = b.net.Hosts
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

// Dumbbell builds a dumbbell. Hosts 0..Left-1 hang off switch "left",
// hosts Left..Left+Right-1 off switch "right".
func Dumbbell(w *sim.World, cfg DumbbellConfig) (*Topology, error) {
	cfg.defaults()
	if cfg.Left < 1 || cfg.Right < 1 || cfg.Left > 4096 || cfg.Right > 4096 {
		return nil, fmt.Errorf("topo: DumbbellConfig Left = %d, Right = %d (valid: 1..4096 each)", cfg.Left, cfg.Right)
	}
	if cfg.BottleneckRate == 0 {
		cfg.BottleneckRate = cfg.HostRate
	}
	b := &builder{net: sim.NewNetwork(w), c: &cfg.Common}
	l, r := b.sw("left"), b.sw("right")
	t := &Topology{Leaves: []*sim.Switch{l, r}, HostRate: cfg.HostRate, CoreRate: cfg.BottleneckRate}
	for i := 0; i < cfg.Left+cfg.Right; i++ {
		h := b.host(fmt.Sprintf("h%d", i), 1)
		if b.err != nil {
			break
		}
		s := l
		if i >= cfg.Left {
			s = r
		}
		b.link(h.NIC(0), s, cfg.HostRate)
	}
	t.Bottleneck = b.link(l, r, cfg.BottleneckRate)
	return b.finish(t)
}

// StarConfig describes N hosts on one switch.
type StarConfig struct {
	Common
	Hosts int
}

// Star builds N hosts on a single switch "sw" (the incast topology).
func Star(w *sim.World, cfg StarConfig) (*Topology, error) {
	cfg.defaults()
	if cfg.Hosts < 2 || cfg.Hosts > 4096 {
		return nil, fmt.Errorf("topo: StarConfig.Hosts = %d (valid: 2..4096)", cfg.Hosts)
	}
	b := &builder{net: sim.NewNetwork(w), c: &cfg.Common}
	s := b.sw("sw")
	for i := 0; i < cfg.Hosts; i++ {
		h := b.host(fmt.Sprintf("h%d", i), 1)
		if b.err != nil {
			break
		}
		b.link(h.NIC(0), s, cfg.HostRate)
	}
	return b.finish(&Topology{Leaves: []*sim.Switch{s}, HostRate: cfg.HostRate, CoreRate: cfg.HostRate})
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

// LeafSpine builds a leaf-spine fabric. Host i sits under leaf
// (i / HostsPerLeaf) (times Rails, plus the rail).
func LeafSpine(w *sim.World, cfg LeafSpineConfig) (*Topology, error) {
	cfg.defaults()
	if cfg.Rails == 0 {
		cfg.Rails = 1
	}
	if cfg.Leaves < 1 || cfg.Spines < 1 || cfg.HostsPerLeaf < 1 || cfg.Rails < 1 ||
		cfg.Leaves*cfg.HostsPerLeaf > 65536 || cfg.Spines > 1024 || cfg.Leaves%cfg.Rails != 0 {
		return nil, fmt.Errorf("topo: LeafSpineConfig Leaves = %d, Spines = %d, HostsPerLeaf = %d, Rails = %d (valid: each >= 1, Leaves a multiple of Rails, at most 65536 hosts and 1024 spines)",
			cfg.Leaves, cfg.Spines, cfg.HostsPerLeaf, cfg.Rails)
	}
	if cfg.UplinkRate == 0 {
		o := cfg.Oversubscription
		if o == 0 {
			o = 1
		}
		if !(o > 0) {
			return nil, fmt.Errorf("topo: LeafSpineConfig.Oversubscription = %v (valid: > 0)", cfg.Oversubscription)
		}
		cfg.UplinkRate = units.BitRate(float64(cfg.HostsPerLeaf) * float64(cfg.HostRate) / (float64(cfg.Spines) * o))
	}
	b := &builder{net: sim.NewNetwork(w), c: &cfg.Common}
	t := &Topology{HostRate: cfg.HostRate, CoreRate: cfg.UplinkRate}
	for i := 0; i < cfg.Spines; i++ {
		t.Spines = append(t.Spines, b.sw(fmt.Sprintf("spine%d", i)))
	}
	for i := 0; i < cfg.Leaves; i++ {
		t.Leaves = append(t.Leaves, b.sw(fmt.Sprintf("leaf%d", i)))
	}
	groups := cfg.Leaves / cfg.Rails
	for g := 0; g < groups; g++ {
		for j := 0; j < cfg.HostsPerLeaf; j++ {
			h := b.host(fmt.Sprintf("h%d", g*cfg.HostsPerLeaf+j), cfg.Rails)
			if b.err != nil {
				return nil, b.err
			}
			for r := 0; r < cfg.Rails; r++ {
				b.link(h.NIC(r), t.Leaves[g*cfg.Rails+r], cfg.HostRate)
			}
		}
	}
	for _, l := range t.Leaves {
		for _, s := range t.Spines {
			b.link(l, s, cfg.UplinkRate)
		}
	}
	return b.finish(t)
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

// FatTree builds a fat-tree. Host i sits under edge switch i/(k/2);
// aggregation switch j of every pod connects to core switches
// j·k/2 .. j·k/2+k/2-1.
func FatTree(w *sim.World, cfg FatTreeConfig) (*Topology, error) {
	cfg.defaults()
	k := cfg.K
	if k < 2 || k%2 != 0 || k > 64 {
		return nil, fmt.Errorf("topo: FatTreeConfig.K = %d (valid: even, 2..64)", k)
	}
	if cfg.CoreRate == 0 {
		cfg.CoreRate = cfg.HostRate
	}
	h := k / 2
	b := &builder{net: sim.NewNetwork(w), c: &cfg.Common}
	t := &Topology{HostRate: cfg.HostRate, CoreRate: cfg.CoreRate}
	for i := 0; i < h*h; i++ {
		t.Cores = append(t.Cores, b.sw(fmt.Sprintf("core%d", i)))
	}
	for p := 0; p < k; p++ {
		for j := 0; j < h; j++ {
			t.Aggs = append(t.Aggs, b.sw(fmt.Sprintf("agg%d.%d", p, j)))
		}
		for j := 0; j < h; j++ {
			t.Edges = append(t.Edges, b.sw(fmt.Sprintf("edge%d.%d", p, j)))
		}
	}
	for e, edge := range t.Edges {
		for j := 0; j < h; j++ {
			host := b.host(fmt.Sprintf("h%d", e*h+j), 1)
			if b.err != nil {
				return nil, b.err
			}
			b.link(host.NIC(0), edge, cfg.HostRate)
		}
	}
	for p := 0; p < k; p++ {
		for e := 0; e < h; e++ {
			for a := 0; a < h; a++ {
				b.link(t.Edges[p*h+e], t.Aggs[p*h+a], cfg.CoreRate)
			}
		}
		for a := 0; a < h; a++ {
			for c := 0; c < h; c++ {
				b.link(t.Aggs[p*h+a], t.Cores[a*h+c], cfg.CoreRate)
			}
		}
	}
	t.Leaves = t.Edges
	return b.finish(t)
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

// MultiRail builds one leaf-spine plane per rail; switch names are prefixed
// "rR-". Paths between two hosts exist only between NICs of the same rail.
// For rails that share one fabric (rail-optimised leaves under common
// spines) use LeafSpineConfig.Rails.
func MultiRail(w *sim.World, cfg MultiRailConfig) (*Topology, error) {
	cfg.defaults()
	if cfg.Hosts < 1 || cfg.Rails < 1 || cfg.Rails > 64 || cfg.HostsPerLeaf < 1 || cfg.Spines < 1 || cfg.Hosts > 65536 {
		return nil, fmt.Errorf("topo: MultiRailConfig Hosts = %d, Rails = %d, HostsPerLeaf = %d, Spines = %d (valid: Hosts 1..65536, Rails 1..64, others >= 1)",
			cfg.Hosts, cfg.Rails, cfg.HostsPerLeaf, cfg.Spines)
	}
	if cfg.UplinkRate == 0 {
		cfg.UplinkRate = units.BitRate(int64(cfg.HostsPerLeaf) * int64(cfg.HostRate) / int64(cfg.Spines))
	}
	leaves := (cfg.Hosts + cfg.HostsPerLeaf - 1) / cfg.HostsPerLeaf
	b := &builder{net: sim.NewNetwork(w), c: &cfg.Common}
	t := &Topology{HostRate: cfg.HostRate, CoreRate: cfg.UplinkRate}
	hosts := make([]*sim.Host, cfg.Hosts)
	for i := range hosts {
		hosts[i] = b.host(fmt.Sprintf("h%d", i), cfg.Rails)
		if b.err != nil {
			return nil, b.err
		}
	}
	for r := 0; r < cfg.Rails; r++ {
		var ls, ss []*sim.Switch
		for i := 0; i < cfg.Spines; i++ {
			ss = append(ss, b.sw(fmt.Sprintf("r%d-spine%d", r, i)))
		}
		for i := 0; i < leaves; i++ {
			ls = append(ls, b.sw(fmt.Sprintf("r%d-leaf%d", r, i)))
		}
		for i, h := range hosts {
			b.link(h.NIC(r), ls[i/cfg.HostsPerLeaf], cfg.HostRate)
		}
		for _, l := range ls {
			for _, s := range ss {
				b.link(l, s, cfg.UplinkRate)
			}
		}
		t.Leaves = append(t.Leaves, ls...)
		t.Spines = append(t.Spines, ss...)
	}
	return b.finish(t)
}
