package verbs

import (
	"fmt"
	"slices"
	"strings"
)

// Locality is where a tensor's memory lies: the NUMA node of its pages
// (Buffer.NUMANode, get_mempolicy(2)) and, for device memory, the PCI
// function holding it (a GPU). Zero fields are unknown: use
// Locality{NUMANode: -1} for "anywhere".
type Locality struct {
	NUMANode int // -1 if unknown
	// PCIAddr is the memory's PCI function ("0000:3b:00.0"), "" for host
	// memory; PCIHostBridge and PCIPath its place (PCIePath fills them).
	PCIAddr       string
	PCIHostBridge string
	PCIPath       []string
}

// RailRelation is how a local NIC and the peer NIC it is paired with
// share the fabric, by the cluster file.
type RailRelation uint8

// Rail relations, nearest first.
const (
	// RailSwitch: both NICs on one leaf switch (the file's switch field).
	RailSwitch RailRelation = iota
	// RailSame: both on one rail.
	RailSame
	// RailUnknown: no cluster file, or one of the hosts or NICs is not in
	// it; the receiver pairs by NIC index (ListenConfig.NICs).
	RailUnknown
	// RailCrossed: the peer has no NIC on this NIC's rail: the traffic
	// crosses rails, through the spine layer.
	RailCrossed
)

var railNames = [...]string{"same-switch", "same-rail", "unknown", "crossed"}

// String returns the relation's name.
func (r RailRelation) String() string {
	if int(r) < len(railNames) {
		return railNames[r]
	}
	return fmt.Sprintf("RailRelation(%d)", uint8(r))
}

// MemoryRelation is how close a local NIC is to the tensor's memory.
type MemoryRelation uint8

// Memory relations, nearest first.
const (
	// MemSwitch: the NIC shares a PCIe switch with the memory's PCI
	// function (GPUDirect RDMA stays below the root complex).
	MemSwitch MemoryRelation = iota
	// MemNode: the NIC is on the memory's NUMA node (or one of them is
	// unknown: no penalty without evidence).
	MemNode
	// MemRemote: the NIC is on another NUMA node: its DMA crosses the
	// inter-socket link.
	MemRemote
)

var memNames = [...]string{"pcie-switch", "numa-local", "numa-remote"}

// String returns the relation's name.
func (r MemoryRelation) String() string {
	if int(r) < len(memNames) {
		return memNames[r]
	}
	return fmt.Sprintf("MemoryRelation(%d)", uint8(r))
}

// PathChoice is one local NIC ranked for a transfer.
type PathChoice struct {
	Device string // local RDMA device
	// Peer is the peer's device this NIC should talk to (same switch,
	// else same rail, else the least used); "" when unknown.
	Peer string
	Mem  MemoryRelation
	Rail RailRelation
	// Tier ranks the choices: 0 for the best class present, then 1, 2...
	// Paths of tier 0 are the preferred ones; the others are the
	// fall-back.
	Tier int
}

func (c PathChoice) String() string {
	peer := c.Peer
	if peer == "" {
		peer = "?"
	}
	return fmt.Sprintf("%s->%s tier %d (%s, %s)", c.Device, peer, c.Tier, c.Mem, c.Rail)
}

// PathQuery asks ChoosePaths to rank local NICs for a transfer.
type PathQuery struct {
	// Candidates are the local devices to rank (ACTIVE ports, say), in
	// the order to keep among equals; empty means every device of the
	// topology.
	Candidates []string
	Memory     Locality
	// Cluster, Self and Peer find the two hosts in the cluster file
	// (Cluster.Host: a name or an address); a nil Cluster leaves rails
	// unknown.
	Cluster    *Cluster
	Self, Peer string
}

