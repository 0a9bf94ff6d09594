// Package qp defines the backend interfaces the mptx driver posts work to and
// polls completions from: a sender's connection to one peer made of several
// RC queue pairs (paths), and the receiver's view of the same connection.
//
// The interfaces are batch-shaped (wireguard-go conn.Bind): PostSend takes a
// slice of work requests and Poll fills a caller-owned slice of completions,
// so a verbs backend makes one cgo crossing per batch and nothing allocates
// per work request.
//
// Backends:
//
//   - qp/verbs: RoCEv2 RC queue pairs through libibverbs (cgo), the one
//     users deploy; its control channel (authentication, queue-pair
//     exchange, receipts) is qp/verbs/bootstrap.
//   - qp/tcp: the TCP fallback for hosts without RDMA, one TCP connection
//     per path with RC's ordering, acknowledgement and error-state
//     semantics emulated on top.
//   - qp/mem: in-memory, virtual time; tests and examples.
//   - the simulator's backend in sim/: timing only, no data.
//
// All of them pass the conformance suite in qp/qptest (qp/verbs on
// Soft-RoCE in a VM: make rxe-test).
//
// # Memory
//
// Work requests address memory by offset: Local is an offset into the
// sender's registered send region, Remote an offset into the region the
// receiver advertised for this connection. Backends map offsets to
// addresses and keys; no pointer crosses this interface.
//
// A connection that implements SendRegions can send from more memory than
// the one send region it was set up with: the caller registers a buffer
// (its tensor, say) and names it in SendWR.Region, so that nothing is
// copied into the send region first.
//
// # One-sided access: READ and keyed WRITE
//
// A receiver may also expose ranges of its memory to the connection's
// sender (Exposer, the receiver's optional extension): each exposure has a
// key and an address space of its own, like a verbs memory region's rkey
// and virtual addresses. A work request with RKey set names such a range:
// an OpRead copies [Remote, Remote+Len) of the exposed range into the
// sender's region at Local (the sender is the requester, the receiver the
// responder: ibv_post_send(3) IBV_WR_RDMA_READ), and an OpWrite or
// OpWriteImm with RKey set writes into it. The responder checks every
// request against the key's range and rights (the NIC does on verbs; the
// backend's responder on TCP, in memory and in the simulator) and answers a
// violation with StatusRemoteAccess at the requester; nothing outside the
// range is read or written. A READ's completion at the requester means its
// bytes have landed in the requester's region; the responder's
// application sees no completion. RKey 0 names the receive region the
// connection was set up with, writable and not readable.
package qp

