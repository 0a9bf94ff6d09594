package chunk

import (
	"fmt"
	"math/bits"
)

// MarkResult is what Reassembly.Mark made of a completion.
type MarkResult uint8

// Mark results.
const (
	// MarkNew: the chunk had not been seen; it now counts as received.
	MarkNew MarkResult = iota + 1

	// MarkDuplicate: the chunk had already been received (a retry on
	// another path, or a replay). Counted in Duplicates, otherwise ignored.
	MarkDuplicate

	// MarkOutOfRange: the index is not a chunk of this transfer (>= the
	// chunk count, including the reserved indices of ProbeImm and its
	// siblings). Counted in OutOfRange, otherwise ignored.
	MarkOutOfRange
)

// String returns the result's name.
func (m MarkResult) String() string {
	switch m {
	case MarkNew:
		return "new"
	case MarkDuplicate:
		return "duplicate"
	case MarkOutOfRange:
		return "out-of-range"
	}
	return "unknown"
}

// Reassembly tracks which chunks of one transfer have landed on the
// receiver: a bitmap of Count bits in uint64 words plus a count of distinct
// set bits. Completions may arrive in any order and more than once; bad
// indices from the wire are counted, never trusted and never panic.
// Complete is true exactly when every index in [0, Count) has been marked,
// so a tensor is never reported complete with a chunk missing.
//
// Memory is Count/8 bytes (2 MiB at MaxChunks), allocated by NewReassembly
// or by Reset when the capacity is insufficient; Mark never allocates.
//
// The zero Reassembly expects no chunks: it is never Complete and every
// Mark is out of range. A Reassembly is not safe for concurrent use.
type Reassembly struct {
	words    []uint64 // bit i%64 of words[i/64] is chunk i; bits >= count stay 0
	count    int      // chunks in the transfer
	received int      // distinct chunks marked (= popcount of words)
	dups     int      // Mark calls that returned MarkDuplicate
	bad      int      // Mark calls that returned MarkOutOfRange
}

// NewReassembly returns a tracker for a transfer of count chunks (Plan.Count,
// in [1, MaxChunks]).
func NewReassembly(count int) (*Reassembly, error) {
	if count < 1 || count > MaxChunks {
		return nil, fmt.Errorf("chunk: reassembly chunk count %d is out of range (valid: 1..%d)", count, MaxChunks)
	}
	r := new(Reassembly)
	r.Reset(count)
	return r, nil
}

// Reset clears r for a new transfer of count chunks, reusing its bitmap
// when large enough (no allocation then). count must be in [1, MaxChunks]
// (a Plan's Count always is); Reset panics otherwise. Validate counts from
// the wire with NewPlan or NewReassembly.
func (r *Reassembly) Reset(count int) {
	if count < 1 || count > MaxChunks {
		panic(fmt.Sprintf("chunk: BUG: Reassembly.Reset(%d) (valid: 1..%d)", count, MaxChunks))
	}
	n := (count + 63) / 64
	if cap(r.words) >= n {
		r.words = r.words[:n]
		clear(r.words)
	} else {
		r.words = make([]uint64, n)
	}
	r.count, r.received, r.dups, r.bad = count, 0, 0, 0
}

// Mark records the completion of chunk index and says whether it was new,
// a duplicate or out of range. It does not allocate.
func (r *Reassembly) Mark(index uint32) MarkResult {
	if uint64(index) >= uint64(r.count) {
		r.bad++
		return MarkOutOfRange
	}
	w, bit := &r.words[index/64], uint64(1)<<(index%64)
	if *w&bit != 0 {
		r.dups++
		return MarkDuplicate
	}
	*w |= bit
	r.received++
	return MarkNew
}

// Has reports whether chunk index has been marked.
func (r *Reassembly) Has(index uint32) bool {
	return uint64(index) < uint64(r.count) && r.words[index/64]&(1<<(index%64)) != 0
}

// Complete reports whether every chunk has been marked.
func (r *Reassembly) Complete() bool { return r.count > 0 && r.received == r.count }

// Count returns the number of chunks in the transfer.
func (r *Reassembly) Count() int { return r.count }

// Received returns the number of distinct chunks marked.
func (r *Reassembly) Received() int { return r.received }

// Duplicates returns how many Marks were duplicates.
func (r *Reassembly) Duplicates() int { return r.dups }

// OutOfRange returns how many Marks were out of range.
func (r *Reassembly) OutOfRange() int { return r.bad }

// Missing appends the indices of the chunks not yet marked to dst, in
// increasing order, and returns the extended slice. It allocates only when
// dst lacks capacity: pass dst[:0] of a reused slice.
func (r *Reassembly) Missing(dst []uint32) []uint32 {
	for wi, w := range r.words {
		free := ^w
		if wi == len(r.words)-1 && r.count%64 != 0 {
			free &= 1<<(r.count%64) - 1 // bits past count are not chunks
		}
		for free != 0 {
			b := bits.TrailingZeros64(free)
			dst = append(dst, uint32(wi*64+b))
			free &= free - 1
		}
	}
	return dst
}
