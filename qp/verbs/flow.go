package verbs

// RoCEv2 carries no ECMP entropy of its own: switches hash the outer UDP/IP
// 5-tuple, and the only field that varies between the queue pairs of two
// hosts is the UDP source port. Devices derive it from the GRH flow label
// of the QP's address vector with the kernel's rdma_flow_label_to_udp_sport
// (mlx5, and rdma_rxe: TestVMFlowEntropy sniffs the wire to check); rxe
// without a flow label hashes the local QPN instead. mptx gives every path
// of a connection its own flow label, chosen so that their source ports
// differ (pathFlowLabels), and reports the port in qp.PathInfo.SrcPort.

const (
	flowLabelMask   = 0xFFFFF // 20-bit IPv6 flow label
	roceUDPSportMin = 0xC000  // IB_ROCE_UDP_ENCAP_VALID_PORT_MIN
	goldenRatio32   = 0x61C88647
)

// flowLabel returns the flow label for a path between local QPN lqpn and
// remote QPN rqpn, as the kernel's rdma_calc_flow_label computes it
// (include/rdma/ib_verbs.h), made non-zero (0 means "none" in the GRH).
func flowLabel(lqpn, rqpn uint32) uint32 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	fl := uint32(v & flowLabelMask)
	if fl == 0 {
		fl = 1
	}
	return fl
}

// flowLabelSport returns the UDP source port a flow label maps to
// (rdma_flow_label_to_udp_sport, include/rdma/ib_verbs.h).
func flowLabelSport(fl uint32) uint16 {
	lo := fl & 0x03FFF
	hi := fl & 0xFC000
	lo ^= hi >> 14
	return uint16(lo | roceUDPSportMin)
}

// rxeSport returns rdma_rxe's UDP source port for a QP: RXE_ROCE_V2_SPORT
// + hash_32(qpn, 14) (drivers/infiniband/sw/rxe/rxe_qp.c, rxe_qp_init_req).
func rxeSport(qpn uint32) uint16 {
	h := (qpn * goldenRatio32) >> (32 - 14)
	return uint16(roceUDPSportMin + (h & 0x3FFF))
}

// srcPort returns the UDP source port a QP with flow label fl sends from:
// the flow-label mapping, or rxe's QPN hash when there is no label.
func srcPort(lqpn, fl uint32) uint16 {
	if fl == 0 {
		return rxeSport(lqpn)
	}
	return flowLabelSport(fl)
}

// pathFlowLabels returns a flow label per path (local and remote QPNs),
// starting from the kernel's rdma_calc_flow_label and perturbing it until
// every path's UDP source port is distinct, so that ECMP can spread them.
func pathFlowLabels(lqpn, rqpn []uint32) []uint32 {
	used := map[uint16]bool{}
	out := make([]uint32, len(lqpn))
	for i := range lqpn {
		fl := flowLabel(lqpn[i], rqpn[i])
		for k := uint32(1); used[flowLabelSport(fl)] && k < 1<<14; k++ {
			fl = (flowLabel(lqpn[i], rqpn[i]) + k) & flowLabelMask
			if fl == 0 {
				fl = 1
			}
		}
		used[flowLabelSport(fl)] = true
		out[i] = fl
	}
	return out
}
