package topo

import (
	"fmt"
	"time"

	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/units"
)

// Graph is a fabric spelled out as data: named nodes (hosts and switches)
// and full-duplex links, in the order Build creates them. The builders
// (Star, Dumbbell, LeafSpine, FatTree, MultiRail) lay their fabric out as
// a Graph and Build it; code that needs the fabric's shape without a
// simulation (validating host ids and failure targets, computing a flow's
// ideal completion time) uses the Graph alone, and NewGraph with AddHost,
// AddSwitch and Link describes any other fabric (an ns-3 topology file).
//
// Node names: hosts are "h<id>"; switches "sw" (star), "left" and "right"
// (dumbbell), "leaf<i>" and "spine<i>" (leaf-spine), "edge<p>.<j>",
// "agg<p>.<j>" and "core<i>" (fat-tree, pod p), "r<r>-leaf<i>" and
// "r<r>-spine<i>" (multi-rail plane r).
//
// A Graph is not safe for concurrent mutation; once built it is read-only
// and may be shared.
type Graph struct {
	Nodes []Node
	Links []Link
	// HostNode maps a host id to its node index; -1 where no host has that id.
	HostNode []int
	// Hosts lists the host ids in the order they were added.
	Hosts []int
	// NICs is the number of NIC ports per host (multi-rail: Rails).
	NICs int
	// Bottleneck is the dumbbell's middle link, -1 for other fabrics.
	Bottleneck int

	byName map[string]int
	adj    [][]int // node → link indices
}

// Role says which layer a switch is in (the Topology's layer fields).
type Role uint8

// Switch roles.
const (
	RoleHost Role = iota
	RoleLeaf
	RoleSpine
	RoleEdge
	RoleAgg
	RoleCore
	RoleOther
)

// Node is a host or a switch.
type Node struct {
	Name   string
	Switch bool
	Role   Role
	Host   int // host id, -1 for switches
	Group  int // leaf / edge switch index for hosts (cross-leaf traffic), -1 if none
}

// Link joins nodes A and B. For a host end, NIC says which of its ports
// the link is on.
type Link struct {
	A, B  int
	Rate  units.BitRate
	Delay sim.Time // one-way propagation delay
	NIC   int
	Loss  float64 // random frame loss probability per direction
}

// NewGraph returns an empty graph.
func NewGraph() *Graph {
	return &Graph{byName: map[string]int{}, NICs: 1, Bottleneck: -1}
}

// AddHost adds host id (named "h<id>") in group (-1 for none) and returns
// its node index.
func (g *Graph) AddHost(id, group int) int {
	return g.add(Node{Name: fmt.Sprintf("h%d", id), Role: RoleHost, Host: id, Group: group})
}

// AddSwitch adds a switch and returns its node index.
func (g *Graph) AddSwitch(name string, role Role) int {
	return g.add(Node{Name: name, Switch: true, Role: role, Host: -1, Group: -1})
}

func (g *Graph) add(n Node) int {
	i := len(g.Nodes)
	g.Nodes = append(g.Nodes, n)
	g.adj = append(g.adj, nil)
	g.byName[n.Name] = i
	if n.Host >= 0 {
		for len(g.HostNode) <= n.Host {
			g.HostNode = append(g.HostNode, -1)
		}
		g.HostNode[n.Host] = i
		g.Hosts = append(g.Hosts, n.Host)
	}
	return i
}

// Link adds a link between nodes a and b (on a host's port nic) and
// returns its index.
func (g *Graph) Link(a, b int, rate units.BitRate, delay sim.Time, nic int, loss float64) int {
	g.Links = append(g.Links, Link{A: a, B: b, Rate: rate, Delay: delay, NIC: nic, Loss: loss})
	li := len(g.Links) - 1
	g.adj[a] = append(g.adj[a], li)
	g.adj[b] = append(g.adj[b], li)
	if !g.Nodes[a].Switch {
		g.NICs = max(g.NICs, nic+1)
	}
	if !g.Nodes[b].Switch {
		g.NICs = max(g.NICs, nic+1)
	}
	return li
}

// SetHostRate sets the rate of every link of host id (a slow NIC).
func (g *Graph) SetHostRate(id int, r units.BitRate) {
	if !g.IsHost(id) {
		return
	}
	for _, li := range g.adj[g.HostNode[id]] {
		g.Links[li].Rate = r
	}
}

