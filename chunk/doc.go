// Package chunk cuts a tensor into chunks, names each chunk in the 32-bit
// immediate of an RDMA WRITE WITH IMM, and tracks reassembly on the
// receiver.
//
// # Model
//
// A tensor of Plan.Size bytes is cut into Plan.Count chunks of
// Plan.ChunkSize bytes each, the last one possibly short (Plan.Span). Chunks
// are the unit of scheduling, completion and retry: the multipath engine
// hands whole chunks to paths, the pacing package may post a chunk as several
// segments, and the chunk's last segment carries the immediate that tells
// the receiver "chunk i of transfer slot s has fully landed" (EncodeImm).
// An RC queue pair completes its messages in order, so when the receiver
// sees the immediate of a chunk's last segment, the chunk's earlier
// segments, posted before it on the same QP, have landed too.
//
// The sender walks a Plan with a Chunker, which fills caller-owned Chunk
// descriptors (with an optional CRC32C of the payload), and may keep a
// Tracker per path: the bounded FIFO of chunks in flight on that queue
// pair, acknowledged in posting order and handed back whole when the path
// fails. The receiver keeps
// one Reassembly per transfer: a bitmap over chunk indices that tolerates
// out-of-order and duplicate completions (retries on another path deliver
// a chunk twice) and says Complete only when every index has been seen.
//
// # Sizes
//
// Chunk sizes are 4 KiB-aligned (Align), within [MinSize, MaxSize] when
// chosen by the caller and within [AutoMin, AutoMax] when chosen
// automatically from the tensor size and the number of paths (see NewPlan for
// the rule). The immediate encoding bounds the number of chunks per transfer
// to MaxChunks, hence the largest tensor to MaxTensor(chunkSize): 64 TiB less
// one chunk at the 4 MiB default.
//
// # Ownership and concurrency
//
// Plan and Chunk are small values, safe to copy and share. Chunker,
// Tracker and Reassembly have one owner each and are not safe for
// concurrent use. Nothing
// here reads a clock, sleeps, starts goroutines or uses global randomness;
// the hot-path methods (Chunker.Next, EncodeImm, DecodeImm, Tracker's
// methods, Reassembly.Mark) do not allocate.
package chunk
