package experiments

import (
	"strconv"

	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/topo"
)

// Graph is a topology spelled out (sim/topo's layout: named hosts and
// switches, links with rates and delays). Experiments use it to validate
// host ids and failure targets, to compute each flow's ideal completion
// time, and, through topo.Build, to build the simulated fabric: sim/topo
// is the one fabric builder, and its physics tests cover what the suites
// simulate.
type Graph = topo.Graph

// PathInfo summarises the best empty path between two hosts.
type PathInfo = topo.PathInfo

// common are the topo options a validated topology implies for its layout
// (the switch, NIC and ECN settings are the run's; see simRun.buildFabric).
func (t *Topology) common() topo.Common {
	return topo.Common{HostRate: t.HostRate, Delay: sim.FromDuration(t.LinkDelay.D()), NoDelay: t.LinkDelay == 0, Loss: t.Loss}
}

// Graph lays the topology out with sim/topo: star, dumbbell (hosts per
// side), leaf-spine (fabric_rate uplinks), fat-tree and multi-rail map to
// its Config types, ns3 to a graph of the file's nodes and links. Host
// overrides then set their hosts' link rates. The topology must have been
// validated (Parse), so the layouts cannot fail.
func (t *Topology) Graph() *Graph {
	c := t.common()
	var g *Graph
	var err error
	switch t.Kind {
	case TopoStar:
		g, err = topo.StarConfig{Common: c, Hosts: t.Hosts}.Graph()
	case TopoDumbbell:
		g, err = topo.DumbbellConfig{Common: c, Left: t.Hosts, Right: t.Hosts, BottleneckRate: t.FabricRate}.Graph()
	case TopoLeafSpine:
		g, err = topo.LeafSpineConfig{Common: c, Leaves: t.Leaves, Spines: t.Spines, HostsPerLeaf: t.HostsPerLeaf, UplinkRate: t.FabricRate}.Graph()
	case TopoFatTree:
		g, err = topo.FatTreeConfig{Common: c, K: t.K, CoreRate: t.FabricRate}.Graph()
	case TopoMultiRail:
		g, err = topo.MultiRailConfig{Common: c, Hosts: t.Hosts, Rails: t.Rails, HostsPerLeaf: t.HostsPerLeaf, Spines: t.Spines, UplinkRate: t.FabricRate}.Graph()
	case TopoNS3:
		g = ns3Graph(t.NS3)
	default:
		panic("experiments: BUG: Graph of unvalidated topology kind " + t.Kind)
	}
	if err != nil {
		panic("experiments: BUG: validated topology does not lay out: " + err.Error())
	}
	for _, o := range t.HostOverrides {
		for _, id := range o.Hosts.IDs {
			g.SetHostRate(id, o.Rate)
		}
	}
	return g
}

// ns3Graph lays out an HPCC ns-3 topology: node ids are the file's, hosts
// are "h<id>" and switches "n<id>"; a host's links take its NIC ports in
// file order, and its group is the switch it hangs off.
func ns3Graph(ns *NS3Topology) *Graph {
	g := topo.NewGraph()
	isSw := make([]bool, ns.Nodes)
	for _, s := range ns.Switches {
		isSw[s] = true
	}
	for id := range ns.Nodes {
		if isSw[id] {
			g.AddSwitch("n"+strconv.Itoa(id), topo.RoleOther)
		} else {
			g.AddHost(id, -1)
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
		g.Link(k.Src, k.Dst, k.Rate, sim.FromDuration(k.Delay), n, k.ErrorRate)
	}
	g.NICs = 1 // failure targets name a host's first NIC; ns-3 hosts have one
	g.SetGroupsBySwitch()
	return g
}