import (
	"errors"
	"fmt"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// ErrNotSupported is returned (wrapped) by backends that cannot run on this
// host, such as verbs without rdma-core or an RDMA device.
var ErrNotSupported = errors.New("qp: not supported")

// ErrClosed is returned by operations on a closed connection.
var ErrClosed = errors.New("qp: closed")

// ErrQueueFull is returned by PostSend when a path's send queue has no room
// for the first work request; the count returned says how many were posted.
var ErrQueueFull = errors.New("qp: send queue full")

// Opcode is a work request or completion kind.
type Opcode uint8

// Opcodes. They mirror ibv_wr_opcode / ibv_wc_opcode (ibv_post_send(3),
// ibv_poll_cq(3)).
const (
	// OpWrite is an RDMA WRITE: data lands in the remote region, no
	// completion at the receiver.
	OpWrite Opcode = iota + 1
	// OpWriteImm is an RDMA WRITE WITH IMM: data lands, then the receiver
	// gets an OpRecvImm completion carrying Imm. A zero-length WriteImm is
	// legal and is how probes are sent.
	OpWriteImm
	// OpRecvImm is the receiver's completion for an OpWriteImm.
	OpRecvImm
	// OpRead is an RDMA READ: the sender (the requester) copies Len bytes
	// at Remote of the receiver's exposed range RKey into its own region at
	// Local. Its completion at the sender means the bytes have landed; the
	// receiver sees none. It needs a backend whose Caps.Read is set.
	OpRead
)

// String returns the opcode's name.
func (o Opcode) String() string {
	switch o {
	case OpWrite:
		return "WRITE"
	case OpWriteImm:
		return "WRITE_WITH_IMM"
	case OpRecvImm:
		return "RECV_RDMA_WITH_IMM"
	case OpRead:
		return "RDMA_READ"
	}
	return fmt.Sprintf("Opcode(%d)", uint8(o))
}

// Status is a completion's status. It mirrors enum ibv_wc_status
// (ibv_poll_cq(3)) for the cases mptx distinguishes; it is a value, not an
// error, so that polling allocates nothing.
type Status uint8

// Completion statuses.
const (
	StatusOK Status = iota
	// StatusRetryExceeded: the transport retry counter was exhausted (the
	// path or peer is unreachable); the QP is in the error state.
	StatusRetryExceeded
	// StatusRemoteAccess: the write or read fell outside the remote region
	// or exposed range, lacked the range's right (a READ of a write-only
	// range, a WRITE to a read-only one), or used an unknown or revoked key.
	StatusRemoteAccess
	// StatusFlushed: the work request was flushed because the QP entered
	// the error state before it ran.
	StatusFlushed
	// StatusLocal: a local protection, length or QP error.
	StatusLocal
	// StatusRNRRetryExceeded: the receiver had no receive buffer posted for
	// longer than the RNR retry budget.
	StatusRNRRetryExceeded
	// StatusFatal: any other error; the path is unusable.
	StatusFatal
)

// String returns the status's name.
func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusRetryExceeded:
		return "retry-exceeded"
	case StatusRemoteAccess:
		return "remote-access-error"
	case StatusFlushed:
		return "flushed"
	case StatusLocal:
		return "local-error"
	case StatusRNRRetryExceeded:
		return "rnr-retry-exceeded"
	case StatusFatal:
		return "fatal"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// SendWR is one send work request.
type SendWR struct {
	ID     uint64      // returned in the completion; a slot index, never a pointer
	Op     Opcode      // OpWrite, OpWriteImm or OpRead
	Local  units.Bytes // offset into the send region named by Region (OpRead: where the bytes land)
	Remote units.Bytes // RKey 0: offset into the receiver's advertised region; else an address in RKey's space (Exposure.Addr + offset)
	Len    units.Bytes // bytes to write or read; 0 is legal for OpWriteImm
	Imm    uint32      // immediate data for OpWriteImm (host order)
	// Region names the send region Local indexes: 0 is the connection's
	// own send region; any other value is an id SendRegions.AddSendRegion
	// returned. Backends without SendRegions take 0 only. (A READ lands
	// in it: the region must be writable memory.)
	Region uint32
	// RKey names a range the receiver exposed (Exposer), as this path
	// knows it (Exposure.PathKeys[path], or Exposure.Key): 0 means the
	// receive region the connection was set up with (writable, not
	// readable); OpRead needs a key with AccessRead, a write with a key
	// AccessWrite.
	RKey uint32
}

// Access is a set of rights on an exposed range.
type Access uint8

// Access rights. They mirror IBV_ACCESS_REMOTE_READ and
// IBV_ACCESS_REMOTE_WRITE (ibv_reg_mr(3)).
const (
	AccessRead Access = 1 << iota
	AccessWrite
)

// AccessMask holds every defined right.
const AccessMask = AccessRead | AccessWrite

// String returns "r", "w", "rw" or "-".
func (a Access) String() string {
	switch a & AccessMask {
	case AccessRead:
		return "r"
	case AccessWrite:
		return "w"
	case AccessRead | AccessWrite:
		return "rw"
	}
	return "-"
}

// Exposure names a range a receiver exposed to its connection's sender.
type Exposure struct {
	// Key is the range's key (SendWR.RKey); never 0. On verbs it is the
	// rkey of the memory region or window; elsewhere the backend draws it
	// at random, so that a stale or foreign key is unlikely to name a live
	// range.
	Key uint32
	// Addr is the address of the range's first byte in the key's space
	// (SendWR.Remote names Addr+offset): the virtual address on verbs, a
	// random page-aligned base elsewhere. Addr+Len never exceeds
	// units.MaxBytes, so every address of the range is a valid
	// SendWR.Remote.
	Addr   uint64
	Len    units.Bytes
	Access Access
	// PathKeys, when set, holds the key to name the range with on each
	// of the connection's paths, in path order, where the paths do not
	// share one (verbs: a memory region is registered per NIC, each with
	// its own rkey; Key is then path 0's). nil: Key on every path.
	PathKeys []uint32
}

// PathKey returns the key to post on path with.
func (e *Exposure) PathKey(path int) uint32 {
	if path >= 0 && path < len(e.PathKeys) {
		return e.PathKeys[path]
	}
	return e.Key
}

// Exposer is implemented by receivers that let their connection's sender
// read (OpRead) and write (keyed OpWrite, OpWriteImm) ranges of their
// memory by key, one-sided: the receiving application takes no part in
// each access. Its methods are safe for concurrent use with each other and
// with the receiver's other methods.
type Exposer interface {
	// Expose lets the sender access mem with the rights access (AccessRead,
	// AccessWrite or both) until RevokeKey. mem must stay valid and must not
	// move until then; a backend may require memory it can register
	// (verbs: not Go heap memory, see qp/verbs). Exposing a range pins it:
	// verbs registers a memory region for it (ibv_reg_mr(3) with
	// IBV_ACCESS_REMOTE_READ / _WRITE as access says) or binds a memory
	// window (ibv_bind_mw(3)) where the device enforces windows.
	Expose(mem []byte, access Access) (Exposure, error)
	// RevokeKey ends exposure key: once it returns, no request naming key
	// (or one of its PathKeys) reads or writes the range (later ones fail
	// with StatusRemoteAccess at the sender; a READ whose response was
	// under way when RevokeKey was called may fail too). Revoking an
	// unknown key is an error.
	RevokeKey(key uint32) error
}

// Completion is one work completion (CQE).
type Completion struct {
	ID     uint64 // the SendWR's ID; 0 for receive completions
	Path   int    // index of the path (QP) within the connection
	QPN    uint32 // queue pair number
	Op     Opcode
	Status Status
	Bytes  units.Bytes // bytes written (send side: the WR's Len)
	Imm    uint32      // for OpRecvImm
	// At is the completion's timestamp: the NIC's when the backend has
	// one, the simulator's clock in the simulator, 0 if unknown (the driver
	// then uses the poll time).
	At vtime.Time
	// Sum is the CRC32C (Castagnoli) of a payload as the backend moved
	// it, and HasSum says whether the backend computed one: on the
	// receiving side the payload of an OpRecvImm's WRITE WITH IMM (its
	// Bytes bytes) as it was applied, on the sending side a successful
	// OpWrite's or OpWriteImm's payload as it was sent. A software backend
	// that copies the bytes itself can checksum each piece right next to
	// its copy, while it is in the CPU's cache, which saves its consumer a
	// second pass over the memory (qp/tcp with ListenConfig.Checksum and
	// DialConfig.Checksum). Backends whose NIC moves the bytes leave both
	// zero. SumAt is where a summed receive's payload landed: its offset
	// in the receive region (the WRITE's remote offset), so that a
	// consumer checks the sum covers the bytes it expects.
	Sum    uint32
	HasSum bool
	SumAt  units.Bytes
}

// PathInfo describes one path (one RC QP) of a connection.
type PathInfo struct {
	QPN      uint32
	Device   string        // NIC / device name ("mlx5_0", "rxe0", "sim:h3/nic0")
	Port     int           // device port (1-based for verbs)
	NIC      int           // index of the local NIC port; paths on one NIC share its line rate
	SrcPort  uint16        // RoCEv2 UDP source port (ECMP entropy), 0 if unknown
	LineRate units.BitRate // port line rate
	BaseRTT  time.Duration // estimated empty-path RTT, 0 if unknown
	MTU      units.Bytes   // payload bytes per packet
	Hops     int           // switch hops, 0 if unknown
}

// Counters are cumulative per-path congestion counters. The driver diffs
// successive readings. A backend that cannot count something leaves it 0 and
// says so in Caps.
//
// READ responses travel from the receiver to the sender, so for them the
// sender's NIC is the ECN notification point: a backend counts the
// CE-marked responses it receives in ECNMarked (where it can tell), and
// CNPReceived counts the CNPs its peer's NIC returned for marked requests
// and writes.
type Counters struct {
	ECNMarked   uint64 // CE-marked packets seen by the receiver for this path (READ responses: by the sender)
	CNPReceived uint64 // CNPs received by the sender for this path
	Retransmits uint64 // packets retransmitted (go-back-N)
}

// Caps states what a backend can do.
type Caps struct {
	CarriesData     bool // writes move real bytes (mem, verbs); the simulator models timing only
	Timestamps      bool // completions carry hardware/virtual timestamps
	ECNCounters     bool // Counters.ECNMarked is meaningful
	CNPCounters     bool // Counters.CNPReceived is meaningful
	INT             bool // completions can carry per-hop telemetry (simulator only)
	HWRateLimit     bool // SetRate is applied by hardware
	MaxSendWR       int  // send queue depth per path
	MaxInlineData   int  // bytes
	MaxMessageBytes units.Bytes
	// Read says OpRead and keyed writes (SendWR.RKey) work, and the
	// receiver implements Exposer.
	Read bool
	// MaxReadWR is the number of READs a path has outstanding at once
	// (verbs: the queue pair's max_rd_atomic, at most the device's
	// max_qp_rd_atom, and the peer's max_dest_rd_atomic); 0 means no
	// limit. More may be posted: they wait in the send queue behind the
	// ones under way, as on a verbs queue pair.
	MaxReadWR int
}

// Conn is the sender's side of a connection to one peer: Paths() RC queue
// pairs sharing one send completion queue.
//
// A Conn is used by one goroutine (the driver); it is not safe for
// concurrent use unless the backend says so.
type Conn interface {
	// Paths describes the connection's paths; the slice is owned by the Conn
	// and does not change.
	Paths() []PathInfo
	// PostSend posts wrs, in order, on path. It returns how many were
	// posted; on error the rest were not. A path in the error state returns
	// an error and the driver treats the path as down.
	PostSend(path int, wrs []SendWR) (int, error)
	// Poll moves up to len(dst) send completions into dst and returns how
	// many. It never blocks.
	Poll(dst []Completion) (int, error)
	// Counters reads path's cumulative congestion counters.
	Counters(path int) (Counters, error)
	Caps() Caps
	// Close destroys the queue pairs; outstanding work requests complete as
	// StatusFlushed or are dropped. Close is idempotent.
	Close() error
}

// SendRegions is implemented by connections that can send from buffers
// registered after the connection was set up, in addition to its own send
// region: zero-copy sends of memory the caller owns (a tensor), where the
// connection's send region would be a staging buffer to copy into first.
// Registration is cheap where the backend reads memory with the CPU
// (qp/tcp, qp/mem: a table entry); a verbs backend would have to register
// a memory region (ibv_reg_mr(3)) per buffer, so it does not offer it.
//
// Its methods are safe for concurrent use with each other and with the
// Conn's methods: a caller may register a buffer on its own goroutine
// while the driver posts.
type SendRegions interface {
	// AddSendRegion registers buf as a send region and returns its id for
	// SendWR.Region, never 0. The backend reads buf, with the CPU or a
	// NIC, whenever a work request naming it is outstanding: the caller
	// must not modify buf from the post of the first such work request
	// until each of them has completed (or been flushed by a
	// qp.Resetter's Reset). An empty buf is refused. The number of
	// regions registered at once is bounded by the backend (an error
	// says so).
	AddSendRegion(buf []byte) (id uint32, err error)
	// RemoveSendRegion unregisters region id; the backend no longer
	// refers to its buffer. No work request naming it may be
	// outstanding. Its id may be returned again by a later AddSendRegion
	// (with another generation: a stale id is refused, not aliased). An
	// unknown id is an error.
	RemoveSendRegion(id uint32) error
}

// RateLimiter is implemented by connections that can set a per-path
// hardware rate limit (ibv_modify_qp_rate_limit(3)).
type RateLimiter interface {
	SetRate(path int, r units.BitRate) error
}

// INTReader is implemented by connections whose completions can carry
// per-hop telemetry (the simulator). The driver asks for the telemetry of a
// completion right after polling it.
type INTReader interface {
	// INT copies the hop stamps of the completion with id into dst and
	// returns how many there were (0 if none).
	INT(id uint64, dst []INTHop) int
}

// INTHop mirrors cc.INTHop (qp does not import cc).
type INTHop struct {
	QLen    units.Bytes
	TxBytes units.Bytes
	TS      vtime.Time
	Rate    units.BitRate
}

// Receiver is the receiving side of a connection: completions of
// WRITE WITH IMM from every path, typically from one shared receive queue.
type Receiver interface {
	// Poll moves up to len(dst) receive completions (OpRecvImm) into dst.
	Poll(dst []Completion) (int, error)
	// Region returns the receive region's bytes when the backend carries
	// data, nil otherwise. It is valid until Close.
	Region() []byte
	Close() error
}
