// Package tcp is mptx's TCP fallback backend: it emulates the RDMA reliable
// connected (RC) semantics the driver relies on over ordinary TCP, for hosts
// without RDMA. A sender's Conn has N paths, each one TCP connection with its
// own local source port (so ECMP hashing spreads them like RoCEv2 UDP source
// ports) and optionally its own source address or interface (so paths can
// use different NICs or veths). The receiver's Receiver owns a receive
// region ([]byte) and applies the frames it reads at their remote offsets,
// as a responder NIC applies RDMA WRITEs to a memory region.
//
// # Mapping RDMA onto TCP
//
//   - Queue pair → one TCP connection. Its QPN is a process-local 24-bit
//     number; PathInfo.SrcPort is the connection's local TCP port.
//   - RDMA WRITE / WRITE WITH IMM → one data frame (header + payload). The
//     payload is gathered straight from the caller's send region (or a
//     buffer registered with Conn.AddSendRegion, qp.SendRegions) with
//     writev(2) (net.Buffers): nothing is copied in user space on the send
//     side. The receiver reads payloads of 16 KiB and more directly into the
//     receive region.
//   - RECV_RDMA_WITH_IMM completion → produced by the receiver after the
//     frame's payload is in the region, carrying the immediate.
//   - RC acknowledgement → an ACK frame carrying the highest applied WR
//     sequence number whose receive completion, if it has one, is queued
//     (cumulative, like an AETH ACK for a PSN). The sender completes its
//     WRs with StatusOK when they are acknowledged.
//   - NAK remote access error → a NAK frame (syndrome 2, as IBA's NAK code
//     for a remote access error) naming the failed WR.
//   - RC retry timeout → TCP_USER_TIMEOUT (DialConfig.RetryTimeout): data
//     unacknowledged by the peer's kernel for that long breaks the
//     connection.
//   - RNR (the responder has no receive buffer for a WRITE WITH IMM) → the
//     receive queue (ListenConfig.RecvQueue) is full: the receiver still
//     applies the frame but holds its completion back and acknowledges
//     nothing from it on until Poll makes room, so the sender's work
//     requests stay outstanding and it stalls, as an RC sender retrying
//     RNR NAKs for ever (rnr_retry 7) does, while the TCP connection keeps
//     flowing (see Receiver, Back-pressure).
//   - Send queue depth → DialConfig.MaxSendWR per path. As in verbs, a WR
//     holds its send-queue slot until its completion has been polled, so the
//     completion queue (Paths × MaxSendWR entries) can never overflow.
//   - Memory keys → none for the receive region: the handshake
//     authenticates the peer instead and the receiver checks every write
//     against its region's bounds. Ranges the receiver exposes for
//     one-sided access (Receiver.Expose, qp.Exposer) do have keys: random
//     32-bit keys with random page-aligned base addresses, checked (key,
//     range, right) on every keyed frame.
//   - RDMA READ → a READ request frame (keyed, no payload), answered in
//     frame order by a READ response frame on the path's connection: the
//     bytes, read by the sender's reader straight into the READ's memory.
//     The response acknowledges, like an ACK, every frame up to the READ.
//
// # Handshake
//
// Listen opens a listener; Dial opens N TCP connections to it (one per
// path, each possibly to its own address) and authenticates each one with an
// HMAC-SHA256 challenge-response (RFC 2104) in both directions. The HMAC
// key is not the shared secret itself but k = HKDF-SHA256(secret, salt
// "mptx-tcp/2", info "handshake tags"), 32 bytes (RFC 5869), which binds
// it to this protocol: the verbs bootstrap derives a different key from
// the same secret. All integers are big endian.
//
//  1. receiver → sender, 38 bytes: magic "MPTT", version u16 (2),
//     nonceS [32] (random).
//  2. sender → receiver, 84 bytes: nonceC [32] (random), connection id [16]
//     (random, the same on every path of one Conn), path index u16, path
//     count u16, tag [32] = HMAC(k, "mptx-tcp/2 client" ‖ nonceS ‖
//     nonceC ‖ id ‖ index ‖ count).
//  3. The receiver checks the tag in constant time. On a mismatch it writes
//     the reject byte 0x5A and closes: the peer learned two nonces and
//     nothing else (no region size, no QPN, and nothing was written). On a
//     match it parks the connection until all count paths of id have
//     arrived and Listener.Accept has been given a region for them.
//  4. receiver → sender, 45 bytes per path: accept byte 0xA5, region size
//     u64 (at most 2^63-1), receiver QPN u32, tag [32] = HMAC(k,
//     "mptx-tcp/2 server" ‖ nonceC ‖ nonceS ‖ id ‖ index ‖ count ‖ region
//     ‖ QPN). The sender checks the tag, so it never sends data to a
//     receiver that does not know the secret, and checks that every path
//     reports the same region size.
//
// # Secrets
//
// The secret must be random, not a password: at least 128 bits of
// entropy, such as 16 or more bytes from a cryptographic random source
// (32 recommended; `head -c 32 /dev/urandom | base64` makes one).
// MinSecret checks only the length. Anyone who sees one handshake (an
// eavesdropper, or a fake receiver that a sender dials: the sender sends
// its tag in step 2 before it can check the receiver's) can test guesses
// of the secret offline against the tag, at the speed of HKDF and HMAC,
// which have no work factor; a secret with less entropy than a brute
// force can exhaust gives no protection.
//
// # Rejoin
//
// Conn.Reset fences one path and brings it back (see Failure semantics):
// the sender opens a new TCP connection for the path to the same address
// and runs the same four steps on it, with the same connection id, path
// index and count, but with the labels "mptx-tcp/2 rejoin client" (step 2)
// and "mptx-tcp/2 rejoin server" (step 4) in place of the join labels, so
// that a rejoin proof can never pass for a join proof or the other way
// round. The nonces are fresh, so a recorded proof cannot be replayed. The
// Listener that accepted the connection checks the tag against both labels
// and hands a rejoin to the connection's Receiver, which takes it whatever
// the state of the path's current connection (only the sender knows the
// secret and the connection id, and a sender rejoins only a connection it
// has abandoned). The Receiver fences the old connection: its reader
// applies no frame from then on, not even one already in its read buffer,
// and gives up a wait for Poll; then it closes the old connection, waits
// for its reader to return, answers step 4 with the path's region size
// and QPN (unchanged; the sender checks both) and reads the new connection
// with sequence numbers from 1. So once the sender has the verdict,
// nothing of the old connection can reach the region or the receive queue.
// A valid rejoin the Receiver cannot take (it was closed, or it was not
// accepted by this listener) is answered with the refuse byte 0x3C and
// closed (the sender's Reset fails with ErrRefused); a bad tag gets the
// reject byte 0x5A as in step 3, and the path is untouched. A join proof
// whose id is that of a live Receiver is closed without an answer. A newer
// rejoin of a path supersedes one still in progress.
//
// # Admission
//
// Peers without the secret can still open connections, and a listener
// must not let them crowd out a sender that has it. Every path connection
// gets HandshakeTimeout to complete steps 1–3. The listener holds at most
// ListenConfig.MaxPending connections that Accept has not taken yet, and
// at most MaxPendingPerSource unauthenticated ones from one IPv4 address
// or IPv6 /64. When it is full, a new connection evicts the oldest
// unauthenticated connection among the sources holding the most, if they
// hold more than the newcomer's source; otherwise the newcomer is closed.
// A sender authenticates each path within a round trip, so idle
// connections (slowloris) from a few sources cost the attacker its own
// connections, not the sender's (qp/internal/admit has the details and
// the limits).
//
// Data frames are neither encrypted nor authenticated (neither are RoCEv2
// packets): the handshake keeps unauthenticated peers from writing memory,
// not an on-path attacker. Use the TCP fallback on networks you trust, or
// inside a tunnel.
//
// # Frames
//
// After the handshake each path connection carries data frames from sender
// to receiver and acknowledgement frames back.
//
// Data frame: a 24-byte header followed by length payload bytes.
//
//	offset size field
//	0      1    opcode: 1 = WRITE, 2 = WRITE WITH IMM, 3 = READ (keyed),
//	            4 = WRITE (keyed), 5 = WRITE WITH IMM (keyed)
//	1      1    flags: 0 (receivers reject anything else)
//	2      2    reserved: 0
//	4      4    seq: the WR's sequence number on this path, 1 for the
//	            first WR, +1 per WR, modulo 2^32
//	8      8    remote: byte offset into the receive region; keyed: an
//	            address in the key's space (qp.Exposure.Addr + offset)
//	16     4    length: payload bytes (0..MaxMessageBytes); 0 is a probe;
//	            READ: the bytes to read (1..MaxMessageBytes), no payload
//	20     4    imm: the immediate (WRITE WITH IMM), 0 otherwise
//	24     4    keyed frames only: the key (qp.Exposure.Key)
//	24/28  len  payload (none for READ)
//
// Acknowledgement frame: 8 bytes.
//
//	offset size field
//	0      1    type: 0x81 = ACK, 0x82 = NAK
//	1      1    syndrome: 0 for ACK; for NAK 2 = remote access error
//	2      2    reserved: 0
//	4      4    seq: ACK: every WR up to and including seq has been
//	            applied (cumulative); NAK: the WR that failed (every WR
//	            before it was applied)
//
// READ response frame: a 12-byte header followed by the bytes read.
//
//	offset size field
//	0      1    type: 0x83
//	1      3    0
//	4      4    seq: the READ's sequence number; like an ACK it
//	            acknowledges every WR up to and including it
//	8      4    length: the READ's length
//	12     len  the bytes
//
// A sender refuses (as a protocol violation) a response that answers no
// outstanding READ of that length, and an ACK or NAK that covers a READ
// whose response has not arrived.
//
// # Ordering and acknowledgement
//
// A path is one TCP byte stream, so its writes land in post order, as on an
// RC queue pair; the driver relies on this (a chunk's last segment, a WRITE
// WITH IMM, lands after its earlier segments on the same path). The receiver
// acknowledges when it has applied a frame and the next frame is not already
// complete in its read buffer, and at least every 64 frames, so a burst of
// small frames is acknowledged with one ACK; a WRITE WITH IMM is
// acknowledged only once its receive completion is in the receive queue
// (see RNR above), and a NAK is sent only once every earlier frame could
// be acknowledged. Send completions are delivered per path in post order.
// There is no ordering between paths.
//
// # Checksums
//
// A software backend copies every byte itself, so it can checksum the
// bytes next to the copy, while they are in the core's cache, where a
// consumer checksumming the memory afterwards reads it from DRAM again. With
// ListenConfig.Checksum the receiver reads each WRITE WITH IMM's payload
// 256 KiB at a time and computes the CRC32C (Castagnoli) of each piece
// right after it landed; the receive completion carries the sum and where
// the payload landed (qp.Completion.Sum, HasSum, SumAt). With
// DialConfig.Checksum the sender's writer sends all but the last 64 KiB
// of a payload in pieces of up to 256 KiB, checksums each piece right
// after writing it and the last 64 KiB just before (so that the sum is
// complete before the receiver can acknowledge the WR), and the WR's
// successful completion carries the payload's CRC32C. Nothing of this is on the wire: the frames
// are the same with or without it.
//
// # Failure semantics
//
// Remote access: a frame whose [remote, remote+length) is not inside the
// receive region, or a keyed frame whose key is unknown or revoked, whose
// range is not inside the key's exposure, or that lacks the exposure's
// right (a READ of a write-only range, a write to a read-only one), is not
// applied (its payload is read and discarded, the
// region is unchanged and no receive completion is produced). The receiver
// answers NAK. The sender completes that WR with StatusRemoteAccess and
// every later outstanding WR of the path with StatusFlushed, and the path
// enters the error state, like an RC queue pair: WRs posted later complete
// with StatusFlushed and the sender half-closes the connection. Other paths
// are unaffected.
//
// Broken connection: when a path's connection fails (EOF, reset, the retry
// timeout, or a protocol violation by the peer), the oldest outstanding WR
// completes with StatusRetryExceeded (StatusFatal for a protocol violation)
// and the rest with StatusFlushed. Later posts complete the same way: the
// first, if no WR was outstanding when the connection broke, with
// StatusRetryExceeded, the rest with StatusFlushed. The receiver drops the
// path; frames it had applied stay applied.
//
// Reset (qp.Resetter; the driver calls it when the engine fences a path
// lost to a stall, and before it probes a path lost to an error
// completion) replaces the path's connection by a new one (see Rejoin),
// whatever its state. Of a healthy path with work outstanding it is a
// fence: while the receiver fences the old connection, the sender sends
// nothing more on it and completes nothing; once the verdict is in, every
// outstanding WR completes with StatusFlushed (none of them can land any
// more, and none completes successfully, even one acknowledged meanwhile)
// and the old connection is closed with a reset (SO_LINGER 0), which
// discards what it had not sent. A failed connection's WRs were all
// completed when it failed. Either way nothing carries over: sequence
// numbers restart at 1 on both ends, and WRs posted after Reset returns
// flow on the new connection. Reset of a healthy path with no work
// outstanding does nothing. Reset fails when the receiver cannot be
// reached or does not answer within DialConfig.ResetTimeout, when its
// Listener has been closed, and when its Receiver has been closed; then
// nothing is fenced: a failed path stays failed, and a healthy one keeps
// its connection, whose outstanding WRs complete as they would have.
//
// Caveat: the completions of a connection that failed on the sender's side
// alone (TCP_USER_TIMEOUT, a write error) do not prove that the receiver
// has stopped reading it: frames its kernel already acknowledged may still
// be applied until the receiver notices the failure, as packets still in
// the network may reach an RDMA responder after the requester's retries
// ran out. Only Reset is a fence.
//
// # Concurrency and ownership
//
// Conn's qp.Conn methods (PostSend, Poll, Counters) and Reset are called
// from one driver goroutine; inside, each path has a writer goroutine
// (which batches every WR posted since its last write into one writev) and
// a reader goroutine (which turns ACKs into completions); Reset waits for
// the old connection's pair to end before it starts the new one. The
// Receiver has one reader goroutine per path, which applies frames and
// writes ACKs, and one acker per path, which writes the ACKs that Poll
// releases under back-pressure (the reader may be blocked reading).
// Completions pass through mutex-protected rings (qp/internal/cqring);
// Poll never blocks, and Notify returns a channel that receives a value
// when completions may be ready (mptx.Loop's Wake). A rejoin runs on the
// Listener's goroutine for that connection. Close stops and waits for
// every goroutine. Steady-state post and poll allocate nothing.
//
// As with RDMA, the receive region is written behind the application's
// back: a range is stable once the WRITE WITH IMM that ends it has been
// polled, unless the sender writes it again (the engine resends a chunk on
// another path when a path stalls, so two paths may write the same, equal,
// bytes). In race builds the receiver serialises its region writes and
// models each frame as a happens-before edge from sender to receiver, so
// that tests running both ends in one process are not reported for races
// that cross the network (see race_on.go); normal builds do neither.
//
// # Capabilities
//
// CarriesData and Read are true. Timestamps is false: completions carry At = 0 and
// the driver stamps them with its poll time. There are no ECN or CNP
// counters (TCP's own ECN, where enabled, is handled inside the kernel's
// congestion control and not surfaced), so ECNCounters and CNPCounters are
// false; Counters reports Retransmits from TCP_INFO's tcpi_total_retrans
// (tcp(7)) on Linux and 0 elsewhere. There is no hardware rate limiter.
package tcp
