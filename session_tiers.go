package mptx

import (
	"fmt"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/verbs"
)

// Topology tiers for a session's paths: the verbs transport ranks the
// host's NICs for the send buffer's memory (verbs.Host.ChooseNICs; the
// NUMA node, the PCIe switch of GPU memory), opens the connection over
// every ranked NIC in rank order, and gives each path its NIC's tier
// (multipath.PathConfig.Tier). The engine then keeps chunks on the
// preferred NICs and moves them to the others only when those have had
// no room for a few round trips, or are down: a session whose preferred
// NICs fail goes on over the rest instead of failing (docs/memory.md,
// "Topology").

// TieredPaths returns the engine configuration of a connection's paths
// (SenderConfig.Engine.Paths), as NewSender fills it from the paths
// (name, NIC, rate, RTT, MTU, hops), with each path's tier from the
// ranking of its device (verbs.ChoosePaths, Host.ChooseNICs): a device
// the ranking does not name goes after every ranked one. Sessions over
// verbs do this themselves; a driver built on NewSender over a
// verbs.Conn dialled with the ranked NICs (DialConfig.NICs) calls it.
func TieredPaths(infos []qp.PathInfo, choices []verbs.PathChoice) ([]multipath.PathConfig, error) {
	tiers := make(map[string]int, len(choices))
	worst := 0
	for _, c := range choices {
		tiers[c.Device] = c.Tier
		worst = max(worst, c.Tier)
	}
	out := make([]multipath.PathConfig, len(infos))
	for i, pi := range infos {
		tier, ok := tiers[pi.Device]
		if !ok {
			tier = worst + 1
		}
		if tier < 0 || tier >= multipath.MaxPaths {
			return nil, fmt.Errorf("mptx: NIC %s ranked in tier %d (valid: 0..%d)", pi.Device, tier, multipath.MaxPaths-1)
		}
		out[i] = multipath.PathConfig{
			Name: fmt.Sprintf("%s/qp%d", pi.Device, pi.QPN), NIC: pi.NIC,
			LineRate: pi.LineRate, BaseRTT: pi.BaseRTT, MTU: pi.MTU, Hops: pi.Hops, Tier: tier,
		}
	}
	return out, nil
}
