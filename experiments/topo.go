package experiments

import (
	"fmt"
	"strconv"
	"time"

	"github.com/mptx-dev/mptx/units"
)

// Graph is a topology spelled out: named nodes (hosts and switches) and
// full-duplex links. Experiments use it to validate host ids and failure
// targets, to compute each flow's ideal completion time, and to build the
// simulated fabric.
//
// Node names: hosts are "h<id>"; switches are "sw" (star), "left" and
// "right" (dumbbell), "leaf<i>" and "spine<i>" (leaf-spine), "edge<p>.<j>",
// "agg<p>.<j>" and "core<i>" (fat-tree, pod p), "r<r>-leaf<i>" and
// "r<r>-spine<i>" (multi-rail plane r) and "n<id>" (ns3, by ns-3 node id).
// They match sim/topo's names.
type Graph struct {
	Nodes []GraphNode
	Links []GraphLink
	// HostNode maps a host id to its node index; -1 where no host has that id.
	HostNode []int
	// Hosts lists the host ids in increasing order.
	Hosts []int
	// NICs is the number of NIC ports per host (multi-rail: Rails).
	NICs int

	byName map[string]int
	adj    [][]int // node → link indices
	loss   float64 // loss of links being added
}

// GraphNode is a host or a switch.
type GraphNode struct {
	Name   string
	Switch bool
	Host   int // host id, -1 for switches
	Group  int // leaf / edge switch index for hosts (cross_leaf), -1 if none
}

// GraphLink joins nodes A and B. For a host, NIC says which of its ports
// the link is on.
type GraphLink struct {
	A, B  int
	Rate  units.BitRate
	Delay time.Duration
	NIC   int
	Loss  float64 // random frame loss probability per direction
}

// Graph builds the topology's graph. The topology must have been validated.
func (t *Topology) Graph() *Graph {
	g := &Graph{byName: map[string]int{}, NICs: 1, loss: t.Loss}
	hostRate, fabRate, delay := t.HostRate, t.FabricRate, t.LinkDelay.D()
	host := func(id, group int) int {
		return g.add(GraphNode{Name: "h" + strconv.Itoa(id), Host: id, Group: group})
	}
	swn := func(name string) int {
		return g.add(GraphNode{Name: name, Switch: true, Host: -1, Group: -1})
	}
	sw := func(prefix string, i int) int { return swn(prefix + strconv.Itoa(i)) }
	switch t.Kind {
	case TopoStar:
		s := swn("sw")
		for h := range t.Hosts {
			g.link(host(h, -1), s, hostRate, delay, 0)
		}
	case TopoDumbbell:
		l, r := swn("left"), swn("right")
		for h := range 2 * t.Hosts {
			side := l
			if h >= t.Hosts {
				side = r
			}
			g.link(host(h, h/t.Hosts), side, hostRate, delay, 0)
		}
		g.link(l, r, fabRate, delay, 0)
	case TopoLeafSpine:
		leaves := make([]int, t.Leaves)
		for i := range leaves {
			leaves[i] = sw("leaf", i)
		}
		for h := range t.Leaves * t.HostsPerLeaf {
			g.link(host(h, h/t.HostsPerLeaf), leaves[h/t.HostsPerLeaf], hostRate, delay, 0)
		}
		for s := range t.Spines {
			sp := sw("spine", s)
			for _, l := range leaves {
				g.link(l, sp, fabRate, delay, 0)
			}
		}
	case TopoFatTree:
		// Al-Fares et al., SIGCOMM'08 §3: k pods of k/2 edge and k/2
		// aggregation switches, (k/2)² cores, k/2 hosts per edge switch;
		// aggregation switch j of every pod links to cores j·k/2 … j·k/2+k/2-1.
		half := t.K / 2
		cores := make([]int, half*half)
		for i := range cores {
			cores[i] = sw("core", i)
		}
		h := 0
		for p := range t.K {
			aggs := make([]int, half)
			for j := range aggs {
				aggs[j] = swn(fmt.Sprintf("agg%d.%d", p, j))
				for c := range half {
					g.link(aggs[j], cores[j*half+c], fabRate, delay, 0)
				}
			}
			for e := range half {
				edge := swn(fmt.Sprintf("edge%d.%d", p, e))
				for _, a := range aggs {
					g.link(edge, a, fabRate, delay, 0)
				}
				for range half {
					g.link(host(h, p*half+e), edge, hostRate, delay, 0)
					h++
				}
			}
		}
	case TopoMultiRail:
		// One leaf-spine plane per rail; NIC r of every host is on plane r.
		g.NICs = t.Rails
		hosts := make([]int, t.Hosts)
		for h := range hosts {
			hosts[h] = host(h, h/t.HostsPerLeaf)
		}
		leaves := (t.Hosts + t.HostsPerLeaf - 1) / t.HostsPerLeaf
		for r := range t.Rails {
			spines := make([]int, t.Spines)
			for i := range spines {
				spines[i] = swn(fmt.Sprintf("r%d-spine%d", r, i))
			}
			ls := make([]int, leaves)
			for i := range ls {
				ls[i] = swn(fmt.Sprintf("r%d-leaf%d", r, i))
				for _, sp := range spines {
					g.link(ls[i], sp, fabRate, delay, 0)
				}
			}
			for h, n := range hosts {
				g.link(n, ls[h/t.HostsPerLeaf], hostRate, delay, r)
			}
		}
	case TopoNS3:
		ns := t.NS3
		isSw := make([]bool, ns.Nodes)
		for _, s := range ns.Switches {
			isSw[s] = true
		}
		for id := range ns.Nodes {
			if isSw[id] {
				g.add(GraphNode{Name: "n" + strconv.Itoa(id), Switch: true, Host: -1, Group: -1})
			} else {
				g.add(GraphNode{Name: "h" + strconv.Itoa(id), Host: id, Group: -1})
			}
		}
		nic := make([]int, ns.Nodes)
		for _, k := range ns.Links {
			n := 0
			if !isSw[k.Src] {
				n = nic[k.Src]
				nic[k.Src]++
			} else if !isSw[k.Dst] {
				n = nic[k.Dst]
				nic[k.Dst]++
			}
			g.loss = k.ErrorRate
			g.link(k.Src, k.Dst, k.Rate, k.Delay, n)
		}
		// A host's group is the switch it hangs off (cross_leaf).
		for i, nd := range g.Nodes {
			if nd.Switch {
				continue
			}
			for _, li := range g.adj[i] {
				if o := g.other(li, i); g.Nodes[o].Switch {
					g.Nodes[i].Group = o
					break
				}
			}
		}
	default:
		panic("experiments: BUG: Graph of unvalidated topology kind " + t.Kind)
	}
	for _, o := range t.HostOverrides {
		for _, id := range o.Hosts.IDs {
			if id < len(g.HostNode) && g.HostNode[id] >= 0 {
				for _, li := range g.adj[g.HostNode[id]] {
					g.Links[li].Rate = o.Rate
				}
			}
		}
	}
	return g
}