// Other returns the far end of link li from node n.
func (g *Graph) Other(li, n int) int {
	if g.Links[li].A == n {
		return g.Links[li].B
	}
	return g.Links[li].A
}

// LinksOf returns the indices of node n's links.
func (g *Graph) LinksOf(n int) []int { return g.adj[n] }

// HostRate returns the rate of host's first NIC link.
func (g *Graph) HostRate(host int) units.BitRate {
	return g.Links[g.adj[g.HostNode[host]][0]].Rate
}

// IsHost reports whether id is a host of the graph.
func (g *Graph) IsHost(id int) bool {
	return id >= 0 && id < len(g.HostNode) && g.HostNode[id] >= 0
}

// Node returns the index of the node called name.
func (g *Graph) Node(name string) (int, bool) {
	i, ok := g.byName[name]
	return i, ok
}

// SplitLink splits "A-B" into two node names at the dash where both
// halves name nodes (node names may contain dashes themselves).
func (g *Graph) SplitLink(s string) (a, b string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] != '-' {
			continue
		}
		_, okA := g.byName[s[:i]]
		_, okB := g.byName[s[i+1:]]
		if okA && okB {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

// FindLink returns the index of the link joining the nodes called a and b.
func (g *Graph) FindLink(a, b string) (int, bool) {
	ia, ok1 := g.byName[a]
	ib, ok2 := g.byName[b]
	if !ok1 || !ok2 {
		return 0, false
	}
	for _, li := range g.adj[ia] {
		if g.Other(li, ia) == ib {
			return li, true
		}
	}
	return 0, false
}

// Group returns the leaf (edge switch) a host hangs off, -1 if the
// fabric has none.
func (g *Graph) Group(host int) int { return g.Nodes[g.HostNode[host]].Group }

// SetGroupsBySwitch makes each host's group the first switch it links to
// (for fabrics read from files, which name no leaves).
func (g *Graph) SetGroupsBySwitch() {
	for i, nd := range g.Nodes {
		if nd.Switch {
			continue
		}
		for _, li := range g.adj[i] {
			if o := g.Other(li, i); g.Nodes[o].Switch {
				g.Nodes[i].Group = o
				break
			}
		}
	}
}

// PathInfo summarises the best empty path between two hosts.
type PathInfo struct {
	Hops       int           // links on the path
	Bottleneck units.BitRate // slowest link
	Delay      time.Duration // one-way propagation delay
	// BaseRTT is twice Delay plus one MTU's serialisation on every hop, the
	// base RTT HPCC's third.cc uses.
	BaseRTT time.Duration
}

// Path returns the minimum-hop path between hosts src and dst that has the
// highest bottleneck rate (ties: lowest delay), with mtu bytes per frame
// for BaseRTT. Paths never transit a host. ok is false when dst is
// unreachable.
func (g *Graph) Path(src, dst int, mtu units.Bytes) (p PathInfo, ok bool) {
	s, d := g.HostNode[src], g.HostNode[dst]
	type state struct {
		hops  int
		bn    units.BitRate
		delay time.Duration
		tx    time.Duration
	}
	best := make([]state, len(g.Nodes))
	for i := range best {
		best[i].hops = -1
	}
	best[s] = state{hops: 0, bn: units.Unlimited}
	frontier := []int{s}
	better := func(a, b state) bool { // a better than b at equal hops
		if a.bn != b.bn {
			return a.bn > b.bn
		}
		return a.delay < b.delay
	}
	for len(frontier) > 0 && best[d].hops < 0 {
		var next []int
		for _, n := range frontier {
			for _, li := range g.adj[n] {
				o := g.Other(li, n)
				k := g.Links[li]
				c := state{hops: best[n].hops + 1, bn: min(best[n].bn, k.Rate), delay: best[n].delay + k.Delay.Duration(), tx: best[n].tx + k.Rate.TxTime(mtu)}
				switch {
				case best[o].hops < 0:
					best[o] = c
					if o != d && g.Nodes[o].Switch {
						next = append(next, o)
					}
				case best[o].hops == c.hops && better(c, best[o]):
					best[o] = c
				}
			}
		}
		frontier = next
	}
	if best[d].hops < 0 {
		return PathInfo{}, false
	}
	b := best[d]
	return PathInfo{Hops: b.hops, Bottleneck: b.bn, Delay: b.delay, BaseRTT: 2*b.delay + b.tx}, true
}

// Unreachable returns a host that host cannot reach (through switches
// only), and ok = true when there is none. One breadth-first search:
// O(nodes + links).
func (g *Graph) Unreachable(host int) (int, bool) {
	seen := make([]bool, len(g.Nodes))
	s := g.HostNode[host]
	seen[s] = true
	queue := []int{s}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if n != s && !g.Nodes[n].Switch {
			continue
		}
		for _, li := range g.adj[n] {
			if o := g.Other(li, n); !seen[o] {
				seen[o] = true
				queue = append(queue, o)
			}
		}
	}
	for _, h := range g.Hosts {
		if !seen[g.HostNode[h]] {
			return h, false
		}
	}
	return 0, true
}

