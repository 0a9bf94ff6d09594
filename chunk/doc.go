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
// The sender's engine (package multipath) walks a Plan itself: it hands
// chunk indices to paths, posts each chunk as segments (Plan.Span gives a
// chunk's offset and length), retries a chunk from its first segment on
// another path when its path fails, and counts a chunk done when the
// completion of its last segment arrives. The receiver keeps one
// Reassembly per transfer: a bitmap over chunk indices that tolerates
// out-of-order and duplicate completions (a retry on another path delivers
// a chunk twice) and says Complete only when every index has been seen.
// Chunk describes one landed chunk to the application (with Verify and
// CRC32C for end-to-end checks).
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
// Plan and Chunk are small values, safe to copy and share. A Reassembly
// has one owner and is not safe for concurrent use. Nothing here reads a
// clock, sleeps, starts goroutines or uses global randomness; the hot-path
// functions (EncodeImm, DecodeImm, Reassembly.Mark) do not allocate.
package chunk
