package sim

import (
	"fmt"
	"math"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/units"
)

// LinkConfig describes a cable: a full-duplex point-to-point link of one
// rate and one propagation delay in each direction.
type LinkConfig struct {
	// Rate is the line rate of both ends; required, 1 Gb/s..1.6 Tb/s (the
	// simulator is exercised at 25–800 Gb/s).
	Rate units.BitRate
	// Delay is the one-way propagation delay (about 5 ns per metre of
	// fibre); >= 0.
	Delay Time
	// Loss is the probability that a frame (data, ACK, NAK or CNP; PFC
	// frames are never lost) is dropped at random, in each direction;
	// 0..1. Port.SetLoss sets one direction.
	Loss float64
}

func (c *LinkConfig) validate() error {
	if c.Rate < units.Gbps || c.Rate > 1600*units.Gbps {
		return fmt.Errorf("sim: LinkConfig.Rate = %v (valid: 1Gbps..1.6Tbps)", c.Rate)
	}
	if c.Delay < 0 {
		return fmt.Errorf("sim: LinkConfig.Delay = %v (valid: >= 0)", c.Delay)
	}
	if !(c.Loss >= 0 && c.Loss <= 1) {
		return fmt.Errorf("sim: LinkConfig.Loss = %v (valid: 0..1)", c.Loss)
	}
	return nil
}

// ECNConfig is RED-style ECN marking at a switch egress queue (Floyd and
// Jacobson 1993, as DCQCN uses it: Zhu et al., SIGCOMM'15, §3): a data
// packet leaving a queue of q bytes is marked CE with probability
//
//	0                            q <= Kmin
//	Pmax·(q − Kmin)/(Kmax − Kmin)  Kmin < q <= Kmax
//	1                            q > Kmax
//
// q is the queue's data-class length in frame bytes left behind the packet
// as it starts transmission (marking at dequeue, as the HPCC ns-3 switch
// does in SwitchNode::SwitchNotifyDequeue, so marks reflect the latest
// queue).
type ECNConfig struct {
	Kmin, Kmax units.Bytes
	Pmax       float64
}

// Prob returns the marking probability at queue length q.
func (c *ECNConfig) Prob(q units.Bytes) float64 {
	switch {
	case q <= c.Kmin:
		return 0
	case q > c.Kmax:
		return 1
	}
	return c.Pmax * float64(q-c.Kmin) / float64(c.Kmax-c.Kmin)
}

func (c *ECNConfig) validate() error {
	if c.Kmin < 0 || c.Kmax <= c.Kmin {
		return fmt.Errorf("sim: ECNConfig Kmin = %v, Kmax = %v (valid: 0 <= Kmin < Kmax)", c.Kmin, c.Kmax)
	}
	if !(c.Pmax > 0 && c.Pmax <= 1) {
		return fmt.Errorf("sim: ECNConfig.Pmax = %v (valid: (0, 1])", c.Pmax)
	}
	return nil
}

// ECNForRate returns the RED thresholds the HPCC ns-3 configuration uses
// for a port of rate r (Li et al., SIGCOMM'19 artifact, run.py: Kmin 100 KB,
// Kmax 400 KB at 25 Gb/s, scaled linearly with the rate; Pmax 0.2).
func ECNForRate(r units.BitRate) *ECNConfig {
	s := float64(r) / float64(25*units.Gbps)
	return &ECNConfig{
		Kmin: units.Bytes(100 * float64(units.KB) * s),
		Kmax: units.Bytes(400 * float64(units.KB) * s),
		Pmax: 0.2,
	}
}

// PFCConfig configures priority flow control (IEEE 802.1Qbb) on a switch's
// lossless data class, following the shared-buffer MMU of the HPCC ns-3
// switch (switch-mmu.cc). Each ingress port has a guaranteed Reserve, then
// draws from the shared pool; once its shared bytes reach the XOFF threshold
// it sends PAUSE to its upstream neighbour, and the bytes still arriving
// until the pause takes effect land in its Headroom. It sends RESUME when
// its headroom is empty and its shared bytes fall to the XON threshold.
//
// Thresholds are either static (XOff, XOn) or dynamic (Alpha > 0): XOFF =
// Alpha × (free shared buffer), XON = XOFF − ResumeOffset.
type PFCConfig struct {
	// Alpha is the dynamic-threshold fraction of free shared buffer; the
	// default (when XOff is 0) is 1/8, the HPCC ns-3 pfc_a_shift of 3.
	Alpha float64
	// XOff and XOn are static thresholds on an ingress port's shared bytes,
	// used when XOff > 0 (then Alpha must be 0 and XOn < XOff).
	XOff, XOn units.Bytes
	// ResumeOffset is the dynamic XON hysteresis; 0 means 3 KiB (ns-3).
	ResumeOffset units.Bytes
	// Headroom is reserved per ingress port for bytes arriving after XOFF;
	// 0 computes it per port from first principles: the bytes the link can
	// deliver in two propagation delays (the pause travelling up and the
	// data already on the wire travelling down) plus three maximum frames
	// (one ahead of the PAUSE at our egress, one in transmission upstream,
	// one of slack for the upstream's reaction).
	Headroom units.Bytes
	// Reserve is guaranteed per ingress port; 0 means 4 KiB (ns-3).
	Reserve units.Bytes
}

