// Package verbs is mptx's RDMA backend: qp.Conn and qp.Receiver over
// libibverbs (rdma-core) through cgo, RoCEv2 RC queue pairs, several per
// peer and per NIC. It is the backend users deploy; qp/mem, qp/tcp and the
// simulator implement the same contract and pass the same conformance
// suite (qp/qptest), which this package runs on Soft-RoCE in a VM.
//
// # Build
//
// The binding is built for linux with cgo against libibverbs (Debian
// libibverbs-dev; `make deps`). Elsewhere, or with CGO_ENABLED=0, the same
// API exists and every entry point fails with an error wrapping
// qp.ErrNotSupported (stub.go), so the module builds and its other tests run
// without rdma-core. A host with rdma-core but no device gets ErrNoDevice,
// which wraps qp.ErrNotSupported too.
//
// # Model
//
// A Host opens the NICs (OpenHost: one device context and protection domain
// per NIC port), maps one memory pool (hugetlb pages when reserved, else
// mmap with MADV_HUGEPAGE) and registers it once with every NIC. Tensor
// buffers come from the pool (Host.Alloc); a user's own buffer is
// registered once with Host.Register. Nothing is registered per transfer,
// with one exception below.
//
// The sender dials (Host.Dial), the receiver listens (Host.Listen,
// Listener.Accept). A TCP control connection (package bootstrap)
// authenticates both ends with a shared secret, HMAC challenge-response;
// a peer without the secret learns nothing and no QP or key is created for
// it. Then the sender offers its QPs (QPN, PSN, GID, MTU) and the tensor
// size; the receiver allocates the region, creates one RC QP per sender
// path on the rail-matching NIC, takes every path INIT → RTR → RTS and
// answers with its QPs, the region's address and one rkey per path. Each
// path sends from its NIC's own GID (source address) and with its own flow
// label, chosen so that every path of the connection has a distinct RoCEv2
// UDP source port and ECMP can spread them (qp.PathInfo.SrcPort). Dial
// then measures each path's empty RTT with zero-length WRITE WITH IMM
// probes (PathInfo.BaseRTT; the RC ACK is the pong).
//
// # Sessions
//
// An mptx session (the root package) owns its control channel: it
// authenticates it, speaks its own protocol on it, and asks for verbs
// there. Host.DialSession and Host.AcceptSession set the queue pairs up
// over that channel instead of a connection of their own (the same Offer,
// Accept and Ready), with the session's registered memory: the sender's
// send buffer and the receiver's whole region, advertised once for the
// session's lifetime. The channel is then shared through a bootstrap.Mux:
// its reader routes the connection's frames (ResetPath, ResetAck) to the
// Conn or Receiver and the session's own to the session. In both modes the
// sender sends Ready only after its RTT probes crossed every path, so a
// Ready receiver knows the paths work, and a session set to auto can fall
// back to TCP when they do not.
//
// The receiver grants remote write access to exactly the advertised
// region, for the transfer's lifetime: a type 2 memory window per path
// bound over the region (AccessMemoryWindow; the pool's MR itself has no
// remote access), deallocated by Receiver.Revoke. Deviation: rdma_rxe
// (Soft-RoCE) checks window writes against the underlying MR's range, not
// the window's, so there the receiver registers a dedicated MR over exactly
// the region for the transfer instead (AccessMR), deregistered by Revoke.
// An MR's rkey is valid on every QP of its protection domain, so that MR,
// and the receiving QPs and SRQ, live in a PD of the connection's own: the
// rkey opens the region to this connection's QPs and no other's (another
// sender on the same NIC gets a remote access error with it; a VM test
// checks). A path reset rebinds its window and frees the old one.
// A write outside the region then fails at the sender with
// qp.StatusRemoteAccess and changes nothing at the receiver (the VM tests
// check both, with guard bands around the region).
//
// # Data path
//
// Engine work requests become RDMA WRITE and WRITE WITH IMM on the path's
// QP; SendWR offsets map to the pool's address and lkey locally and to the
// region's address and the path's rkey remotely. One cgo crossing posts a
// whole batch as a chained list (shim.c mptx_post_send) from C arrays that
// are allocated once; one crossing polls every NIC's CQ for up to 64
// completions (mptx_poll). Work-request ids are the engine's slot indices;
// no Go pointer reaches C or the NIC. Steady-state post and poll allocate
// nothing (TestVMNoAllocsBatch, qptest's NoAllocs, on real verbs).
//
// The receiver's QPs on a NIC share one shared receive queue and one
// receive CQ. Every WRITE WITH IMM consumes one zero-length receive and
// yields an OpRecvImm completion carrying the immediate (chunk slot and
// index); Receiver.Poll re-posts what it consumed in the same crossing.
//
// Idle drivers sleep on a completion channel instead of spinning:
// Conn.Notify and Receiver.Notify (qp.Notifier) deliver completion-channel
// events (ibv_req_notify_cq(3), ibv_get_cq_event(3)) through Go's network
// poller, so no thread blocks in C. The driver's loop (mptx.Loop) busy-polls
// for a few tens of microseconds after activity, then sleeps on that
// channel or its timer; cmd/mptx runs it on a goroutine locked to its OS
// thread.
//
// Completion timestamps: devices with completion_timestamp_mask get an
// extended CQ (ibv_create_cq_ex(3)) whose raw cycle stamps are mapped onto
// the driver's clock (tsConv); others, Soft-RoCE among them, are stamped
// with one monotonic clock read per poll batch (DialConfig.Clock).
//
// Fence: Conn.Reset (qp.Resetter) takes a path's QP to the error state if
// it is not there already (a stall: flushes its send queue), has the
// receiver reset its end with a fresh expected PSN over the control
// channel, then resets this end: packets of the old incarnation still in
// the network are refused by PSN, so nothing of the fenced work lands once
// Reset has returned (TestVMResetFencesStall holds a path's packets back
// with netem and checks).
//
// Congestion counters come from the port's hw_counters (counters.go); rxe
// has no ECN or CNP counters and reports none (Caps says so). A QP error
// completion, an async QP error event or a port going down marks the path
// down (PathErr, ErrPathDown), and the engine fails over. Per-QP hardware
// rate limits use ibv_modify_qp_rate_limit(3) where packet_pacing_caps
// allow (Conn.SetRate); elsewhere SetRate reports qp.ErrNotSupported and
// the engine paces segments in software.
//
// # When a transfer is complete
//
// Sender: the engine reports a transfer done when every chunk's last
// WRITE WITH IMM has completed successfully at the sender. On RC that means
// the receiver's NIC acknowledged every byte of it. The receiver confirms
// over the control connection afterwards (Conn.AwaitReceipt).
//
// Receiver: a transfer is complete when the immediate of every chunk has
// arrived. A chunk's segments share one QP, RC places a QP's writes in
// order and the immediate travels on its last segment, so every byte is in
// place by then; with a CRC announced (Transfer.CRC), the receiver checks
// it next, then revokes access (Receiver.Revoke) and sends its Receipt.
//
// # Ownership and lifetimes
//
// Objects form a tree (tree.go): host → device context → PD → {MR, and per
// connection: completion channel, CQs, SRQ, QPs, windows}. Close is
// idempotent and closes children first, so Host.Close tears down whatever
// connections are still open. A runtime.AddCleanup safety net reports any
// wrapper collected without Close, with the stack that created it (Leaks),
// and frees it.
//
// Concurrency: a Host is safe for concurrent use; a Conn or Receiver has
// one owner (the driver goroutine).
//
// # Errors
//
// Failed verbs return *Error, which names the C call, the device, the
// errno and a likely remedy, e.g.
//
//	verbs: ibv_reg_mr(rxe0): cannot allocate memory (errno 12): RLIMIT_MEMLOCK too low? raise it with ulimit -l ...
//
// # Testing on Soft-RoCE
//
// `make rxe-test` (root) boots Debian's kernel in qemu (TCG), creates two
// veth wires with an rxe device on each end, and runs this package's VM
// tests and the two-process end-to-end tests in test/rxe there. Elsewhere
// those tests skip and say so.
package verbs
