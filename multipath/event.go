package multipath

import (
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// TransferID names a transfer; chosen by the caller, unique among the
// engine's live transfers.
type TransferID uint64

// ActionKind says what an Action asks the driver to do.
type ActionKind uint8

// Action kinds.
const (
	// ActPost: post one segment of a chunk on Path as an RDMA WRITE
	// (Imm == false) or WRITE WITH IMM (Imm == true, the chunk's last
	// segment), with work-request id WorkID.
	ActPost ActionKind = iota + 1
	// ActProbe: send an RTT probe on Path (a zero-length WRITE WITH IMM
	// carrying chunk.ProbeImm) with id WorkID; report its completion with
	// OnCompletion like any other. With Reset set, the path was lost to a
	// queue-pair error: bring the queue pair back first (qp.Resetter) and
	// report a failed completion for WorkID if that fails.
	ActProbe
	// ActDone: transfer Transfer completed: every chunk was acknowledged
	// and no work request of the transfer is outstanding on any path (all
	// completed, or their queue pairs were reset), so nothing of it can
	// land any more: its send buffer and receive range may be reused.
	ActDone
	// ActFailed: transfer Transfer failed (no usable path, or Cancel); Err
	// says why, naming each path and why it was lost. As with ActDone, no
	// work request of it is outstanding any more.
	ActFailed
	// ActSetRate: program Path's hardware rate limit to Rate (only with
	// PacingConfig.Hardware).
	ActSetRate
	// ActReset: fence Path: reset its queue pair now (qp.Resetter), which
	// flushes the work requests outstanding on it at both ends, and report
	// the outcome with OnReset. The engine asks when it takes a path out
	// of use with work outstanding that no error flushes (a stall, a link
	// reported down), because the transfers of that work may not be
	// reported done while any of it could still land.
	ActReset
)

// String returns the kind's name.
func (k ActionKind) String() string {
	switch k {
	case ActPost:
		return "post"
	case ActProbe:
		return "probe"
	case ActDone:
		return "done"
	case ActFailed:
		return "failed"
	case ActSetRate:
		return "set-rate"
	case ActReset:
		return "reset"
	}
	return "unknown"
}

// Action is one output of the engine.
type Action struct {
	Kind     ActionKind
	Path     int
	WorkID   uint64 // work-request id to post with; echoed in the completion
	Transfer TransferID
	Chunk    uint32      // chunk index within the transfer
	Offset   units.Bytes // segment offset within the tensor
	Local    units.Bytes // offset into the local send region (TransferSpec.Local + Offset)
	Remote   units.Bytes // offset into the remote region (TransferSpec.Remote + Offset)
	Len      units.Bytes
	HasImm   bool          // post as WRITE WITH IMM carrying ImmData
	ImmData  uint32        // chunk.EncodeImm(slot, chunk)
	Attempt  uint16        // 1 for the first try of the chunk, 2+ after requeues
	Rate     units.BitRate // for ActSetRate
	Reset    bool          // for ActProbe: reset the queue pair first
	Err      error         // for ActFailed
}

// EventKind classifies recorder events.
type EventKind uint8

// Recorder event kinds.
const (
	EvTransferStart  EventKind = iota + 1 // Transfer, Bytes (tensor size), Chunk (chunk count), Size (chunk size), Priority
	EvTransferDone                        // Transfer, Bytes
	EvTransferFailed                      // Transfer, Reason
	EvChunkStart                          // Transfer, Chunk, Path, Attempt, Bytes: an attempt begins on Path
	EvChunkDone                           // Transfer, Chunk, Path, Attempt, Bytes, RTT (last segment), Latency (attempt start → done), ECN (marks on path during attempt)
	EvChunkRequeue                        // Transfer, Chunk, Path (the path it left), Attempt (the failed one), Reason
	EvPathDown                            // Path, Reason
	EvPathUp                              // Path
	EvPathQuarantine                      // Path, Reason, Latency (backoff)
	EvProbe                               // Path, RTT
	EvCNP                                 // Path, ECN (CNPs in this reading)
	EvPathSample                          // Path, Window, Rate, InFlight, SRTT, Bytes (cumulative acked): sampled on every chunk completion on Path
	EvChunkPreempt                        // Transfer, Chunk, Path, Attempt, Bytes (unposted): a higher-priority chunk on Path sets this one's unposted rest aside until it is posted
)

// String returns the kind's name.
func (k EventKind) String() string {
	switch k {
	case EvTransferStart:
		return "transfer-start"
	case EvTransferDone:
		return "transfer-done"
	case EvTransferFailed:
		return "transfer-failed"
	case EvChunkStart:
		return "chunk-start"
	case EvChunkDone:
		return "chunk-done"
	case EvChunkRequeue:
		return "chunk-requeue"
	case EvPathDown:
		return "path-down"
	case EvPathUp:
		return "path-up"
	case EvPathQuarantine:
		return "path-quarantine"
	case EvProbe:
		return "probe"
	case EvCNP:
		return "cnp"
	case EvPathSample:
		return "path-sample"
	case EvChunkPreempt:
		return "chunk-preempt"
	}
	return "unknown"
}

// Event is one recorder event. Fields not listed for a kind are zero.
type Event struct {
	Kind     EventKind
	Now      vtime.Time
	Transfer TransferID
	Chunk    uint32
	Path     int
	Attempt  uint16
	Bytes    units.Bytes
	Size     units.Bytes // chunk size for EvTransferStart
	RTT      time.Duration
	Latency  time.Duration
	ECN      uint64
	Window   units.Bytes
	Rate     units.BitRate
	InFlight units.Bytes
	SRTT     time.Duration
	Reason   string   // a static string; never built per event
	Priority Priority // the transfer's class, for EvTransferStart
}

// Recorder receives engine events for telemetry. The engine calls it
// synchronously from its event methods and passes a pointer to a value it
// reuses: implementations must copy what they keep and must not block. A nil
// Recorder (the default) costs one nil check per event site.
type Recorder interface {
	Record(ev *Event)
}