// NodeNames lists example node names for error messages
// ("hosts h0…h15, switches [leaf0 leaf1 …]").
func (g *Graph) NodeNames() string {
	var sws []string
	for _, n := range g.Nodes {
		if n.Switch {
			sws = append(sws, n.Name)
		}
	}
	if len(sws) > 6 {
		sws = append(sws[:6], "…")
	}
	last := 0
	for _, h := range g.Hosts {
		last = max(last, h)
	}
	return fmt.Sprintf("hosts h0…h%d, switches %v", last, sws)
}

// Build creates the graph's fabric in w: every node in order (switches
// with c.Switch, hosts with c.NIC and one port per NIC index their links
// use), then every link in
// order, then the watchdog, Network.Build, and ECN on every switch port
// (c.ECN or c.ECNByRate, when c.Switch.ECN is nil). The returned
// Topology's Cables are in link order and its layers are filled from the
// nodes' roles.
func Build(w *sim.World, g *Graph, c Common) (*Topology, error) {
	c.defaults()
	net := sim.NewNetwork(w)
	t := &Topology{Net: net, Graph: g, HostRate: c.HostRate}
	nodes := make([]sim.Node, len(g.Nodes))
	t.byID = make([]*sim.Host, len(g.HostNode))
	nics := make([]int, len(g.Nodes))
	for _, l := range g.Links {
		for _, n := range []int{l.A, l.B} {
			if !g.Nodes[n].Switch {
				nics[n] = max(nics[n], l.NIC+1)
			}
		}
	}
	for i, n := range g.Nodes {
		if n.Switch {
			s, err := net.AddSwitch(n.Name, c.Switch)
			if err != nil {
				return nil, err
			}
			nodes[i] = s
			switch n.Role {
			case RoleLeaf:
				t.Leaves = append(t.Leaves, s)
			case RoleSpine:
				t.Spines = append(t.Spines, s)
			case RoleEdge:
				t.Edges = append(t.Edges, s)
			case RoleAgg:
				t.Aggs = append(t.Aggs, s)
			case RoleCore:
				t.Cores = append(t.Cores, s)
			}
			continue
		}
		h, err := net.AddHost(n.Name, nics[i], c.NIC)
		if err != nil {
			return nil, err
		}
		t.byID[n.Host] = h
	}
	end := func(n, nic int) sim.Node {
		if g.Nodes[n].Switch {
			return nodes[n]
		}
		return t.byID[g.Nodes[n].Host].NIC(nic)
	}
	t.Cables = make([]*sim.Cable, len(g.Links))
	for i, l := range g.Links {
		cb, err := net.Link(end(l.A, l.NIC), end(l.B, l.NIC), sim.LinkConfig{Rate: l.Rate, Delay: l.Delay, Loss: l.Loss})
		if err != nil {
			return nil, err
		}
		t.Cables[i] = cb
	}
	if g.Bottleneck >= 0 {
		t.Bottleneck = t.Cables[g.Bottleneck]
	}
	if err := net.SetWatchdog(c.Watchdog); err != nil {
		return nil, err
	}
	if err := net.Build(); err != nil {
		return nil, err
	}
	ecn := c.ECN
	if ecn == nil && c.ECNByRate {
		ecn = sim.ECNForRate
	}
	if c.Switch.ECN == nil && ecn != nil {
		for _, s := range net.Switches {
			for _, p := range s.Ports() {
				if err := p.SetECN(ecn(p.Rate())); err != nil {
					return nil, err
				}
			}
		}
	}
	t.Hosts = net.Hosts
	return t, nil
}