// SwitchConfig configures a switch. The zero value is a lossless switch
// with a 32 MiB shared buffer, dynamic PFC thresholds, no ECN marking and
// ECMP.
type SwitchConfig struct {
	// Buffer is the shared packet buffer; 0 means 32 MiB.
	Buffer units.Bytes
	// Lossy makes the data class lossy: no PFC, drop-tail when the egress
	// queue exceeds its limit or the buffer is full.
	Lossy bool
	// EgressLimit is the lossy per-queue limit; 0 means a dynamic limit of
	// EgressAlpha × (free shared buffer) (Choudhury and Hahne, 1998).
	EgressLimit units.Bytes
	// EgressAlpha is the lossy dynamic-threshold factor; 0 means 1.
	EgressAlpha float64
	// PFC configures the lossless class.
	PFC PFCConfig
	// ECN enables RED marking on every egress port; nil disables it.
	ECN *ECNConfig
	// Spray forwards data packets over a uniformly random member of the
	// ECMP group instead of hashing the 5-tuple (per-packet spraying, for
	// comparison; with go-back-N receivers it causes reordering NAKs).
	Spray bool
	// INT stamps in-band telemetry (queue length, transmitted bytes,
	// timestamp, rate) on data packets at every egress (HPCC).
	INT bool
	// Seed is the ECMP hash seed; 0 draws one from the world's RNG.
	Seed uint64
}

func (c *SwitchConfig) withDefaults() (SwitchConfig, error) {
	d := *c
	if d.Buffer == 0 {
		d.Buffer = 32 * units.MiB
	}
	if d.Buffer < 64*units.KiB {
		return d, fmt.Errorf("sim: SwitchConfig.Buffer = %v (valid: 0 for 32MiB, or >= 64KiB)", c.Buffer)
	}
	if d.EgressLimit < 0 {
		return d, fmt.Errorf("sim: SwitchConfig.EgressLimit = %v (valid: >= 0)", c.EgressLimit)
	}
	if d.EgressAlpha == 0 {
		d.EgressAlpha = 1
	}
	if !(d.EgressAlpha > 0) || math.IsInf(d.EgressAlpha, 0) {
		return d, fmt.Errorf("sim: SwitchConfig.EgressAlpha = %v (valid: > 0)", c.EgressAlpha)
	}
	p := &d.PFC
	switch {
	case p.XOff > 0:
		if p.Alpha != 0 || p.XOn < 0 || p.XOn >= p.XOff {
			return d, fmt.Errorf("sim: PFCConfig static thresholds XOff = %v, XOn = %v, Alpha = %v (valid: 0 <= XOn < XOff, Alpha 0)", p.XOff, p.XOn, p.Alpha)
		}
	case p.XOff < 0:
		return d, fmt.Errorf("sim: PFCConfig.XOff = %v (valid: >= 0)", p.XOff)
	default:
		if p.Alpha == 0 {
			p.Alpha = 1.0 / 8
		}
		if !(p.Alpha > 0 && p.Alpha <= 64) {
			return d, fmt.Errorf("sim: PFCConfig.Alpha = %v (valid: (0, 64])", p.Alpha)
		}
	}
	if p.ResumeOffset == 0 {
		p.ResumeOffset = 3 * units.KiB
	}
	if p.Reserve == 0 {
		p.Reserve = 4 * units.KiB
	}
	if p.ResumeOffset < 0 || p.Reserve < 0 || p.Headroom < 0 {
		return d, fmt.Errorf("sim: PFCConfig ResumeOffset = %v, Reserve = %v, Headroom = %v (valid: >= 0)", p.ResumeOffset, p.Reserve, p.Headroom)
	}
	if d.ECN != nil {
		if err := d.ECN.validate(); err != nil {
			return d, err
		}
		e := *d.ECN
		d.ECN = &e
	}
	return d, nil
}

