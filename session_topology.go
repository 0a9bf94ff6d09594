package mptx

import (
	"fmt"
	"net/netip"

	"github.com/mptx-dev/mptx/qp/verbs"
)

// TopologyTCPPaths lays a TCP session's paths over the NICs a ranking
// chose (qp/verbs.ChoosePaths, Host.ChooseNICs): perNIC paths on every NIC
// of the best tier (of every tier, in rank order, when all is set), each
// leaving from the NIC's first address (Local; routing then takes its
// netdev) to the address the cluster file gives the peer NIC it is paired
// with (Remote; "" when unknown: the address dialed). Paths on one NIC
// share its NIC index, so that they share one port pacer. The result goes
// in Config.TCP.Paths.
//
// The engine tells preferred paths from fall-back ones by their tier
// (multipath.PathConfig.Tier, docs/memory.md, "Topology"), but TCP paths
// carry no tier yet, so all is best left false: with it, the fall-back
// NICs would share the load equally; without it they carry nothing, and a
// session whose preferred NICs fail fails rather than moving to them.
func TopologyTCPPaths(topo *verbs.Topology, choices []verbs.PathChoice, cluster *verbs.Cluster, peer string, perNIC int, all bool) ([]TCPPath, error) {
	if perNIC < 1 {
		return nil, fmt.Errorf("mptx: TopologyTCPPaths: perNIC = %d (valid: 1 or more)", perNIC)
	}
	peerHost, _ := cluster.Host(peer)
	var out []TCPPath
	nic := 0
	for _, c := range choices {
		if !all && c.Tier > choices[0].Tier {
			break
		}
		p, ok := topo.Device(c.Device)
		if !ok {
			return nil, fmt.Errorf("mptx: TopologyTCPPaths: device %q is not in the topology", c.Device)
		}
		var local netip.Addr
		for _, a := range p.Addrs {
			if a.Addr().IsGlobalUnicast() || a.Addr().IsPrivate() {
				local = a.Addr()
				break
			}
		}
		if !local.IsValid() {
			continue // no address: no TCP path over this NIC
		}
		var remote string
		if n, ok := peerHost.NIC(c.Peer); ok && n.Address != "" {
			remote = n.Address
		}
		for range perNIC {
			out = append(out, TCPPath{Local: local.String(), Remote: remote, NIC: nic})
		}
		nic++
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("mptx: TopologyTCPPaths: none of the chosen NICs has an address (netdevs down, or Topology.ReadAddrs not called)")
	}
	return out, nil
}
