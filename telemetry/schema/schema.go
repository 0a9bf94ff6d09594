// Package schema names every span, span event, attribute and metric that
// mptx's telemetry emits, so that the recorder (package telemetry) and the
// analyser (package telemetry/analyze) agree by construction. docs/telemetry.md
// lists the same names with their types and units.
//
// Names follow the OpenTelemetry semantic conventions where one exists
// (network.peer.address, error.type, service.name); everything else lives in
// the mptx. namespace. Durations carried as span attributes are integer
// nanoseconds and say so in their name (_ns); durations in metrics are float
// seconds (unit "s"), as the semantic conventions ask.
package schema

// Instrumentation scope of every tracer and meter mptx creates.
const (
	ScopeName = "mptx/telemetry"
	// SchemaVersion is bumped whenever a name or meaning below changes; it
	// is the scope version of every tracer and meter.
	SchemaVersion = "1"
)

// Span names.
const (
	// SpanTransfer covers one transfer, from the engine's transfer-start
	// event to its done or failed event. Each transfer is the root of its
	// own trace.
	SpanTransfer = "mptx.transfer"
	// SpanChunk covers one attempt of one chunk on one path, from the
	// attempt's start to its acknowledgement, requeue or abandonment. Its
	// parent is the transfer's span.
	SpanChunk = "mptx.chunk"
	// SpanReceive covers one transfer on the receiver, from the moment
	// the receiver learns of it (its plan and trace context arrive on the
	// control channel) until every chunk has arrived and been handed to
	// the application, or it fails. Its parent is the sender's
	// mptx.transfer span (W3C trace context carried on the control
	// channel), so both ends form one trace; kind server.
	SpanReceive = "mptx.receive"
	// SpanRecvChunk covers one chunk on the receiver, from its arrival
	// (the completion of its last segment, by the NIC's clock where the
	// backend has one) until the application's hand-off returned. Its
	// parent is the mptx.receive span.
	SpanRecvChunk = "mptx.recv.chunk"
)

// Span event names (events on the mptx.transfer span).
const (
	EventPathDown       = "mptx.path.down"
	EventPathUp         = "mptx.path.up"
	EventPathQuarantine = "mptx.path.quarantine"
	EventRequeue        = "mptx.chunk.requeue"
	EventCNPBurst       = "mptx.cnp.burst"
	EventPFCPause       = "mptx.pfc.pause"
)

// Standard attribute keys (OpenTelemetry semantic conventions).
const (
	AttrServiceName        = "service.name"         // resource
	AttrNetworkPeerAddress = "network.peer.address" // transfer: the peer
	AttrErrorType          = "error.type"           // failed transfer or requeued attempt: the reason
)

// mptx attribute keys.
const (
	// Transfer span.
	AttrTransferID      = "mptx.transfer.id"      // int: caller-chosen transfer id (also on chunk spans)
	AttrTransferBytes   = "mptx.transfer.bytes"   // int, By: tensor size
	AttrTransferChunks  = "mptx.transfer.chunks"  // int: number of chunks
	AttrChunkSize       = "mptx.chunk.size"       // int, By: nominal chunk size
	AttrPaths           = "mptx.paths"            // int: paths configured
	AttrCC              = "mptx.cc"               // string: congestion control algorithm
	AttrBackend         = "mptx.backend"          // string: qp backend (verbs, tcp, mem, sim)
	AttrTransferOutcome = "mptx.transfer.outcome" // string: done | failed | abandoned
	AttrTransferName    = "mptx.transfer.name"    // string: the application's label for the tensor (session API), if any

	// Chunk span.
	AttrChunkIndex   = "mptx.chunk.index"      // int: chunk index within the transfer
	AttrPath         = "mptx.path"             // int: path index (also on path events and metrics)
	AttrQPN          = "mptx.qp.num"           // int: local QP number of the path
	AttrDevice       = "mptx.device"           // string: RDMA device (ibv_get_device_name(3))
	AttrNIC          = "mptx.nic"              // string: network interface of the path
	AttrAttempt      = "mptx.chunk.attempt"    // int: 1 for the first try, 2+ after requeues
	AttrChunkBytes   = "mptx.chunk.bytes"      // int, By: bytes in this chunk
	AttrChunkRTT     = "mptx.chunk.rtt_ns"     // int, ns: RTT of the chunk's last segment
	AttrChunkLatency = "mptx.chunk.latency_ns" // int, ns: attempt start to acknowledgement
	AttrChunkECN     = "mptx.chunk.ecn_marks"  // int: ECN marks seen on the path during the attempt
	AttrChunkOutcome = "mptx.chunk.outcome"    // string: acked | requeued | abandoned | superseded

	// Receiver spans (mptx.receive, mptx.recv.chunk).
	AttrRecvQueue       = "mptx.recv.queue_ns"         // int, ns: chunk: arrival to the driver's poll (completion queue wait)
	AttrRecvHandoff     = "mptx.recv.handoff_ns"       // int, ns: chunk: the application's hand-off (OnChunk) duration
	AttrRecvWait        = "mptx.recv.wait_ns"          // int, ns: chunk: poll to the start of the hand-off
	AttrRecvChunks      = "mptx.recv.chunks"           // int: receive: distinct chunks arrived
	AttrRecvDuplicates  = "mptx.recv.duplicates"       // int: receive: chunks that arrived again
	AttrRecvLastArrival = "mptx.recv.last_arrival_ns"  // int, ns: receive: offset of the last chunk's arrival from the span's start
	AttrRecvLag         = "mptx.recv.lag_ns"           // int, ns: receive: last arrival to the end (receiver time after the network delivered everything)
	AttrRecvQueueMax    = "mptx.recv.queue_max_ns"     // int, ns: receive: longest completion-queue wait of a chunk
	AttrRecvHandoffSum  = "mptx.recv.handoff_total_ns" // int, ns: receive: sum of the chunks' hand-off durations

	// Span events.
	AttrReason   = "mptx.reason"       // string: why (path down, quarantine, requeue)
	AttrBackoff  = "mptx.backoff_ns"   // int, ns: quarantine backoff
	AttrCNPCount = "mptx.cnp.count"    // int: CNPs in the burst
	AttrBurstNs  = "mptx.burst_ns"     // int, ns: first to last CNP reading of the burst
	AttrPauseNs  = "mptx.pause_ns"     // int, ns: PFC pause duration
	AttrPriority = "mptx.pfc.priority" // int: PFC priority (802.1Qbb class) paused
	AttrVirtual  = "mptx.virtual_time" // bool (resource): timestamps are simulated time
)

