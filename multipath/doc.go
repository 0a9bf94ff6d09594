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
// its window per smoothed RTT), plus half the minimum RTT (the empty path's
// one-way delay: what is queued is in the bytes ahead already) and any wait
// for pacing tokens, scaled up by (1 + ECNPenalty·marked) where marked is the
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
// Concurrent transfers of one priority class share every path. Chunks are
// handed out round-robin across the class's active transfers, one chunk
// per transfer per turn (processor sharing at chunk granularity): with
// equal chunk sizes, k transfers each get 1/k of the aggregate rate while
// all are active. Within a transfer, requeued chunks go before fresh
// ones, so a failure does not push a transfer's tail further out.
//
// # Priorities
//
// A transfer carries a class, TransferSpec.Priority: 0 (PriorityDefault,
// the zero value) to MaxPriority = 7, higher served first. The discipline
// is strict priority with a starvation guard, not weighted sharing: the
// case it serves is a decode step's 2 MiB KV block that must not wait
// behind a weight shard (Mooncake's async_send priorities), where any
// share given to the bulk class is latency taken from the block (an 8:1
// weighting still gives the bulk neighbour 1/9 of the rate: the block
// takes 1.125 times as long at best, before any queueing), while
// latency-bound traffic is a small share of the bytes, so the bulk class
// still gets most of the capacity over time. The guard bounds the
// starvation that strict priority allows when the high class does not
// leave room:
//
//   - Per path: a free path takes the next chunk of the highest class with
//     pending chunks (round-robin within the class), unless the guard is
//     due: once the top class has been handed Config.PriorityGuard bytes
//     (64 MiB by default) of chunks while lower-class work waited, the
//     next chunk goes to the waiting lower class served least recently,
//     and that chunk is not set aside (below).
//   - Across paths: a path holds one active chunk, whose segments it posts
//     as its window allows, plus the work requests already posted. A
//     chunk of a higher class may take a path whose active chunk is of a
//     lower class: the lower chunk's posted segments stay in flight, its
//     unposted rest is set aside (EvChunkPreempt) and goes on once the
//     higher chunk is posted to its last segment (RC keeps a chunk's
//     WRITE WITH IMM after its other segments on the queue pair whatever
//     is posted in between). Congestion-aware choice counts, for a chunk
//     of class c, only the work of classes c and above ahead of it. A
//     chunk set aside can be set aside again after it resumes; while the
//     guard is due nothing is set aside, and a lower class is served when
//     one of its chunks is posted to the end.
//   - Posted work cannot be recalled, so what a higher chunk finds ahead
//     of it is what lower classes posted: by default each path may post
//     its window plus two segments, and software pacing at line rate
//     counts payload only, so a long transfer on several paths of one NIC
//     builds that depth on every path (in the simulator, 4 paths of a
//     100 Gb/s NIC hold about 900 KB: 72 µs). Once the engine has been
//     given a transfer of class k (from the start with Config.Priorities),
//     chunks of classes below k keep a shallow queue: the paths of a NIC
//     share one path's allowance between them (Engine.depth), posted in
//     smaller work requests when that share is under a segment. With one
//     path per NIC this changes nothing, and the first higher-class
//     transfer on an engine that was not told finds the deep queue.
//
// With every transfer in one class the engine behaves exactly as without
// classes (the golden traces pin it).
//
// # Tiers
//
// PathConfig.Tier ranks paths by topology (qp/verbs.ChoosePaths: the NIC
// on the memory's PCIe switch or NUMA node and on the peer's rail first),
// lower preferred. New chunks go to the lowest tier with an up path that
// could take one (free, or preemptable for the chunk's class); a higher
// tier opens only once every up path of the open tiers has had no room
// for a waiting chunk for Config.TierSpill (four round trips by default;
// the wait is a deadline), or at once when no path of a tier is up, and
// the open tiers close back to the lowest with room as soon as it has
// some; chunks already on a higher tier finish there. So a small tensor
// stays on its preferred NICs, a bulk transfer whose chunks queue for
// them spills onto the others, and a failed or stalled preferred NIC
// moves the work instead of failing the transfer. A new transfer is
// planned (chunk.NewPlan) for the usable paths of the lowest tier that has
// one.
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
