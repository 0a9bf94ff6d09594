// Package multipath is mptx's sans-I/O transfer engine: it splits tensors
// into chunks, chooses a path (an RC queue pair) for each chunk, posts each
// chunk as paced segments under the path's congestion window and rate,
// recovers from slow, marked and dead paths, and reports when each transfer
// is done. It is a deterministic state machine in the manner of etcd raft's
// RawNode: it never reads a clock, sleeps, starts goroutines, performs I/O
// or uses global randomness, so the same code runs on real verbs, on the TCP
// fallback and inside the simulator's virtual time.
//
// # The driver's duties
//
// A driver (mptx.Sender in the root package) owns the clock, the single
// timer, the randomness source and the queue pairs. It runs this loop:
//
//  1. Read now (one monotonic read per batch, a CQE timestamp, or the
//     simulator's clock).
//  2. Feed inputs, each stamped with now: OnCompletion for every polled send
//     completion (including probes and post failures), OnCounters for
//     ECN/CNP counter readings, OnPathDown/OnPathUp for link events,
//     OnProbeReply where probes are ping-pongs, Submit for new transfers.
//  3. If now >= Deadline(), call OnTimer(now).
//  4. Call Actions(now, buf) and carry out each action: post segments and
//     probes (in order, batched per path), report done and failed
//     transfers. Repeat while it fills buf.
//  5. Arm one timer at Deadline() (0 means none) and wait for it or for
//     the next completion.
//
// # Scheduling model
//
// A path holds at most one "active" chunk: the chunk whose segments it is
// still posting. A path is free when it is usable, has no active chunk and
// has room in its window. When a path is free and chunks are pending, the
// path policy decides whether and where the next chunk goes; segments of
// an active chunk are posted as the path's window (cc.Algorithm.Window,
// capped by Config.MaxInFlight) and pacers (per path and per NIC port) allow.
// The last segment of a chunk is a WRITE WITH IMM whose immediate encodes
// (transfer slot, chunk index) (chunk.EncodeImm); RC ordering guarantees the
// earlier segments landed first. All segments of an attempt use one path.
//
// Congestion-aware choice estimates, for each usable path, when the chunk
// would finish there: the bytes ahead of it on the path (in flight plus the
// active chunk's unposted rest) plus the chunk, divided by the path's
// effective rate (the smaller of its measured delivery rate, its CC rate and
// its window per smoothed RTT), plus half the smoothed RTT and any wait for
// pacing tokens, scaled up by (1 + ECNPenalty·marked) where marked is the
// EWMA of the fraction of the path's recent chunks that saw ECN marks or
// CNPs. A free path takes the chunk if it finishes it no later than the
// other paths would finish all remaining work (earliest-completion-first,
// as MPTCP's ECF scheduler): in bulk every path contributes in proportion to
// its rate; near the tail a slow path stays idle rather than hold the last
// chunk. The named policies round-robin, random, min-rtt and p2c (power of
// two choices by estimated finish) choose among free paths only, for
// comparison.
//
// # Fairness between transfers
//
// Concurrent transfers share every path. Chunks are handed out round-robin
// across active transfers, one chunk per transfer per turn (processor
// sharing at chunk granularity): with equal chunk sizes, k transfers each
// get 1/k of the aggregate rate while all are active. Within a transfer,
// requeued chunks go before fresh ones, so a failure does not push a
// transfer's tail further out.
//
// # Failure handling
//
// A completion with an error, a failed post or OnPathDown takes the path out
// of use and requeues every chunk that had bytes outstanding on it; the
// chunk starts again from its first segment on another path (its attempt
// number grows; late completions of older attempts are counted for the
// path's accounting and otherwise ignored). An errored path is quarantined
// with exponential backoff (Config.QuarantineMin doubling to
// QuarantineMax), then probed with a zero-length WRITE WITH IMM; a probe
// that completes brings it back, one that fails doubles the backoff, and
// after Config.MaxProbeFailures consecutive failures the path is dead (it
// no longer counts as usable, but is still probed every QuarantineMax so a
// long outage can end). A probe of a path lost to a queue-pair error asks
// the driver to reset the queue pair first (Action.Reset, qp.Resetter). A path
// reported down by OnPathDown is not probed until OnPathUp. If the oldest
// outstanding work request on a path is older than the path's timeout
// (2·srtt + 4·rttvar, at least Config.MinTimeout) its chunks are requeued
// and the path quarantined. A transfer fails only when no path is usable;
// its error names every path and why it was lost.
//
// # Ownership and allocation
//
// An Engine is not safe for concurrent use. Submit allocates (a transfer's
// chunk table, reused across transfers when possible); the per-chunk path
// — Actions, OnCompletion, OnTimer, OnCounters — allocates nothing.
package multipath