// NICConfig configures a NIC (one RoCE port) and the QPs it creates.
type NICConfig struct {
	// MTU is the payload bytes per data packet, any value from 256 to
	// 9216 (a 9 KB jumbo frame), so that other simulators' payloads run
	// unchanged (HPCC ns-3 uses 1000, htsim 4000); 0 means 4096. (Real
	// RoCE NICs take only the IB path MTUs 256 to 4096; qp/verbs keeps
	// that set.)
	MTU units.Bytes
	// Header is the header bytes of every data packet. 0 means RoCEv2
	// framing: 62 bytes (Ethernet, IPv4, UDP, BTH, ICRC, FCS), plus the
	// RETH on a message's first packet and the ImmDt on a WRITE WITH
	// IMM's last (see the package documentation). Any other value, 1 to
	// 1024, is another simulator's framing: every data packet is exactly
	// Header + payload bytes (HPCC ns-3 counts 48, htsim 64); ACKs, NAKs
	// and CNPs keep their RoCEv2 sizes.
	Header units.Bytes
	// AckEvery makes the responder acknowledge every AckEvery in-order
	// packets, and always the last packet of a message; 0 means 4.
	AckEvery int
	// CNPInterval is the notification point's minimum gap between CNPs to
	// one QP (DCQCN: 50 µs, mlx5 np_min_time_between_cnps); 0 means 50 µs.
	CNPInterval Time
	// NAKInterval is how soon the responder may repeat a NAK for the same
	// expected PSN (HPCC ns-3 RdmaHw nack_interval); 0 means 500 µs.
	NAKInterval Time
	// AckTimeout is the RC local ACK timeout exponent t: the requester
	// retransmits after 4.096 µs × 2^t without progress (ibv_modify_qp(3),
	// IBV_QP_TIMEOUT); 0 means 14 (67 ms); -1 means infinite (verbs' 0).
	AckTimeout int
	// RetryCount is how many times the requester retransmits after a
	// timeout or NAK without progress before the QP enters the error state
	// (IBV_QP_RETRY_CNT, 0..7); 0 means 7, -1 means none.
	RetryCount int
	// MaxSendWR is each QP's send queue depth; 0 means 1024.
	MaxSendWR int
	// MaxRdAtomic is how many RDMA READs a requester QP keeps outstanding
	// at once (ibv_modify_qp(3) max_rd_atomic; ConnectX allows 16); a
	// READ beyond it waits in the send queue. 0 means 16.
	MaxRdAtomic int
	// NoECT sends data packets as not ECN-capable (no marking).
	NoECT bool
	// INTHeader is extra bytes every data packet and ACK carries for
	// telemetry (HPCC's INT header; 0 ignores its size).
	INTHeader units.Bytes
	// RateControl, if set, builds a NIC-level congestion controller for
	// every QP (for example cc.NewDCQCN wrapped in a closure): the NIC calls
	// OnSend per packet, OnCNP per CNP, OnAck per ACK and OnTimer at
	// Deadline, and paces the QP at min(Rate, the QP's rate limit) and caps
	// its bytes in flight at Window. nil means no NIC congestion control.
	RateControl func(path cc.PathInfo) (cc.Algorithm, error)
	// DCQCN, when RateControl is nil, enables NIC-level DCQCN on every QP:
	// the cc package's reaction point (cc.NewDCQCN) with this
	// configuration (zero fields take its defaults). Together with the
	// switches' ECN and the responders' CNPs this is "NIC DCQCN only".
	DCQCN *cc.DCQCNConfig
	// HPCC, when RateControl and DCQCN are nil, enables NIC-level HPCC on
	// every QP (cc.NewHPCC with this configuration): the NIC feeds it the
	// INT of every ACK, as HPCC's reference implementation reacts per ACK
	// (Li et al., SIGCOMM'19 §4; HPCC ns-3 RdmaHw::HandleAckHp), and
	// paces at W/T with W bytes in flight at most. The switches must stamp
	// INT (SwitchConfig.INT).
	HPCC *cc.HPCCConfig
	// AckInDataClass sends ACKs, NAKs and CNPs in the data class, behind
	// the data in every switch queue and subject to PFC pauses, instead of
	// the strict-priority control class (HPCC ns-3 ACK_HIGH_PRIO 0). At
	// the NIC they still go before data.
	AckInDataClass bool
}

// MaxMTU is the largest NICConfig.MTU: a 9 KB jumbo frame's payload.
const MaxMTU = 9216

