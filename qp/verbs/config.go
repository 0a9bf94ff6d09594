package verbs

import (
	"fmt"
	"net"
	"time"

	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// HugePolicy says whether the memory pool uses hugetlb pages.
type HugePolicy uint8

// Huge-page policies.
const (
	// HugeAuto tries 2 MiB hugetlb pages (MAP_HUGETLB) and falls back to
	// ordinary pages with MADV_HUGEPAGE when none are reserved.
	HugeAuto HugePolicy = iota
	// HugeNever uses ordinary pages.
	HugeNever
	// HugeRequire fails OpenHost when hugetlb pages cannot be mapped.
	HugeRequire
)

// Access says how a receiver grants the sender remote write access to the
// region it advertises.
type Access uint8

// Access modes.
const (
	// AccessAuto uses AccessMemoryWindow where the device's type 2
	// memory windows confine the peer (not on Soft-RoCE; see
	// windowsConfine) and AccessMR otherwise.
	AccessAuto Access = iota
	// AccessMemoryWindow binds one type 2 memory window per path over
	// exactly the region (ibv_alloc_mw(3), IBV_WR_BIND_MW): the rkey opens
	// only that region, only through that path's QP, and dies with
	// ibv_dealloc_mw when the transfer ends. Nothing is registered per
	// transfer; the pool's MR carries no remote access at all.
	AccessMemoryWindow
	// AccessMR registers a dedicated MR with remote write access over the
	// region for the transfer's lifetime (ibv_reg_mr(3)), in a protection
	// domain of the connection's own, so that its rkey works on this
	// connection's QPs only. It is the fallback for devices without
	// memory windows and costs one registration (and one PD) per
	// transfer.
	AccessMR
)

// String returns the mode's name.
func (a Access) String() string {
	switch a {
	case AccessAuto:
		return "auto"
	case AccessMemoryWindow:
		return "memory-window"
	case AccessMR:
		return "mr"
	}
	return fmt.Sprintf("Access(%d)", uint8(a))
}

// HostConfig configures OpenHost. The zero value opens every ACTIVE RoCE
// port with a 64 MiB pool.
type HostConfig struct {
	// Devices names the NICs to open, as "dev" (port 1) or "dev:port"
	// ("rxe0", "mlx5_1:1"). Empty: every device port that is ACTIVE and has
	// a RoCEv2 GID.
	Devices []string
	// GIDIndex picks the source GID on every port. 0 means automatic: the
	// first RoCEv2 GID holding an IPv4-mapped address, else the first
	// RoCEv2 GID (rxe: index 1). The link-local GID 0 cannot be chosen.
	GIDIndex int
	// PoolSize is the size of the registered memory pool tensors are
	// allocated from; default 64 MiB, rounded up to the page size.
	PoolSize units.Bytes
	// HugePages selects hugetlb pages for the pool; default HugeAuto.
	HugePages HugePolicy
}

// QPConfig holds the RC queue-pair settings of ibv_modify_qp(3) and
// ibv_create_qp(3). Zero fields take the defaults documented per field.
type QPConfig struct {
	// MaxSendWR is each QP's send queue depth; default 256, valid
	// 1..the device's max_qp_wr.
	MaxSendWR int
	// MaxInline is the inline data size requested at creation, bytes;
	// default 0 (mptx writes from registered memory).
	MaxInline int
	// Timeout is the local ACK timeout, rounded up to 4.096 µs × 2^n with
	// n in 1..31 (IBV_QP_TIMEOUT); default n = 14, about 67 ms.
	Timeout time.Duration
	// RetryCount is the transport retry count, 1..7 (IBV_QP_RETRY_CNT);
	// default 7. A path whose peer stays silent fails after about
	// Timeout × (RetryCount+1).
	RetryCount int
	// RNRRetry is the receiver-not-ready retry count, 1..7 where 7 means
	// forever (IBV_QP_RNR_RETRY); default 7.
	RNRRetry int
	// MinRNRTimer is the RNR NAK delay the receiver asks for, rounded up
	// to the IB table (IBV_QP_MIN_RNR_TIMER, 0.01 ms to 491.52 ms);
	// default 0.64 ms (code 12).
	MinRNRTimer time.Duration
	// TrafficClass is the RoCEv2 traffic class (the IP DSCP and ECN
	// byte); default 0.
	TrafficClass uint8
	// HopLimit is the GRH hop limit (IP TTL); default 64.
	HopLimit uint8
	// MTU is the path MTU, one of 256, 512, 1024, 2048, 4096 bytes;
	// default: the smaller active MTU of the two ports.
	MTU units.Bytes
}

// withDefaults returns c with zero fields set to their defaults, or an
// error naming the first bad field and its valid range.
func (c QPConfig) withDefaults() (QPConfig, error) {
	if c.MaxSendWR == 0 {
		c.MaxSendWR = 256
	}
	if c.MaxSendWR < 1 || c.MaxSendWR > 1<<20 {
		return c, fmt.Errorf("verbs: QPConfig.MaxSendWR = %d, want 1..%d", c.MaxSendWR, 1<<20)
	}
	if c.MaxInline < 0 || c.MaxInline > 4096 {
		return c, fmt.Errorf("verbs: QPConfig.MaxInline = %d, want 0..4096 bytes", c.MaxInline)
	}
	if c.Timeout == 0 {
		c.Timeout = ackTimeout(14)
	}
	if c.Timeout < 0 || c.Timeout > ackTimeout(31) {
		return c, fmt.Errorf("verbs: QPConfig.Timeout = %v, want %v..%v", c.Timeout, ackTimeout(1), ackTimeout(31))
	}
	if c.RetryCount == 0 {
		c.RetryCount = 7
	}
	if c.RetryCount < 1 || c.RetryCount > 7 {
		return c, fmt.Errorf("verbs: QPConfig.RetryCount = %d, want 1..7", c.RetryCount)
	}
	if c.RNRRetry == 0 {
		c.RNRRetry = 7
	}
	if c.RNRRetry < 1 || c.RNRRetry > 7 {
		return c, fmt.Errorf("verbs: QPConfig.RNRRetry = %d, want 1..7 (7 = forever)", c.RNRRetry)
	}
	if c.MinRNRTimer == 0 {
		c.MinRNRTimer = rnrTable[12]
	}
	if c.MinRNRTimer < 0 || c.MinRNRTimer > rnrTable[0] {
		return c, fmt.Errorf("verbs: QPConfig.MinRNRTimer = %v, want %v..%v", c.MinRNRTimer, rnrTable[1], rnrTable[0])
	}
	if c.HopLimit == 0 {
		c.HopLimit = 64
	}
	if c.MTU != 0 && mtuEnum(c.MTU) == 0 {
		return c, fmt.Errorf("verbs: QPConfig.MTU = %d, want 256, 512, 1024, 2048 or 4096", int64(c.MTU))
	}
	return c, nil
}

// ackTimeout returns the local ACK timeout of exponent n: 4.096 µs × 2^n.
func ackTimeout(n uint8) time.Duration { return time.Duration(4096) << n * time.Nanosecond }

// timeoutExp returns the smallest exponent n in 1..31 with
// ackTimeout(n) >= d.
func timeoutExp(d time.Duration) uint8 {
	for n := uint8(1); n < 31; n++ {
		if ackTimeout(n) >= d {
			return n
		}
	}
	return 31
}

// rnrTable maps IBV_QP_MIN_RNR_TIMER codes to delays (ibv_modify_qp(3);
// IBTA spec table 45). Code 0 is the longest, 655.36 ms.
var rnrTable = [32]time.Duration{
	655360 * time.Microsecond,
	10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond, 40 * time.Microsecond,
	60 * time.Microsecond, 80 * time.Microsecond, 120 * time.Microsecond, 160 * time.Microsecond,
	240 * time.Microsecond, 320 * time.Microsecond, 480 * time.Microsecond, 640 * time.Microsecond,
	960 * time.Microsecond, 1280 * time.Microsecond, 1920 * time.Microsecond, 2560 * time.Microsecond,
	3840 * time.Microsecond, 5120 * time.Microsecond, 7680 * time.Microsecond, 10240 * time.Microsecond,
	15360 * time.Microsecond, 20480 * time.Microsecond, 30720 * time.Microsecond, 40960 * time.Microsecond,
	61440 * time.Microsecond, 81920 * time.Microsecond, 122880 * time.Microsecond, 163840 * time.Microsecond,
	245760 * time.Microsecond, 327680 * time.Microsecond, 491520 * time.Microsecond,
}

// rnrCode returns the code of the smallest RNR delay >= d (codes 1..31,
// then 0 for anything longer than 491.52 ms).
func rnrCode(d time.Duration) uint8 {
	for c := 1; c < 32; c++ {
		if rnrTable[c] >= d {
			return uint8(c)
		}
	}
	return 0
}

// mtuEnum returns the enum ibv_mtu value of an MTU in bytes, 0 if invalid.
func mtuEnum(b units.Bytes) int {
	switch b {
	case 256:
		return 1
	case 512:
		return 2
	case 1024:
		return 3
	case 2048:
		return 4
	case 4096:
		return 5
	}
	return 0
}

// mtuBytes returns the bytes of an enum ibv_mtu value, 0 if invalid.
func mtuBytes(e int) units.Bytes {
	if e < 1 || e > 5 {
		return 0
	}
	return 128 << e
}

// DefaultDialTimeout bounds Host.Dial when its context has no deadline:
// the control connection, authentication, the receiver's Accept (which
// may wait up to its HandshakeTimeout for the receiver's Listener.Accept,
// then registers the region) and the RTT probes.
const DefaultDialTimeout = 60 * time.Second

// DialConfig configures Host.Dial, the sender's side of a connection.
type DialConfig struct {
	// Secret is the shared secret both ends hold (at least
	// bootstrap.MinSecret bytes). Required.
	Secret []byte
	// Send is the registered send region; SendWR.Local offsets are into
	// it. Required.
	Send *Buffer
	// Size is the tensor size the receiver must advertise a region for;
	// default Send.Len().
	Size units.Bytes
	// ChunkSize is passed on to the receiver for display; optional.
	ChunkSize units.Bytes
	// CRC, when set, sends CRC32C for the receiver to check (CapCRC).
	CRC    bool
	CRC32C uint32
	// Name is shown by the receiver (file or tensor name); optional.
	Name string
	// NICs restricts the local NICs used, by device name. Empty: every
	// NIC of the host, preferring those on the send buffer's NUMA node
	// when the host has NICs on several nodes.
	NICs []string
	// QPsPerNIC is the number of RC QPs (paths) per NIC; default 1, at
	// most 64. Paths are numbered NIC-major: path p uses NIC p/QPsPerNIC.
	QPsPerNIC int
	// QP holds the queue-pair settings.
	QP QPConfig
	// Clock stamps completions (Completion.At) once per poll batch when
	// the device has no completion timestamps; nil leaves At zero.
	Clock vtime.Clock
	// RTTProbes is how many zero-length WRITE WITH IMM probes Dial sends
	// on each path, one at a time, to measure its empty-path RTT
	// (PathInfo.BaseRTT is the smallest post-to-completion time: the RC
	// ACK is the pong). Default 3; negative disables.
	RTTProbes int
}

// ListenConfig configures Host.Listen, the receiver's side.
type ListenConfig struct {
	// Secret is the shared secret (at least bootstrap.MinSecret bytes).
	// Required.
	Secret []byte
	// NICs restricts the local NICs used, by device name; default all.
	// The sender's path p lands on NIC (sender NIC index of p) modulo
	// len(NICs): NIC i talks to NIC i, as in rail-aligned fabrics.
	NICs []string
	// QP holds the queue-pair settings (RNR timer, MTU cap, traffic
	// class).
	QP QPConfig
	// MaxSize is the largest region a sender may ask for; default the
	// pool size.
	MaxSize units.Bytes
	// Access selects how the region is exposed; default AccessAuto.
	Access Access
	// SRQDepth is the number of receives kept posted on each NIC's shared
	// receive queue; default 1024.
	SRQDepth int
	// Region, if set, supplies the receive region for an offer of size
	// bytes (a user-registered buffer, say); the Receiver does not free
	// it. Default: Host.Alloc(size), freed by Receiver.Close.
	Region func(size units.Bytes) (*Buffer, error)
	// OnReject is called for every peer that fails authentication or the
	// exchange, goes silent, or is refused for room
	// (bootstrap.ErrBusy); Accept keeps listening. It is called from
	// Accept's goroutine and from the listener's own, possibly
	// concurrently, and must not block.
	OnReject func(remote net.Addr, err error)
	// HandshakeTimeout bounds each step a sender must take before Accept
	// has set it up: authentication, its Offer, and its Ready after our
	// Accept message; and how long an authenticated Offer waits for
	// Accept. 0 means bootstrap.DefaultHandshakeTimeout (10 s).
	HandshakeTimeout time.Duration
	// MaxPending bounds the senders the listener holds while they
	// authenticate or wait for Accept (1..65536); 0 means
	// bootstrap.DefaultMaxPending.
	MaxPending int
	// MaxPendingPerSource bounds the unauthenticated connections from one
	// IPv4 address or IPv6 /64 (1..MaxPending); 0 means
	// bootstrap.DefaultMaxPendingPerSource, or MaxPending if smaller.
	MaxPendingPerSource int
	// Clock stamps completions, as in DialConfig.
	Clock vtime.Clock
}

func checkSecret(s []byte) error {
	if len(s) < bootstrap.MinSecret {
		return fmt.Errorf("verbs: Secret is %d bytes, want at least %d", len(s), bootstrap.MinSecret)
	}
	return nil
}

// MaxQPsPerNIC is the most QPsPerNIC accepts.
const MaxQPsPerNIC = 64

func (c DialConfig) withDefaults() (DialConfig, error) {
	if err := checkSecret(c.Secret); err != nil {
		return c, err
	}
	if c.Send == nil {
		return c, fmt.Errorf("verbs: DialConfig.Send is nil; allocate it with Host.Alloc or Host.Register")
	}
	if c.Size == 0 {
		c.Size = c.Send.Len()
	}
	if c.Size < 0 || c.Size > c.Send.Len() {
		return c, fmt.Errorf("verbs: DialConfig.Size = %d, want 1..%d (the send region's size)", int64(c.Size), int64(c.Send.Len()))
	}
	if c.QPsPerNIC == 0 {
		c.QPsPerNIC = 1
	}
	if c.RTTProbes == 0 {
		c.RTTProbes = 3
	}
	if c.RTTProbes > 100 {
		return c, fmt.Errorf("verbs: DialConfig.RTTProbes = %d, want at most 100 (negative disables)", c.RTTProbes)
	}
	if c.QPsPerNIC < 1 || c.QPsPerNIC > MaxQPsPerNIC {
		return c, fmt.Errorf("verbs: DialConfig.QPsPerNIC = %d, want 1..%d", c.QPsPerNIC, MaxQPsPerNIC)
	}
	var err error
	c.QP, err = c.QP.withDefaults()
	return c, err
}

func (c ListenConfig) withDefaults(pool units.Bytes) (ListenConfig, error) {
	if err := checkSecret(c.Secret); err != nil {
		return c, err
	}
	if c.MaxSize == 0 {
		c.MaxSize = pool
	}
	if c.MaxSize < 0 {
		return c, fmt.Errorf("verbs: ListenConfig.MaxSize = %d, want > 0", int64(c.MaxSize))
	}
	if c.SRQDepth == 0 {
		c.SRQDepth = 1024
	}
	if c.SRQDepth < 16 || c.SRQDepth > 1<<20 {
		return c, fmt.Errorf("verbs: ListenConfig.SRQDepth = %d, want 16..%d", c.SRQDepth, 1<<20)
	}
	if c.Access > AccessMR {
		return c, fmt.Errorf("verbs: ListenConfig.Access = %d, want AccessAuto, AccessMemoryWindow or AccessMR", c.Access)
	}
	if c.HandshakeTimeout < 0 {
		return c, fmt.Errorf("verbs: ListenConfig.HandshakeTimeout = %v, want 0 (for %v) or > 0", c.HandshakeTimeout, bootstrap.DefaultHandshakeTimeout)
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = bootstrap.DefaultHandshakeTimeout
	}
	if c.MaxPending < 0 || c.MaxPending > 1<<16 {
		return c, fmt.Errorf("verbs: ListenConfig.MaxPending = %d, want 0 (for %d) or 1..65536", c.MaxPending, bootstrap.DefaultMaxPending)
	}
	if c.MaxPending == 0 {
		c.MaxPending = bootstrap.DefaultMaxPending
	}
	if c.MaxPendingPerSource < 0 || c.MaxPendingPerSource > c.MaxPending {
		return c, fmt.Errorf("verbs: ListenConfig.MaxPendingPerSource = %d, want 0 (for %d) or 1..MaxPending (%d)", c.MaxPendingPerSource, bootstrap.DefaultMaxPendingPerSource, c.MaxPending)
	}
	if c.MaxPendingPerSource == 0 {
		c.MaxPendingPerSource = min(bootstrap.DefaultMaxPendingPerSource, c.MaxPending)
	}
	var err error
	c.QP, err = c.QP.withDefaults()
	return c, err
}

func (c HostConfig) withDefaults() (HostConfig, error) {
	if c.PoolSize == 0 {
		c.PoolSize = 64 * units.MiB
	}
	if c.PoolSize < 0 || c.PoolSize > 1*units.TiB {
		return c, fmt.Errorf("verbs: HostConfig.PoolSize = %d, want 1..%d bytes", int64(c.PoolSize), int64(units.TiB))
	}
	if c.GIDIndex < 0 || c.GIDIndex > 1<<16 {
		return c, fmt.Errorf("verbs: HostConfig.GIDIndex = %d, want 0 (auto) or 1..65535", c.GIDIndex)
	}
	if c.HugePages > HugeRequire {
		return c, fmt.Errorf("verbs: HostConfig.HugePages = %d, want HugeAuto, HugeNever or HugeRequire", c.HugePages)
	}
	return c, nil
}

// Receipt is the receiver's verdict on a transfer, carried over the
// control connection (Receiver.SendReceipt, Conn.AwaitReceipt).
type Receipt = bootstrap.Receipt

// Transfer announces a transfer on a connection (Conn.Announce,
// Receiver.AwaitTransfer).
type Transfer = bootstrap.Transfer

// pathMTU is the smaller of the two ports' MTUs, capped by the config.
func pathMTU(local units.Bytes, remote uint32, cap units.Bytes) (units.Bytes, error) {
	m := local
	if r := units.Bytes(remote); r < m {
		m = r
	}
	if cap != 0 && cap < m {
		m = cap
	}
	if mtuEnum(m) == 0 {
		return 0, fmt.Errorf("verbs: no common path MTU (local %d, remote %d, QPConfig.MTU %d)", int64(local), remote, int64(cap))
	}
	return m, nil
}