func (g *Graph) add(n GraphNode) int {
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

func (g *Graph) link(a, b int, r units.BitRate, d time.Duration, nic int) {
	g.Links = append(g.Links, GraphLink{A: a, B: b, Rate: r, Delay: d, NIC: nic, Loss: g.loss})
	g.adj[a] = append(g.adj[a], len(g.Links)-1)
	g.adj[b] = append(g.adj[b], len(g.Links)-1)
}

func (g *Graph) other(li, n int) int {
	if g.Links[li].A == n {
		return g.Links[li].B
	}
	return g.Links[li].A
}

// HostRate returns the rate of host's first NIC link.
func (g *Graph) HostRate(host int) units.BitRate {
	n := g.HostNode[host]
	return g.Links[g.adj[n][0]].Rate
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
		if g.other(li, ia) == ib {
			return li, true
		}
	}
	return 0, false
}

// Group returns the leaf (edge switch) a host hangs off, -1 if the
// topology has none.
func (g *Graph) Group(host int) int { return g.Nodes[g.HostNode[host]].Group }

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
// highest bottleneck rate (ties: lowest delay). Paths never transit a host.
// ok is false when dst is unreachable.
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
				o := g.other(li, n)
				k := g.Links[li]
				c := state{hops: best[n].hops + 1, bn: min(best[n].bn, k.Rate), delay: best[n].delay + k.Delay, tx: best[n].tx + k.Rate.TxTime(mtu)}
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

// nodeNames lists example node names for error messages.
func (g *Graph) nodeNames() string {
	var sws []string
	for _, n := range g.Nodes {
		if n.Switch {
			sws = append(sws, n.Name)
		}
	}
	if len(sws) > 6 {
		sws = append(sws[:6], "…")
	}
	return fmt.Sprintf("hosts h0…h%d, switches %v", g.Hosts[len(g.Hosts)-1], sws)
}

// Unreachable returns a host that host cannot reach (through switches
// only; paths never transit a host), and ok = true when there is none.
// One breadth-first search: O(nodes + links).
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
			if o := g.other(li, n); !seen[o] {
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