func (c *NICConfig) withDefaults() (NICConfig, error) {
	d := *c
	if d.MTU == 0 {
		d.MTU = DefaultMTU
	}
	if d.MTU < 256 || d.MTU > MaxMTU {
		return d, fmt.Errorf("sim: NICConfig.MTU = %d bytes (valid: 0 for 4096, or 256..%d)", int64(c.MTU), MaxMTU)
	}
	if d.Header < 0 || d.Header > 1024 {
		return d, fmt.Errorf("sim: NICConfig.Header = %d bytes (valid: 0 for RoCEv2 framing, or 1..1024)", int64(c.Header))
	}
	if d.AckEvery == 0 {
		d.AckEvery = 4
	}
	if d.MaxRdAtomic == 0 {
		d.MaxRdAtomic = 16
	}
	if d.MaxRdAtomic < 1 || d.MaxRdAtomic > 1<<16 {
		return d, fmt.Errorf("sim: NICConfig.MaxRdAtomic = %d (valid: 0 for 16, or 1..65536)", c.MaxRdAtomic)
	}
	if d.AckEvery < 1 || d.AckEvery > 1<<16 {
		return d, fmt.Errorf("sim: NICConfig.AckEvery = %d (valid: 0 for 4, or 1..65536)", c.AckEvery)
	}
	if d.CNPInterval == 0 {
		d.CNPInterval = 50 * Microsecond
	}
	if d.NAKInterval == 0 {
		d.NAKInterval = 500 * Microsecond
	}
	if d.CNPInterval < 0 || d.NAKInterval < 0 {
		return d, fmt.Errorf("sim: NICConfig CNPInterval = %v, NAKInterval = %v (valid: >= 0)", c.CNPInterval, c.NAKInterval)
	}
	if d.AckTimeout == 0 {
		d.AckTimeout = 14
	}
	if d.AckTimeout < -1 || d.AckTimeout > 31 {
		return d, fmt.Errorf("sim: NICConfig.AckTimeout = %d (valid: -1 for infinite, 0 for 14, or 1..31)", c.AckTimeout)
	}
	if d.RetryCount == 0 {
		d.RetryCount = 7
	}
	if d.RetryCount < -1 || d.RetryCount > 7 {
		return d, fmt.Errorf("sim: NICConfig.RetryCount = %d (valid: -1 for none, 0 for 7, or 1..7)", c.RetryCount)
	}
	if d.RetryCount == -1 {
		d.RetryCount = 0
	}
	if d.MaxSendWR == 0 {
		d.MaxSendWR = 1024
	}
	if d.MaxSendWR < 1 || d.MaxSendWR > 1<<20 {
		return d, fmt.Errorf("sim: NICConfig.MaxSendWR = %d (valid: 0 for 1024, or 1..1048576)", c.MaxSendWR)
	}
	switch {
	case d.RateControl != nil:
	case d.DCQCN != nil:
		dc := *d.DCQCN
		d.RateControl = func(path cc.PathInfo) (cc.Algorithm, error) { return cc.NewDCQCN(dc, path) }
	case d.HPCC != nil:
		hc := *d.HPCC
		d.RateControl = func(path cc.PathInfo) (cc.Algorithm, error) { return cc.NewHPCC(hc, path) }
	}
	if d.INTHeader < 0 || d.INTHeader > 1024 {
		return d, fmt.Errorf("sim: NICConfig.INTHeader = %v (valid: 0..1024)", c.INTHeader)
	}
	return d, nil
}

// AckTimeoutDuration returns the RC local ACK timeout for exponent t:
// 4.096 µs × 2^t (IBA Vol. 1 §C9-140 and ibv_modify_qp(3)); Forever for
// t < 0.
func AckTimeoutDuration(t int) Time {
	if t < 0 {
		return Forever
	}
	return 4096 * Nanosecond << uint(t)
}

// WatchdogConfig configures the PFC watchdog of every port: a port whose
// data class stays paused continuously for Threshold is reported as a pause
// storm or deadlock (as switch PFC watchdogs do: SONiC pfcwd, Juniper, mlx5
// stall prevention). With Recover, a switch port then drops its queued and
// arriving lossless packets and ignores pause for Restore (SONiC's "drop"
// action), and a NIC port ignores pause for Restore (mlx5 stall prevention),
// which breaks the dependency; go-back-N recovers the dropped packets.
type WatchdogConfig struct {
	Threshold Time // 0 disables the watchdog
	Recover   bool
	Restore   Time // 0 means 10 × Threshold
	// OnStorm, if set, is called (inside the event loop) for each report.
	OnStorm func(PauseStorm)
}

// PauseStorm is one watchdog report.
type PauseStorm struct {
	Port     *Port
	Since    Time // when the port was paused
	Detected Time
}
