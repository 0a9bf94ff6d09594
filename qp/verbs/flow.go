package verbs

// RoCEv2 carries no ECMP entropy of its own: switches hash the outer UDP/IP
// 5-tuple, and the only field that varies between the queue pairs of two
// hosts is the UDP source port. Devices derive it either from the GRH flow
// label (mlx5, following the kernel's rdma_flow_label_to_udp_sport) or, in
// rdma_rxe, from a hash of the local QPN. mptx gives every path its own flow
// label (flowLabel) and reports the resulting source port in
// qp.PathInfo.SrcPort, so distinct QPNs always mean distinct ports.

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

// srcPort returns the UDP source port the device uses for a path: rxe's QPN
// hash for Soft-RoCE, the flow-label mapping otherwise.
func srcPort(soft bool, lqpn, fl uint32) uint16 {
	if soft {
		return rxeSport(lqpn)
	}
	return flowLabelSport(fl)
}