// ChoosePaths ranks local NICs for a transfer of memory at q.Memory to
// q.Peer. The rank of a NIC is, in this order of importance:
//
//  1. rail alignment: a NIC whose rail the peer also has comes before one
//     whose traffic would cross rails (through the spine, which every
//     rail shares and which is usually oversubscribed; NCCL's PXN makes
//     the same choice, moving data inside the host to reach a
//     rail-aligned NIC rather than crossing rails in the fabric);
//  2. closeness to the memory: the memory's PCIe switch, then its NUMA
//     node, then another node (whose DMA crosses the inter-socket link);
//  3. a peer NIC on the same leaf switch before one on the same rail.
//
// Tiers number the classes present, densely, from 0. Each NIC is paired
// with the peer NIC nearest in the fabric, spreading NICs over the peer's
// NICs of a rail. Unknown facts (no cluster file, no NUMA node) never
// demote a NIC.
func ChoosePaths(topo *Topology, q PathQuery) ([]PathChoice, error) {
	cands := q.Candidates
	if len(cands) == 0 {
		for _, p := range topo.Devices {
			cands = append(cands, p.Device)
		}
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("verbs: ChoosePaths: no RDMA devices to choose from")
	}
	var self, peer *ClusterHost
	if q.Cluster != nil {
		var ok bool
		if self, ok = q.Cluster.Host(q.Self); !ok {
			return nil, fmt.Errorf("verbs: this host %q is not in the cluster topology (hosts: %s)", q.Self, q.Cluster.hostNames())
		}
		if peer, ok = q.Cluster.Host(q.Peer); !ok {
			return nil, fmt.Errorf("verbs: peer %q is not in the cluster topology (hosts: %s)", q.Peer, q.Cluster.hostNames())
		}
	}
	out := make([]PathChoice, 0, len(cands))
	for _, name := range cands {
		p, ok := topo.Device(name)
		if !ok {
			return nil, fmt.Errorf("verbs: ChoosePaths: device %q is not in the topology (devices: %s)", name, topo.deviceNames())
		}
		out = append(out, PathChoice{Device: name, Mem: memRelation(p, q.Memory), Rail: RailUnknown})
	}
	if self != nil {
		// Pair the NICs the peer has a rail for first, so that the
		// spreading over the peer's NICs of a rail is not spent on
		// crossed pairs.
		mine := make([]ClusterNIC, len(out))
		order := make([]int, 0, len(out))
		for i := range out {
			var ok bool
			if mine[i], ok = self.NIC(out[i].Device); ok {
				order = append(order, i)
				_, out[i].Rail = pairPeer(mine[i], peer, nil)
			}
		}
		slices.SortStableFunc(order, func(a, b int) int { return int(out[a].Rail) - int(out[b].Rail) })
		used := map[string]int{} // peer device → pairs so far
		for _, i := range order {
			out[i].Peer, out[i].Rail = pairPeer(mine[i], peer, used)
			used[out[i].Peer]++
		}
	}
	key := func(c PathChoice) [3]int {
		crossed, near := 0, 1
		if c.Rail == RailCrossed {
			crossed = 1
		}
		if c.Rail == RailSwitch {
			near = 0
		}
		return [3]int{crossed, int(c.Mem), near}
	}
	var keys [][3]int
	for _, c := range out {
		keys = append(keys, key(c))
	}
	distinct := slices.Clone(keys)
	slices.SortFunc(distinct, func(a, b [3]int) int { return slices.Compare(a[:], b[:]) })
	distinct = slices.Compact(distinct)
	for i := range out {
		k, _ := slices.BinarySearchFunc(distinct, keys[i], func(a, b [3]int) int { return slices.Compare(a[:], b[:]) })
		out[i].Tier = k
	}
	slices.SortStableFunc(out, func(a, b PathChoice) int { return a.Tier - b.Tier })
	return out, nil
}

// memRelation relates a NIC to the memory.
func memRelation(p Placement, m Locality) MemoryRelation {
	if m.PCIAddr != "" && len(m.PCIPath) > 0 &&
		pcieRelation(p.HostBridge, p.PCIPath, p.NUMANode, m.PCIHostBridge, m.PCIPath, m.NUMANode) == PCIeSwitch {
		return MemSwitch
	}
	if p.NUMANode >= 0 && m.NUMANode >= 0 && p.NUMANode != m.NUMANode {
		return MemRemote
	}
	return MemNode
}

// pairPeer picks the peer NIC for mine: on its switch, else on its rail,
// else any (crossed); among equals the least used so far (used may be
// nil), then the first in the file.
func pairPeer(mine ClusterNIC, peer *ClusterHost, used map[string]int) (string, RailRelation) {
	best, rel := "", RailCrossed
	for _, n := range peer.NICs {
		r := RailCrossed
		switch {
		case mine.Switch != "" && n.Switch == mine.Switch && n.Rail == mine.Rail:
			r = RailSwitch
		case n.Rail == mine.Rail:
			r = RailSame
		}
		if best == "" || r < rel || (r == rel && used[n.Device] < used[best]) {
			best, rel = n.Device, r
		}
	}
	return best, rel
}

// Preferred returns the devices of the best tier, in rank order.
func Preferred(cs []PathChoice) []string {
	var out []string
	for _, c := range cs {
		if c.Tier == cs[0].Tier {
			out = append(out, c.Device)
		}
	}
	return out
}

func (c *Cluster) hostNames() string {
	var s []string
	for _, h := range c.Hosts {
		s = append(s, h.Name)
	}
	return strings.Join(s, ", ")
}

func (t *Topology) deviceNames() string {
	var s []string
	for _, p := range t.Devices {
		s = append(s, p.Device)
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
