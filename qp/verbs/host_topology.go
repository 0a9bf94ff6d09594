package verbs

import "fmt"

// ChooseNICs ranks the host's open NICs whose port was ACTIVE when the
// host opened them for a transfer of memory at q.Memory to q.Peer
// (ChoosePaths over this host's sysfs topology; q.Candidates is
// replaced). The whole result, in order, is what DialConfig.NICs should
// get, with each path's tier given to the engine (mptx.TieredPaths,
// multipath.PathConfig.Tier), as sessions over verbs do; Preferred(result)
// restricts a connection to the best tier (docs/memory.md, "Topology").
func (h *Host) ChooseNICs(q PathQuery) ([]PathChoice, error) {
	topo, err := ReadTopology(SysRoot)
	if err != nil {
		return nil, err
	}
	q.Candidates = q.Candidates[:0:0]
	for _, n := range h.NICs() {
		if n.Port.Active() {
			q.Candidates = append(q.Candidates, n.Device.Name)
		}
	}
	if len(q.Candidates) == 0 {
		return nil, fmt.Errorf("%w: no open NIC has an ACTIVE port", ErrNoDevice)
	}
	return ChoosePaths(topo, q)
}
