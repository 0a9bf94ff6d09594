// Package sim is a packet-level discrete-event simulator of a RoCEv2 fabric
// that runs the real mptx core (multipath, cc, pacing, chunk) unchanged, in
// virtual time, as a qp backend (sim/simqp). It exists so that congestion
// control and path policies can be compared on fabrics nobody owns: it
// models what decides RDMA performance — PFC, ECN, go-back-N, ECMP — at the
// packet level, and it is fast enough for sweeps.
//
// # Engine
//
// A World owns the clock, the event list, the random number generator and
// the packet pool. Time is a Time: int64 picoseconds, exact for every
// Ethernet rate (a Serialiser carries the sub-picosecond remainder at rates
// that do not divide 8·10¹², so nothing drifts at 400 or 800 Gb/s). The
// event list is a timing wheel (256 ps buckets, 4.2 µs horizon) backed by
// a 4-ary heap for farther events; ties fire in scheduling order (FIFO by
// sequence number). Anything with a Fire(now) method is a Handler and can be
// scheduled with World.At. Elements keep at most one live event of each
// kind: a Timer re-arms in O(1) without searching the list.
//
// A World has no package-level state and starts no goroutines: run as many
// worlds in parallel as there are cores, one per goroutine. All randomness
// (ECMP seeds, UDP source ports, random loss, RED marking, spraying) comes
// from the world's PCG, drawn in event order, so the same seed and the same
// construction give byte-identical results. Packets come from a pool that
// grows in blocks and never shrinks; the event list, the pool and every
// queue are intrusive or pre-grown, so a run in steady state allocates
// nothing per event or per packet.
//
// A large run is bound by cache misses, not instructions: a 1024-host fat
// tree holds 200,000 frames (13 MB) in flight across 6,000 ports, and each
// link hop touches a dozen lines that have left the L2 since the last
// time. So the hot structures are laid out by cache line (Packet is one
// line, Port groups its fields by the event that reads them), the switches'
// route tables are read through copies compressed by blocks of
// destinations, and the event list prefetches the next events' ports and
// frames while the current one runs (BenchmarkFatTreePermutation is the
// yardstick).
//
// # Fabric model
//
// Elements are chained as in htsim: a Port (output queue + serialiser +
// cable propagation; htsim's Queue and Pipe in one) hands each frame, after
// serialisation and propagation delay, to the far end: a switch's ingress
// or a NIC. Switches forward by table (see below) rather than by
// precomputed source routes, because ECMP hashing is one of the things
// being studied.
//
//   - Links (Cable, LinkConfig): rate, propagation delay, random loss per
//     direction (data, ACK, NAK, CNP; never PFC), and up/down at given
//     times (Cable.SetDown/SetUp). Frames on the wire when a cable fails are
//     lost; routing does not change (the fabric blackholes until routes
//     converge, which is what makes RC retry exhaustion matter).
//   - Switches (Switch, SwitchConfig): output-queued, shared buffer. Two
//     classes per port: a strict-priority control class (PFC frames, then
//     ACK/NAK/CNP) and one data class, lossless (PFC) or lossy (drop-tail
//     with a static or dynamic per-queue limit). PFC follows the HPCC ns-3
//     MMU: per-ingress reserve, shared pool, XOFF at a static threshold or
//     at Alpha × free shared buffer, headroom for the bytes in flight after
//     XOFF (by default 2 × rate × delay + 3 maximum frames), XON with
//     hysteresis. Pause frames are real frames: they wait for the frame in
//     transmission, cross the cable, and pause the upstream port's data
//     class until XON. RED/ECN marks at dequeue with probability rising
//     from 0 at Kmin to Pmax at Kmax, 1 beyond. ECMP hashes the 5-tuple
//     (including the RoCEv2 UDP source port) with a per-switch seed; spray
//     mode picks a random member per data packet. INT stamps queue length,
//     transmitted bytes, time and rate at each egress (HPCC).
//   - NICs (NIC, QP): RC queue pairs with send queues of work requests
//     (RDMA WRITE and WRITE WITH IMM, zero-length probes included),
//     segmented into MTU packets at transmission time; a packet-by-packet
//     round-robin arbiter at line rate over QPs that have data, are within
//     their hardware rate limit (ibv_modify_qp_rate_limit) and within their
//     NIC congestion controller (optional NIC-level DCQCN, the cc package's
//     reaction point driven per packet and per CNP, or NIC-level HPCC
//     driven by the INT of every ACK; a rate change re-paces the next
//     packet, as HPCC ns-3's RdmaHw does). Responders accept in PSN order only, NAK the first
//     gap (again after NAKInterval), ACK every AckEvery packets, every packet
//     with the AckReq bit (which a requester sets on every packet when its
//     NIC congestion controller has a window, so that the window is
//     ACK-clocked) and every
//     message end, send a CNP for CE-marked arrivals at most once per
//     CNPInterval (50 µs) per QP, and report WRITE WITH IMM arrivals.
//     Requesters retransmit go-back-N on NAK or after the RC ACK timeout
//     (4.096 µs × 2^t); after RetryCount retries without progress the QP
//     enters the error state: the oldest work request completes with
//     StatusRetryExceeded, the rest with StatusFlushed.
//   - Watchdog (WatchdogConfig): reports any port whose data class stays
//     paused for a threshold (pause storms, PFC deadlock) and can recover
//     as switch watchdogs do (drop the stuck queue and ignore pause for a
//     while).
//   - Topologies: sim/topo builds dumbbell, star, leaf-spine (any size and
//     oversubscription, optionally rail-optimised), fat-tree(k) and
//     multi-rail planes; Network.Build computes shortest-path ECMP tables
//     (and, for forwarding, copies compressed by blocks of consecutive
//     destinations: a block whose destinations share a route, as a leaf's
//     hosts do everywhere but at their own leaf, is one entry).
//   - Counters: per port (PortCounters: bytes, frames by kind — data,
//     ACK/NAK, CNP, PFC — so that a run's work compares with another
//     simulator's, pause frames sent
//     and received, time paused, ECN marks and their expectation, drops by
//     cause, queue maximum and time-average), per QP (QPCounters), trace
//     events (Tracer) and periodic samplers (Sampler, SampleQueues).
//
// # Frame sizes
//
// Frame sizes follow RoCEv2 (see the constants in packet.go): every data
// packet carries Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4 =
// 62 bytes of headers, the first packet of a message also a 16-byte RETH,
// the last packet of a WRITE WITH IMM a 4-byte ImmDt; ACK/NAK frames are 66
// bytes, CNPs 78, PFC frames 64. The wire adds 20 bytes per frame
// (preamble, SFD, inter-frame gap). With 4096-byte payloads a long message
// therefore moves at 4096/4178 = 98.04 % of the line rate.
//
// Any payload size from 256 bytes to 9 KB can be configured (NICConfig.MTU;
// real RoCE NICs take only the IB MTUs 256–4096, which qp/verbs keeps), and
// another simulator's framing (NICConfig.Header: every data packet exactly
// Header + payload bytes, as HPCC ns-3's 48 or htsim's 64) instead of
// RoCEv2's. ACKs, NAKs and CNPs travel in the strict-priority control class
// unless NICConfig.AckInDataClass puts them in the data class (HPCC ns-3's
// ACK_HIGH_PRIO 0), where they queue behind data and stop when it is
// paused.
//
// # Time at the qp boundary
//
// The core's time is vtime.Time, nanoseconds. A World starts at Start
// (1 ns) so that every instant converts to a valid, non-zero vtime.Time
// (Time.VTime rounds down); deadlines convert back exactly (FromVTime).
//
// # Deviations
//
// Deviation: one lossless data priority and one control priority per port
// (RoCE deployments use exactly one lossless class); PFC pauses are on/off
// (XOFF until XON) rather than quanta that must be refreshed; NICs never
// send PFC (they consume at line rate); control packets are not charged to
// the switch buffer; PSNs are 32-bit and QPNs network-unique; an errored
// responder is not modelled (the requester's QP fails); receive-not-ready
// is not modelled (receivers always have buffers).
//
// # Ownership and concurrency
//
// Everything in a World — its Network, switches, ports, NICs, QPs and
// packets — belongs to the goroutine running the World and is not safe for
// concurrent use. A Packet has exactly one owner at a time (a queue, a
// cable, or the element processing it) and returns to the pool when
// delivered or dropped.
package sim