// Receive outcomes (AttrTransferOutcome on mptx.receive): TransferDone,
// TransferFailed (the application rejected a chunk, or the session gave
// up), TransferAbandoned (the recorder was closed first).

// Receiver chunk outcome: a chunk whose hand-off the application rejected
// has status Error and error.type HandoffRejected.
const HandoffRejected = "handoff rejected"

// Chunk outcomes (values of AttrChunkOutcome).
const (
	OutcomeAcked      = "acked"
	OutcomeRequeued   = "requeued"
	OutcomeAbandoned  = "abandoned"  // transfer failed or recorder closed while in flight
	OutcomeSuperseded = "superseded" // a new attempt started before this one ended
)

// Transfer outcomes (values of AttrTransferOutcome).
const (
	TransferDone      = "done"
	TransferFailed    = "failed"
	TransferAbandoned = "abandoned" // the recorder was closed first
)

// Metric names. Every per-path metric carries AttrPath, AttrDevice and
// AttrQPN.
const (
	MetricWindow       = "mptx.path.window"         // gauge, By: congestion window
	MetricRate         = "mptx.path.rate"           // gauge, bit/s: pacing rate
	MetricInFlight     = "mptx.path.inflight"       // gauge, By: bytes in flight
	MetricSRTT         = "mptx.path.srtt"           // histogram, s: smoothed RTT, sampled per chunk completion
	MetricRTT          = "mptx.path.rtt"            // histogram, s: raw RTT samples (chunk last segment, probes)
	MetricChunkLatency = "mptx.chunk.latency"       // histogram, s: chunk attempt latency
	MetricECN          = "mptx.path.ecn.marks"      // counter, {mark}
	MetricCNP          = "mptx.path.cnp"            // counter, {cnp}
	MetricBytesSent    = "mptx.path.bytes.sent"     // counter, By: bytes of chunk attempts started
	MetricBytesAcked   = "mptx.path.bytes.acked"    // counter, By: bytes of chunks acknowledged
	MetricRequeues     = "mptx.path.requeues"       // counter, {chunk}
	MetricPathDown     = "mptx.path.down"           // counter, {event}
	MetricPFCPauses    = "mptx.path.pfc.pauses"     // counter, {pause}
	MetricPFCPauseTime = "mptx.path.pfc.pause_time" // counter, s
	MetricTransferTime = "mptx.transfer.duration"   // histogram, s: completed transfers
	MetricDropped      = "mptx.telemetry.dropped"   // counter, {transfer}: transfers not traced (table full)

	// Receiver metrics (ReceiveRecorder); per path where they carry AttrPath.
	MetricRecvChunks     = "mptx.recv.chunks"     // counter, {chunk}: distinct chunks arrived
	MetricRecvBytes      = "mptx.recv.bytes"      // counter, By: bytes of those chunks
	MetricRecvDuplicates = "mptx.recv.duplicates" // counter, {chunk}: chunks that arrived again
	MetricRecvQueue      = "mptx.recv.queue"      // histogram, s: completion-queue wait (arrival to poll)
	MetricRecvHandoff    = "mptx.recv.handoff"    // histogram, s: the application's hand-off per chunk
	MetricRecvLag        = "mptx.recv.lag"        // histogram, s: per transfer, last arrival to done
)
